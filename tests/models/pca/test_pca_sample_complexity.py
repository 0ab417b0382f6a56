"""benchmarks/pca_sample_complexity.py (CSS 2013's sample complexity in d), reduced.

The crossing point of the mean energy loss is interpolated in (log n, log loss) exactly where a
power law puts it; a reduced run (d = 8 and 16, 6 replicates, fixed seeds) prints the table, both
slopes and a verdict.  The full run (d = 8 … 64, 40 replicates) is on docs/claims.md.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "pca_sample_complexity.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("pca_sample_complexity", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_crossing_of_a_power_law(bench):
    """loss = 30 / n crosses 0.1 at n* = 300, whatever the grid around it; no crossing: NaN."""
    grid = np.array([32, 45, 64, 91, 128, 181, 256, 362, 512, 724])
    assert bench.crossing(grid, 30.0 / grid) == pytest.approx(300.0, rel=1e-12)
    assert math.isnan(bench.crossing(grid, np.full(grid.size, 0.5)))
    assert bench.slope([8, 16, 32], [100.0, 200.0, 400.0]) == pytest.approx(1.0)


def test_reduced_run_prints_slopes_and_verdict(bench, capsys):
    assert bench.main(["--dims", "8", "16", "--reps", "6", "--boot", "5"]) == 0
    out = capsys.readouterr().out
    assert "| 8 |" in out and "| 16 |" in out
    assert "slope of log n* on log d, exponential:" in out and "slope of log n* on log d, mod_sulq:" in out
    assert "claim (exponential slope in [0.7, 1.3]" in out
