"""Real data sets that ship inside statsmodels, preprocessed for the ``linear`` and ``logistic`` problems.

Nothing is downloaded: statsmodels installs the data files with the package.  A data set
is read and preprocessed once per process (:func:`load_dataset` is cached) and returned as
read-only arrays, so that the sweep's workers, which ask for the data once per replicate,
share one copy and no mechanism can change it (a write raises ``ValueError``).

Awan & Slavković §6.3 analyse a housing data set that is not public.  Their preprocessing
— a log transform of skewed size variables, truncation of every variable between its
0.0001 and 0.9999 quantiles, then a linear map of the truncated range onto ``[-1, 1]`` —
is applied here to a public stand-in (:func:`randhie`).  **The quantiles are computed
from the data without privacy**: a release on the preprocessed data is ε-DP for those
data, with the truncation and scaling bounds treated as public, not end-to-end DP for the
raw table (spend part of the budget on private quantiles, or take bounds from a public
source, for that).  :func:`fair` needs no data-dependent step: its covariates are bounded
questionnaire codes, scaled by their public code ranges.

Data sets (``DATASETS``: name -> the problem they serve)

``"randhie"`` (linear)
    RAND Health Insurance Experiment, 20 190 person-years (``statsmodels.datasets.randhie``).
    Response: ``log(1 + mdvis)``, the log of one plus the number of outpatient visits to a
    physician (the analogue of §6.3's log rent; ``mdvis`` is a count with skewness 4.8,
    0.5 after the log).  Covariates (9): ``lncoins`` (log coinsurance), ``idp`` (individual
    deductible plan), ``lpi`` (log participation incentive), ``fmde`` (log maximum
    deductible expenditure), ``physlm`` (physical limitation), ``disea`` (number of chronic
    diseases), ``hlthg``, ``hlthf``, ``hlthp`` (self-rated health good / fair / poor;
    excellent omitted).  ``lncoins``, ``lpi`` and ``fmde`` are logs already; ``disea`` is
    left untransformed (its log is skewed the other way: 1.2 against −1.6).  Every
    variable, the response included, is truncated at its 0.0001 and 0.9999 quantiles
    (``numpy.quantile``, linear interpolation) and mapped onto ``[-1, 1]`` (indicators go
    to ``{-1, 1}``).  ``X = [1, x]`` (intercept first, d = 10), ``y`` in ``[-1, 1]``
    (public bound 1 after preprocessing).
``"fair"`` (logistic)
    Fair's 1974 Redbook survey of 6366 married women (``statsmodels.datasets.fair``).
    Response: any extramarital affair, ``y = 1{affairs > 0}``.  Covariates (5):
    ``rate_marriage`` (codes 1–5), ``age`` (17.5–42), ``yrs_married`` (0.5–23),
    ``religious`` (1–4), ``educ`` (9–20), each mapped from its questionnaire code range
    onto ``[-1, 1]``; ``X = [1, x]`` (d = 6).  No value is truncated: every code lies in
    its range.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

__all__ = ["DATASETS", "RealData", "load_dataset", "check_dataset", "truncate_and_scale", "QUANTILES"]

#: Truncation quantiles of Awan & Slavković §6.3.
QUANTILES = (0.0001, 0.9999)

#: Data set name -> the problem it serves.
DATASETS = {"randhie": "linear", "fair": "logistic"}

_RANDHIE_COVARIATES = ("lncoins", "idp", "lpi", "fmde", "physlm", "disea", "hlthg", "hlthf", "hlthp")
_FAIR_RANGES = {"rate_marriage": (1.0, 5.0), "age": (17.5, 42.0), "yrs_married": (0.5, 23.0),
                "religious": (1.0, 4.0), "educ": (9.0, 20.0)}


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

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        return int(self.X.shape[1])


def check_dataset(name, problem: str) -> str:
    """``name`` if it is a data set for ``problem``; ValueError naming ``dataset`` and the allowed values."""
    allowed = sorted(k for k, p in DATASETS.items() if p == problem)
    if not isinstance(name, str) or name not in allowed:
        raise ValueError(f"dataset must be one of {allowed} for problem {problem!r}, got {name!r}")
    return name


def truncate_and_scale(v: np.ndarray, quantiles: tuple = QUANTILES) -> tuple[np.ndarray, tuple[float, float]]:
    """§6.3: clip ``v`` to its ``quantiles`` (computed from ``v`` itself, NOT private) and
    map ``[lo, hi]`` linearly onto ``[-1, 1]``.  Returns the scaled values and ``(lo, hi)``."""
    v = np.asarray(v, dtype=np.float64)
    lo, hi = (float(t) for t in np.quantile(v, quantiles))
    if not hi > lo:
        raise ValueError(f"cannot scale a variable whose {quantiles} quantiles coincide ({lo!r})")
    return _scale(np.clip(v, lo, hi), lo, hi), (lo, hi)


def _scale(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``[lo, hi]`` onto ``[-1, 1]``, clipped against rounding."""
    return np.clip(2.0 * (v - lo) / (hi - lo) - 1.0, -1.0, 1.0)


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=np.float64)
    a.setflags(write=False)
    return a


