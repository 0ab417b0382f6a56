"""The real data set of the linear problem: RAND HIE, preprocessed as Awan & Slavković §6.3.

Nothing is downloaded: statsmodels installs the data file with the package.

``"randhie"``
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
    (public bound 1 after preprocessing).  **The quantiles are computed from the data
    without privacy** (:mod:`kngflow.problems.datasets`).
"""

from __future__ import annotations

import numpy as np

from kngflow.problems.datasets import RealData, catalogue, frozen, truncate_and_scale

__all__ = ["DATASETS", "randhie", "check_dataset", "load_dataset"]

_RANDHIE_COVARIATES = ("lncoins", "idp", "lpi", "fmde", "physlm", "disea", "hlthg", "hlthf", "hlthp")


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
        X=frozen(np.column_stack(cols)),
        y=frozen(y),
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


#: the data sets of the linear problem: name -> loader
DATASETS = {"randhie": randhie}

check_dataset, load_dataset = catalogue("linear", DATASETS)
