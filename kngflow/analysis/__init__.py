"""Analysis of kngflow stores: the ``ds.kng`` accessor, Monte Carlo summaries, figures, reports.

Importing this package registers the :class:`xarray.Dataset` accessor
``ds.kng`` (see :mod:`kngflow.analysis.accessor`)::

    import xarray as xr
    import kngflow.analysis

    ds = xr.open_zarr("results/kng_linear.zarr")
    ds.kng.summary().log10_mean_error.compute()
    ds.kng.slopes()
    ds.kng.diagnose()                  # bias, SD, RMSE, MAE, coverage ± Monte Carlo SE

:func:`kngflow.analysis.report.write_report` is what ``kngflow report STORE
--out DIR [--html]`` calls.  Everything here reads the store schema of
``docs/contracts.md`` and never imports the mechanism or sweep layers, except
through :mod:`kngflow.analysis.declared` (lazily, and only for a store older than
the ``nonprivate``/``reference_stderr`` attributes, or for a problem's own report
sections): it names no problem and no mechanism kind.
"""

from . import accessor  # noqa: F401  (registers ds.kng)
from .accessor import KngAccessor
from .declared import nonprivate_labels, reference_stderr
from .diagnosands import diagnose
from .figures import figure_coverage_vs_epsilon, figure_error_vs_epsilon, figure_error_vs_n
from .summaries import (
    completeness,
    coverage,
    describe_completeness,
    error_summary,
    kinds_by_label,
    ratio_to_reference,
    reference_coverage,
    reference_label,
    slope_fit,
)

__all__ = [
    "KngAccessor",
    "completeness",
    "coverage",
    "describe_completeness",
    "diagnose",
    "error_summary",
    "figure_coverage_vs_epsilon",
    "figure_error_vs_epsilon",
    "figure_error_vs_n",
    "kinds_by_label",
    "nonprivate_labels",
    "ratio_to_reference",
    "reference_coverage",
    "reference_label",
    "reference_stderr",
    "slope_fit",
    "write_report",
]


def write_report(store_path, out_dir, *, html: bool = False) -> str:
    """See :func:`kngflow.analysis.report.write_report`."""
    from .report import write_report as _write_report

    return _write_report(store_path, out_dir, html=html)
