"""The privacy accountants that calibrate the Gaussian ERM baselines: dp-accounting's RDP
accountant for noisy gradient descent and for DP-SGD with Poisson subsampling."""

from __future__ import annotations

import functools
import math

import numpy as np



#: RDP orders for the (unsampled) Gaussian, whose RDP ``alpha / (2 z^2)`` is closed form
#: at any order: wide enough that ε down to ~1e-9 is reachable at δ = 1e-5.
_GAUSS_ORDERS = tuple(np.concatenate([np.linspace(1.05, 20.0, 300), np.geomspace(20.5, 1e12, 500)]).tolist())


def _dpa():
    import logging

    import dp_accounting

    # its RDP series log "Negative Renyi divergence ... returning an epsilon of zero" at
    # extreme noise levels, which the calibrations here check and discard themselves
    logging.getLogger("absl").setLevel(logging.ERROR)
    return dp_accounting


def gd_accountant_epsilon(z: float, steps: int, delta: float) -> float:
    """ε (RDP accountant, at ``delta``) of ``steps`` Gaussian mechanisms with noise
    multiplier ``z`` (standard deviation / ℓ2 sensitivity)."""
    dpa = _dpa()
    from dp_accounting.rdp import RdpAccountant

    acc = RdpAccountant(list(_GAUSS_ORDERS))
    acc.compose(dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(float(z)), int(steps)))
    return float(acc.get_epsilon(delta))


@functools.lru_cache(maxsize=256)
def gaussian_gd_noise_multiplier(epsilon: float, delta: float, steps: int) -> float | None:
    """Smallest noise multiplier ``z`` (to relative 1e-9) with ``steps``-fold Gaussian
    composition (ε, δ)-DP by dp_accounting's RDP accountant; None if unreachable."""
    dpa = _dpa()
    from dp_accounting.rdp import RdpAccountant

    try:
        u = dpa.calibrate_dp_mechanism(
            lambda: RdpAccountant(list(_GAUSS_ORDERS)),
            lambda u: dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(math.exp(u)), int(steps)),
            float(epsilon), float(delta),
            bracket_interval=dpa.ExplicitBracketInterval(-40.0, 60.0), tol=1e-9)
    except Exception:  # target outside what the accountant certifies in the bracket
        return None
    return math.exp(u)


#: RDP orders for the subsampled Gaussian: integers only (dp_accounting's exact finite sum;
#: its series for fractional orders is slow and fails to converge at small z).
_SGD_ORDERS = tuple(list(range(2, 33)) + [40, 48, 56, 64, 80, 96, 128, 160, 192, 256, 384, 512, 1024, 2048, 4096, 8192])


def dpsgd_accountant_epsilon(z: float, q: float, steps: int, delta: float) -> float:
    """ε (RDP accountant, integer orders, add-or-remove-one, at ``delta``) of ``steps`` Poisson-subsampled
    (rate ``q``) Gaussian mechanisms with noise multiplier ``z``."""
    dpa = _dpa()
    from dp_accounting.rdp import RdpAccountant

    acc = RdpAccountant(list(_SGD_ORDERS))
    acc.compose(dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(float(q), dpa.GaussianDpEvent(float(z))), int(steps)))
    return float(acc.get_epsilon(delta))


@functools.lru_cache(maxsize=256)
def dpsgd_noise_multiplier(epsilon: float, delta: float, q: float, steps: int) -> float | None:
    """Smallest ``z`` (to relative 1e-5) with ``steps`` Poisson(q)-subsampled Gaussian
    mechanisms (ε, δ)-DP under add-or-remove-one by dp_accounting's RDP accountant
    (orders ``_SGD_ORDERS``); None if unreachable (tiny ε: below the accountant's floor) or if
    the accountant's ε at the root is not within (ε/2, ε]."""
    dpa = _dpa()
    from dp_accounting.rdp import RdpAccountant

    a = np.array(_SGD_ORDERS, dtype=float)
    if epsilon <= float(np.min(np.log1p(-1.0 / a) - (math.log(delta) + np.log(a)) / (a - 1.0))):
        return None  # below the accountant's floor (RDP >= 0 at every order)
    try:
        u = dpa.calibrate_dp_mechanism(
            lambda: RdpAccountant(list(_SGD_ORDERS)),
            lambda u: dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(float(q), dpa.GaussianDpEvent(math.exp(u))),
                                              int(steps)),
            float(epsilon), float(delta),
            bracket_interval=dpa.ExplicitBracketInterval(-8.0, 16.0), tol=1e-5)
    except Exception:
        return None
    z = math.exp(u)
    # dp_accounting returns ε = 0 where its RDP series lose precision (huge z): a root found
    # there is an artefact, not a calibration
    if not 0.5 * epsilon < dpsgd_accountant_epsilon(z, q, steps, delta) <= epsilon * (1.0 + 1e-9):
        return None
    return z
