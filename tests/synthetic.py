"""Synthetic stores with the contract schema and known error laws (tests and demos).

:func:`synthetic_dataset` builds, in memory, a dataset with exactly the store
schema of ``docs/contracts.md`` whose estimates follow simple Gaussian laws,
so the quantities the analysis layer estimates are known in closed form:

* the non-private estimate of coefficient j is ``theta*_j + s_j Z`` with
  ``s_j = sigma_j / sqrt(n)``, recorded in the standard-error variable
  (``stderr``, default :data:`DEFAULT_STDERR`) — so its error is
  ``C n^(-1/2)`` times a chi-like variable (log–log slope exactly −1/2) and its
  CI ``± 1.96 s_j`` covers ``theta*_j`` with probability 0.95;
* every non-private mechanism (``private=False``) releases that estimate;
* every private mechanism adds independent Gaussian noise with standard deviation
  ``sd(n, epsilon)`` per coefficient, either to the non-private estimate
  (``base="reference"``, paired as in the papers' Algorithm 1) or to the truth
  (``base="truth"``).

The store declares what the sweep engine declares for a real one: the root
attributes ``nonprivate_labels`` (JSON list of the non-private labels) and
``reference_stderr`` (the standard-error variable, ``""`` for none).

:func:`write_store` writes such a dataset the way a run does — lazily chunked,
NaN fill values, int8 flags — and reopens it with :func:`xarray.open_zarr`.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr

__all__ = ["SyntheticMechanism", "synthetic_dataset", "write_store", "spec_toml", "DEFAULT_PROBLEM", "DEFAULT_STDERR"]

SAMPLER_CODES = {"none": 0, "exact": 1, "gibbs": 2, "metropolis": 3}
#: The problem name a synthetic store claims by default (a fake: nothing is simulated with
#: it).  The kinds of mechanisms without an explicit ``private`` are resolved against it.
DEFAULT_PROBLEM = "linear"
#: The default name of a synthetic store's standard-error variable, as that problem names it.
DEFAULT_STDERR = "ols_stderr"
_BASES = ("reference", "truth")


@dataclass(frozen=True)
class SyntheticMechanism:
    """One mechanism of a synthetic store.

    ``sd(n, epsilon)`` is the per-coefficient SD of the noise added on top of
    ``base`` (``"reference"``: the non-private estimate, or ``"truth"``);
    ignored for a non-private mechanism.  ``private``: whether the mechanism is
    private; None (default) asks the registry what the class of ``kind`` for
    the store's problem declares, and counts a kind it cannot resolve (a
    made-up one) as private.
    """

    label: str
    kind: str
    sd: Callable[[int, float], float] = lambda n, eps: 0.0
    base: str = "reference"
    private: bool | None = None

    def __post_init__(self):
        if self.base not in _BASES:
            raise ValueError(f"base={self.base!r}; allowed values are {_BASES}")

    def is_private(self, problem: str | None) -> bool:
        """``private``, or the registry's answer for (``problem``, ``kind``); True when unresolved."""
        if self.private is not None:
            return bool(self.private)
        from kngflow.analysis.declared import declared_private

        return declared_private(problem, self.kind) is not False


def spec_toml(mechanisms: Sequence[SyntheticMechanism], n: Sequence[int], epsilon: Sequence[float], replicates: int, problem: str) -> str:
    """A spec text in the ``[[mechanisms]]`` (label, kind) form."""
    lines = [
        f'problem = "{problem}"',
        "seed = 20190613",
        f"replicates = {replicates}",
        f"n = [{', '.join(str(int(v)) for v in n)}]",
        f"epsilon = [{', '.join(repr(float(v)) for v in epsilon)}]",
        "",
    ]
    for m in mechanisms:
        lines += ["[[mechanisms]]", f'label = "{m.label}"', f'kind = "{m.kind}"', ""]
    return "\n".join(lines)


