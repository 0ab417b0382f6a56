"""The regression data protocols of the KNG paper's Algorithm 1, shared by linear and quantile regression.

``"paper"``: ``Y`` is divided by ``R = max|Y|``, computed WITHOUT privacy, exactly as the
paper does; ``"public_bound"``: ``Y`` is clipped to a public ``[-y_bound, y_bound]`` and
divided by ``y_bound``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PROTOCOLS", "protocol_caveats", "protocol_audit_options", "check_regression_n"]

PROTOCOLS = ("paper", "public_bound")


def protocol_caveats(protocol: str, y_bound) -> str:
    """The caveat a store records for ``protocol``."""
    if protocol == "paper":
        return (
            "paper protocol: Y is divided by R = max|Y| computed WITHOUT privacy "
            "(KNG paper, Algorithm 1); releases are DP for the scaled data only."
        )
    return f"public_bound protocol: Y clipped to [-{y_bound}, {y_bound}] and divided by that public bound."


def check_regression_n(n, d: int) -> None:
    """Raise TypeError/ValueError naming ``n`` unless an integer ``>= d``."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n must be an integer, got {type(n).__name__}")
    if n < d:
        raise ValueError(f"n must be at least d={d}, got n={n}")


def protocol_audit_options(defaults: dict, given: dict) -> dict:
    """``defaults`` under ``given``, without the default ``y_bound`` when ``given`` picks another protocol."""
    out = {**defaults, **given}
    if out["protocol"] != "public_bound" and "y_bound" not in given:
        del out["y_bound"]
    return out
