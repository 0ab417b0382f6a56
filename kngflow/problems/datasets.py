"""Real data sets for problems: the shared record type and preprocessing steps.

Each model that serves a real data set holds its own loaders and their preprocessing
(``kngflow/models/linear/datasets.py``: ``randhie``; ``kngflow/models/logistic/datasets.py``:
``fair``).  Here: :class:`RealData` (what a loader returns), the steps several loaders share
(:func:`truncate_and_scale`, :func:`scale_to_unit`, :func:`scale_code_ranges`, :func:`frozen`) and
:func:`catalogue`, which turns a model's ``{name: loader}`` table into its
``check_dataset`` / ``load_dataset`` pair.

Nothing is downloaded: the data sets ship inside statsmodels.  A data set is read and
preprocessed once per process (``load_dataset`` is cached) and returned as read-only
arrays, so that the sweep's workers, which ask for the data once per replicate, share one
copy and no mechanism can change it (a write raises ``ValueError``).

Awan & Slavković §6.3 analyse a housing data set that is not public.  Their preprocessing
— a log transform of skewed size variables, truncation of every variable between its
0.0001 and 0.9999 quantiles, then a linear map of the truncated range onto ``[-1, 1]`` —
is :func:`truncate_and_scale`.  **The quantiles are computed from the data without
privacy**: a release on the preprocessed data is ε-DP for those data, with the truncation
and scaling bounds treated as public, not end-to-end DP for the raw table.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kngflow.problems.rows import D_COLUMNS, N_ROWS

__all__ = ["RealData", "catalogue", "truncate_and_scale", "scale_to_unit", "scale_code_ranges", "frozen", "QUANTILES"]

#: Truncation quantiles of Awan & Slavković §6.3.
QUANTILES = (0.0001, 0.9999)


@dataclass(frozen=True, eq=False)
class RealData:
    """A preprocessed real data set.

    Attributes
    ----------
    name : str
    problem : str
        The problem it serves (``"linear"`` or ``"logistic"``).
    X : array (n, d), read-only, C-contiguous float64 in ``[-1, 1]``; column 0 is the intercept (ones).
    y : array (n,), read-only float64: in ``[-1, 1]`` (linear) or ``{0, 1}`` (logistic).
    columns : names of ``X``'s columns (``"const"`` first).
    response : how ``y`` was made from the table.
    ranges : variable -> ``(lo, hi)``, the interval (after any transform) mapped onto ``[-1, 1]``.
    private_preprocessing : bool
        False when a preprocessing step reads the data without privacy (quantile truncation).
    caveat : str
        One sentence on what is and is not private.
    """

    name: str
    problem: str
    X: np.ndarray
    y: np.ndarray
    columns: tuple
    response: str
    ranges: dict
    private_preprocessing: bool
    caveat: str

    n = N_ROWS
    d = D_COLUMNS


def truncate_and_scale(v: np.ndarray, quantiles: tuple = QUANTILES) -> tuple[np.ndarray, tuple[float, float]]:
    """§6.3: clip ``v`` to its ``quantiles`` (computed from ``v`` itself, NOT private) and
    map ``[lo, hi]`` linearly onto ``[-1, 1]``.  Returns the scaled values and ``(lo, hi)``."""
    v = np.asarray(v, dtype=np.float64)
    lo, hi = (float(t) for t in np.quantile(v, quantiles))
    if not hi > lo:
        raise ValueError(f"cannot scale a variable whose {quantiles} quantiles coincide ({lo!r})")
    return scale_to_unit(np.clip(v, lo, hi), lo, hi), (lo, hi)


def scale_to_unit(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``[lo, hi]`` onto ``[-1, 1]``, clipped against rounding."""
    return np.clip(2.0 * (v - lo) / (hi - lo) - 1.0, -1.0, 1.0)


def scale_code_ranges(table, ranges: dict, name: str) -> list[np.ndarray]:
    """The columns of ``table`` (a pandas DataFrame) named in ``ranges``, each mapped from its
    public code range ``(lo, hi)`` onto ``[-1, 1]`` by :func:`scale_to_unit`, in the order of
    ``ranges``.  A value outside its range raises ValueError naming the data set ``name`` and
    the column: the ranges are the questionnaire's, so no preprocessing step reads the data."""
    cols = []
    for c, (lo, hi) in ranges.items():
        v = table[c].to_numpy(dtype=np.float64)
        if v.min() < lo or v.max() > hi:
            raise ValueError(f"{name}: {c} outside its code range [{lo}, {hi}]")
        cols.append(scale_to_unit(v, lo, hi))
    return cols


def frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=np.float64)
    a.setflags(write=False)
    return a


def catalogue(problem: str, loaders: dict[str, Callable[[], RealData]]):
    """``(check_dataset, load_dataset)`` for a model serving the data sets ``loaders`` (name -> loader).

    ``check_dataset(name, problem)`` returns ``name`` if it is one of them, else raises
    ValueError naming ``dataset`` and the allowed values; ``load_dataset(name)`` is the
    preprocessed data set, read once per process.
    """
    allowed = sorted(loaders)

    def check_dataset(name, problem: str = problem) -> str:
        if not isinstance(name, str) or name not in loaders:
            raise ValueError(f"dataset must be one of {allowed} for problem {problem!r}, got {name!r}")
        return name

    @functools.cache
    def load_dataset(name: str) -> RealData:
        if name not in loaders:
            raise ValueError(f"dataset must be one of {allowed}, got {name!r}")
        return loaders[name]()

    return check_dataset, load_dataset