def synthetic_dataset(
    mechanisms: Sequence[SyntheticMechanism],
    *,
    n: Sequence[int] = (100, 1000, 10_000, 100_000),
    epsilon: Sequence[float] = (1.0,),
    replicates: int = 100,
    d: int = 3,
    sigma: Sequence[float] | None = None,
    seed: int = 0,
    done: Callable[[str, int, float, int], bool] | np.ndarray | None = None,
    problem: str = DEFAULT_PROBLEM,
    stderr: str | None = DEFAULT_STDERR,
) -> xr.Dataset:
    """Build a store-schema dataset in memory (see the module docstring).

    Parameters
    ----------
    problem : str
        The problem name the store claims (attributes ``problem`` and ``spec``).
    stderr : str or None
        Name of the variable with the non-private estimate's standard errors
        (dims n, replicate, coef; the store's ``reference_stderr``); None: no
        such variable, ``reference_stderr = ""``.
    done : callable or bool array, optional
        ``done(label, n, epsilon, replicate) -> bool`` or an array over
        (mechanism, n, epsilon, replicate); unfinished cells hold fill values
        (NaN, ``sampler = -1``, ``done = 0``).  Default: everything finished.
    """
    rng = np.random.default_rng(seed)
    labels = [m.label for m in mechanisms]
    n_arr = np.asarray(n, dtype=np.int64)
    eps_arr = np.asarray(epsilon, dtype=np.float64)
    M, N, E, R = len(labels), n_arr.size, eps_arr.size, int(replicates)
    theta = np.linspace(-1.0, 1.0, d)
    sig = np.ones(d) if sigma is None else np.asarray(sigma, dtype=float)
    ols_se = sig[None, None, :] / np.sqrt(n_arr.astype(float))[:, None, None] * np.ones((N, R, d))
    np_est = theta + ols_se * rng.standard_normal((N, R, d))
    private = [m.is_private(problem) for m in mechanisms]
    est = np.empty((M, N, E, R, d))
    for i, m in enumerate(mechanisms):
        for a, nv in enumerate(n_arr):
            for b, ev in enumerate(eps_arr):
                if not private[i]:
                    est[i, a, b] = np_est[a]
                else:
                    centre = np_est[a] if m.base == "reference" else theta
                    est[i, a, b] = centre + m.sd(int(nv), float(ev)) * rng.standard_normal((R, d))
    err = np.sqrt(((est - theta) ** 2).sum(axis=-1))
    if done is None:
        mask = np.ones((M, N, E, R), dtype=bool)
    elif callable(done):
        mask = np.array(
            [[[[bool(done(lab, int(nv), float(ev), r)) for r in range(R)] for ev in eps_arr] for nv in n_arr] for lab in labels]
        ).reshape(M, N, E, R)
    else:
        mask = np.asarray(done, dtype=bool)
    seconds = rng.uniform(0.01, 0.1, (M, N, E, R))
    sampler = np.where(~np.array(private, dtype=bool)[:, None, None, None], 0, 1) * np.ones((M, N, E, R))
    cell = ("mechanism", "n", "epsilon", "replicate")
    nan_unless = lambda x: np.where(mask, x, np.nan)  # noqa: E731
    per_data = {"scale": (("n", "replicate"), np.full((N, R), 1.0))}
    if stderr:
        per_data[stderr] = (("n", "replicate", "coef"), ols_se)
    ds = xr.Dataset(
        {
            "estimate": (cell + ("coef",), np.where(mask[..., None], est, np.nan)),
            "error": (cell, nan_unless(err)),
            "seconds": (cell, nan_unless(seconds)),
            "acceptance": (cell, nan_unless(np.ones((M, N, E, R)))),
            "steps": (cell, nan_unless(np.zeros((M, N, E, R)))),
            "sampler": (cell, np.where(mask, sampler, -1).astype(np.int8)),
            "done": (cell, mask.astype(np.int8)),
            "failed": (cell, np.zeros((M, N, E, R), dtype=np.int8)),
            **per_data,
            "theta_star": (("coef",), theta),
        },
        coords={
            "mechanism": np.array(labels),
            "n": n_arr,
            "epsilon": eps_arr,
            "replicate": np.arange(R, dtype=np.int64),
            "coef": np.arange(d, dtype=np.int64),
        },
    )
    ds["sampler"].attrs.update(flag_values=list(SAMPLER_CODES.values()), flag_meanings=" ".join(SAMPLER_CODES))
    ds["done"].attrs["flag_meanings"] = "1 = finished"
    ds.attrs.update(
        spec=spec_toml(mechanisms, n_arr, eps_arr, R, problem),
        spec_hash="synthetic",
        versions=json.dumps({"numpy": np.__version__, "xarray": xr.__version__}),
        caveats="synthetic store: Gaussian error laws, not a simulation",
        problem=problem,
        kngflow_version="synthetic",
        nonprivate_labels=json.dumps([m.label for m, p in zip(mechanisms, private) if not p]),
        reference_stderr=stderr or "",
    )
    return ds


def write_store(ds: xr.Dataset, path: str | os.PathLike, *, replicate_chunk: int = 25) -> xr.Dataset:
    """Write ``ds`` to a zarr store chunked like a run's (one mechanism and n per chunk) and reopen it lazily."""
    chunks = {"mechanism": 1, "n": 1, "replicate": min(replicate_chunk, ds.sizes["replicate"])}
    chunked = ds.chunk(chunks)
    encoding = {}
    for name, var in ds.data_vars.items():
        if var.dtype.kind == "f":
            encoding[name] = {"_FillValue": np.nan}
        elif name == "sampler":
            encoding[name] = {"_FillValue": np.int8(-1)}
        elif name in ("done", "failed"):
            encoding[name] = {"_FillValue": np.int8(0)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chunked.to_zarr(os.fspath(path), mode="w", encoding=encoding, consolidated=False)
        return xr.open_zarr(os.fspath(path), consolidated=False)
