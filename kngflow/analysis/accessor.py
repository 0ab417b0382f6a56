"""The ``ds.kng`` accessor: Monte Carlo summaries of a kngflow store.

Registered on import of :mod:`kngflow.analysis`::

    import xarray as xr
    import kngflow.analysis  # noqa: F401  (registers ds.kng)

    ds = xr.open_zarr("results/kng_linear.zarr")
    s = ds.kng.summary()              # lazy, per (mechanism, n, epsilon)
    s.log10_mean_error.compute()
    ds.kng.slopes(n_min=10**4)        # log-log slopes ± SE per (mechanism, epsilon)
    ds.kng.coverage(how="per_coef")   # Awan–Slavković Algorithm 4
    print(ds.kng.describe_completeness())
    ds.kng.diagnose().bias.compute()  # per (mechanism, n, epsilon, coef), with bias_se
    ds.kng.check_claims("workflows/kng_linear.claims.toml")  # the paper's claims: verdicts

Every method that returns per-cell summaries is lazy on a dask-backed store
(only the reduced result is computed when you ask for it); ``slopes`` and the
completeness helpers compute their small results.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import xarray as xr

from . import summaries as _s

__all__ = ["KngAccessor"]


@xr.register_dataset_accessor("kng")
class KngAccessor:
    """Analysis helpers for datasets with the kngflow store schema."""

    def __init__(self, ds: xr.Dataset) -> None:
        self._ds = ds
        self._kinds: dict[str, str] | None = None

    # -- mechanisms -------------------------------------------------------
    @property
    def kinds(self) -> dict[str, str]:
        """``{label: kind}`` for every mechanism (from the ``spec`` attribute)."""
        if self._kinds is None:
            self._kinds = _s.kinds_by_label(self._ds)
        return dict(self._kinds)

    @property
    def reference(self) -> str | None:
        """Label of the non-private reference mechanism, or ``None`` when the store has none."""
        return _s.reference_label(self._ds, required=False)

    @property
    def nonprivate(self) -> list[str]:
        """Labels of the non-private mechanisms (classes with ``private = False``)."""
        return _s.nonprivate_labels(self._ds)

    @property
    def reference_stderr(self) -> str | None:
        """Name of the variable with the reference's standard errors, or ``None``."""
        return _s.reference_stderr(self._ds)

    def labels_of_kind(self, kind: str) -> list[str]:
        """Mechanism labels whose kind (the spec's ``kind``) is ``kind``."""
        return [label for label, k in self.kinds.items() if k == kind]

    # -- masks ------------------------------------------------------------
    @property
    def finished(self) -> xr.DataArray:
        """Boolean mask ``done == 1`` (lazy)."""
        return _s.finished(self._ds)

    def masked(self, name: str = "error") -> xr.DataArray:
        """``ds[name]`` with unfinished cells set to NaN (lazy)."""
        return _s.masked(self._ds, name)

    # -- summaries ----------------------------------------------------------
    def summary(self, reference: str | None = None, name: str = "error") -> xr.Dataset:
        """Error summaries over replicates; see :func:`kngflow.analysis.summaries.error_summary`."""
        return _s.error_summary(self._ds, reference=reference, name=name)

    def ratio(self, reference: str | None = None, name: str = "error") -> xr.Dataset:
        """Paired ratio of mean error to the non-private reference (``ratio``, ``ratio_se``, ``n_paired``)."""
        return _s.ratio_to_reference(self._ds, reference=reference, name=name)

    def slopes(
        self,
        *,
        n_min: float | None = None,
        n_max: float | None = None,
        absolute_sigma: bool = True,
        summary: xr.Dataset | None = None,
    ) -> xr.Dataset:
        """WLS slopes of log10 mean error on log10 n per (mechanism, epsilon) with SEs."""
        return _s.slope_fit(self._ds, n_min=n_min, n_max=n_max, summary=summary, absolute_sigma=absolute_sigma)

    def coverage(
        self,
        *,
        reference: str | None = None,
        level: float = 0.95,
        how: str = "all",
        coefs: Iterable[int] | slice | None = None,
        stderr: str | None = None,
    ) -> xr.Dataset:
        """Fraction of DP estimates inside the non-private CI (Awan–Slavković Algorithm 4)."""
        return _s.coverage(self._ds, reference=reference, level=level, how=how, coefs=coefs, stderr=stderr)

    def reference_coverage(
        self,
        *,
        reference: str | None = None,
        level: float = 0.95,
        how: str = "all",
        coefs: Iterable[int] | slice | None = None,
        stderr: str | None = None,
    ) -> xr.Dataset:
        """Empirical coverage of ``theta_star`` by the non-private CI."""
        return _s.reference_coverage(self._ds, reference=reference, level=level, how=how, coefs=coefs, stderr=stderr)

    def diagnose(
        self,
        *,
        level: float = 0.95,
        stderr: str | None = None,
        mcse: str = "closed",
        n_boot: int = 200,
        seed: int = 0,
    ) -> xr.Dataset:
        """Bias, SD, RMSE, MAE and coverage per (mechanism, n, epsilon, coef), each with its
        Monte Carlo SE (``<name>_se``); lazy.  See :func:`kngflow.analysis.diagnosands.diagnose`."""
        from .diagnosands import diagnose

        return diagnose(self._ds, level=level, stderr=stderr, mcse=mcse, n_boot=n_boot, seed=seed)

    def check_claims(self, path=None) -> list:
        """Evaluate a paper's claims file on this store: a list of
        :class:`~kngflow.analysis.claims.Verdict` (id, source, statement, verdict in
        agrees / disagrees / inconclusive, and the numbers behind it).

        ``path`` defaults to ``NAME.claims.toml`` of the study the store came from
        (:func:`~kngflow.analysis.claims.default_claims_path`); ClaimsError when there is none.
        Render the verdicts with :func:`~kngflow.analysis.claims.verdict_table`."""
        from .claims import check_claims

        source = self._ds.encoding.get("source") if hasattr(self._ds, "encoding") else None
        return check_claims(self._ds, path, store_path=source)

    # -- completeness -------------------------------------------------------
    def n_done(self) -> xr.DataArray:
        """Finished replicates per (mechanism, n, epsilon) (lazy)."""
        return self.finished.sum("replicate")

    def completeness(self) -> dict[str, Any]:
        """``total``, ``finished``, ``failed`` cell counts and ``per_group`` finished replicates."""
        return _s.completeness(self._ds)

    def describe_completeness(self) -> str:
        """e.g. ``"412 of 1800 cells finished (22.9%); missing: n=10^7 (0/100 replicates)"``."""
        return _s.describe_completeness(self._ds)

    # -- figures ------------------------------------------------------------
    def plot_error_vs_n(self, **kwargs: Any):
        """:func:`kngflow.analysis.figures.figure_error_vs_n` on this dataset."""
        from .figures import figure_error_vs_n

        return figure_error_vs_n(self._ds, **kwargs)

    def plot_error_vs_epsilon(self, **kwargs: Any):
        """:func:`kngflow.analysis.figures.figure_error_vs_epsilon` on this dataset."""
        from .figures import figure_error_vs_epsilon

        return figure_error_vs_epsilon(self._ds, **kwargs)

    def plot_coverage_vs_epsilon(self, **kwargs: Any):
        """:func:`kngflow.analysis.figures.figure_coverage_vs_epsilon` on this dataset."""
        from .figures import figure_coverage_vs_epsilon

        return figure_coverage_vs_epsilon(self._ds, **kwargs)
