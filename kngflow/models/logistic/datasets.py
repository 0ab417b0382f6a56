"""The real data set of the logistic problem: Fair's affairs survey, scaled by public code ranges.

Nothing is downloaded: statsmodels installs the data file with the package.

``"fair"``
    Fair's 1974 Redbook survey of 6366 married women (``statsmodels.datasets.fair``).
    Response: any extramarital affair, ``y = 1{affairs > 0}``.  Covariates (5):
    ``rate_marriage`` (codes 1–5), ``age`` (17.5–42), ``yrs_married`` (0.5–23),
    ``religious`` (1–4), ``educ`` (9–20), each mapped from its questionnaire code range
    onto ``[-1, 1]``; ``X = [1, x]`` (d = 6).  No value is truncated: every code lies in
    its range, so no preprocessing step reads the data.
"""

from __future__ import annotations

import numpy as np

from kngflow.problems.datasets import RealData, catalogue, frozen, scale_code_ranges

__all__ = ["DATASETS", "fair", "check_dataset", "load_dataset"]

_FAIR_RANGES = {"rate_marriage": (1.0, 5.0), "age": (17.5, 42.0), "yrs_married": (0.5, 23.0),
                "religious": (1.0, 4.0), "educ": (9.0, 20.0)}


def fair() -> RealData:
    """Fair's affairs survey for logistic regression (module docstring); reads statsmodels' copy."""
    from statsmodels.datasets import fair as _fair

    df = _fair.load_pandas().data
    cols = [np.ones(len(df))] + scale_code_ranges(df, _FAIR_RANGES, "fair")
    return RealData(
        name="fair",
        problem="logistic",
        X=frozen(np.column_stack(cols)),
        y=frozen((df["affairs"].to_numpy() > 0).astype(np.float64)),
        columns=("const", *_FAIR_RANGES),
        response="1{affairs > 0}",
        ranges=dict(_FAIR_RANGES),
        private_preprocessing=True,
        caveat=(
            "covariates scaled to [-1, 1] by the questionnaire's public code ranges, y = 1{affairs > 0}: "
            "no preprocessing step reads the data"
        ),
    )


#: the data sets of the logistic problem: name -> loader
DATASETS = {"fair": fair}

check_dataset, load_dataset = catalogue("logistic", DATASETS)
