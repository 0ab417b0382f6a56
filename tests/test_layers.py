"""The layering rule: the numerical layers never import dask, distributed, zarr or xarray."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["kngflow.mechanisms", "kngflow.noise", "kngflow.problems", "kngflow.models.linear.sampler", "kngflow.audit"])
def test_numerical_layers_do_not_import_dask(module):
    code = (
        f"import sys, {module}; "
        "bad = [m for m in ('dask', 'distributed', 'zarr', 'xarray') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