def randhie() -> RealData:
    """The RAND HIE data, preprocessed as §6.3 (module docstring); reads statsmodels' copy."""
    from statsmodels.datasets import randhie as _randhie

    df = _randhie.load_pandas().data
    ranges = {}
    y, ranges["log1p_mdvis"] = truncate_and_scale(np.log1p(df["mdvis"].to_numpy(dtype=np.float64)))
    cols = [np.ones(len(df))]
    for c in _RANDHIE_COVARIATES:
        v, ranges[c] = truncate_and_scale(df[c].to_numpy(dtype=np.float64))
        cols.append(v)
    return RealData(
        name="randhie",
        problem="linear",
        X=_frozen(np.column_stack(cols)),
        y=_frozen(y),
        columns=("const", *_RANDHIE_COVARIATES),
        response="log(1 + mdvis), truncated at its 0.0001/0.9999 quantiles and scaled to [-1, 1]",
        ranges=ranges,
        private_preprocessing=False,
        caveat=(
            "preprocessing as Awan-Slavkovic 6.3 (log transform, truncation at the 0.0001/0.9999 quantiles, "
            "scaling to [-1, 1]): the quantiles are computed from the data WITHOUT privacy, so releases are "
            "DP for the preprocessed data only, not end-to-end for the raw table"
        ),
    )


def fair() -> RealData:
    """Fair's affairs survey for logistic regression (module docstring); reads statsmodels' copy."""
    from statsmodels.datasets import fair as _fair

    df = _fair.load_pandas().data
    cols = [np.ones(len(df))]
    for c, (lo, hi) in _FAIR_RANGES.items():
        v = df[c].to_numpy(dtype=np.float64)
        if v.min() < lo or v.max() > hi:  # the codes are the questionnaire's: never outside
            raise ValueError(f"fair: {c} outside its code range [{lo}, {hi}]")
        cols.append(_scale(v, lo, hi))
    return RealData(
        name="fair",
        problem="logistic",
        X=_frozen(np.column_stack(cols)),
        y=_frozen((df["affairs"].to_numpy() > 0).astype(np.float64)),
        columns=("const", *_FAIR_RANGES),
        response="1{affairs > 0}",
        ranges=dict(_FAIR_RANGES),
        private_preprocessing=True,
        caveat=(
            "covariates scaled to [-1, 1] by the questionnaire's public code ranges, y = 1{affairs > 0}: "
            "no preprocessing step reads the data"
        ),
    )


_LOADERS = {"randhie": randhie, "fair": fair}


@functools.cache
def load_dataset(name: str) -> RealData:
    """The preprocessed data set ``name`` (one of :data:`DATASETS`), read once per process."""
    if name not in _LOADERS:
        raise ValueError(f"dataset must be one of {sorted(_LOADERS)}, got {name!r}")
    return _LOADERS[name]()
