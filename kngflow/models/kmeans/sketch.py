r"""Compressive k-means from a Laplace-noised random-Fourier sketch (after Schellekens, Chatalic, Houssiau, de Montjoye, Jacques & Gribonval 2019).

Sketch
------
``m`` frequencies ``omega_1, ..., omega_m`` in ``R^d`` are drawn i.i.d. ``N(0, I / bandwidth^2)``
from a **public** seed (``frequency_seed``; they depend on ``d``, ``m``, the bandwidth and the
seed only, never on the data).  A record's features are
``phi(x) = (cos(omega_l . x), sin(omega_l . x))_{l = 1..m}`` in ``R^(2m)`` (the real and
imaginary parts of ``exp(i omega_l . x)``), and the sketch is their average
``z(D) = (1/n) sum_i phi(x_i)`` (``n`` public).

Sensitivity (replace-one, derived here).  Replacing ``x`` by ``x'`` changes ``z`` by
``(phi(x') - phi(x)) / n``.  For each frequency the pair ``(cos a, sin a)`` lies on the unit
circle, and two points of the unit circle are at ℓ2 distance at most 2, so at ℓ1 distance at
most ``sqrt(2) * 2`` (Cauchy–Schwarz in ``R^2``; equality for antipodal points on a diagonal,
``a - a' = pi``, ``a = pi/4``).  Summed over the ``m`` frequencies:

    Delta_1(z) = 2 sqrt(2) m / n

(Schellekens et al. 2019, Lemma 1, for the same features), whatever the records' domain.  The
released sketch is ``z~ = z + V`` with ``V`` i.i.d. ``Lap(b)`` per coordinate,
``b = 2 sqrt(2) m / (n eps)``: the density ratio is at most ``exp(||z - z'||_1 / b) <= e^eps``,
ε-DP.  The bound holds for every record pair, but no pair of records reaches it for every
frequency at once, so an audit over actual records finds a loss below ε (the closed-form
statistic audit reports it).

Decoder (post-processing; a simplified CL-OMP, documented as such)
------------------------------------------------------------------
The centres are fitted to ``z~`` as a mixture of ``k`` Diracs, minimising
``|| z~ - sum_j alpha_j phi(c_j) ||_2^2`` over centres ``c_j`` and weights ``alpha_j >= 0``:

1. **greedy atoms**: over a public grid of candidate centres (:data:`DECODER_SPACING`
   inside the unit ball), ``k`` times: add the candidate whose features correlate most with
   the residual, refit the weights of the chosen atoms by non-negative least squares, update
   the residual (orthogonal matching pursuit with a non-negativity constraint);
2. **joint refinement**: L-BFGS-B on all centres and weights together from the greedy
   solution (centres in ``[-1, 1]^d``, weights ``>= 0``; analytic gradient), then each centre
   projected onto the unit ball.

This is CL-OMP without CL-OMPR's replacement steps (Keriven, Tremblay, Traonmilin &
Gribonval 2017): simpler, and it may stop at a worse local optimum; it is a function of the
noisy sketch and public constants only.
"""

from __future__ import annotations

import math

import numpy as np

from kngflow.mechanisms.base import (SAMPLER_DIAGNOSTICS, Mechanism, Release, check_epsilon, check_int,
                                     check_positive, check_rng)
from kngflow.mechanisms.claims import StatisticNoise
from kngflow.mechanisms.hardening import UNIT_ROUNDOFF, Hardening, knorm_lipschitz, lipschitz_hardening, snap
from kngflow.models.kmeans.lloyd import canonical_centres
from kngflow.models.kmeans.problem import check_kmeans_data
from kngflow.norms import get_norm

__all__ = ["Sketch", "frequencies", "features", "sketch_sensitivity", "DECODER_SPACING"]

#: spacing of the decoder's public grid of candidate centres (greedy step)
DECODER_SPACING = 1.0 / 16.0
#: Lipschitz-route clamp: a Laplace coordinate beyond this many scales is clipped (probability e^-64)
_REACH = 64.0


def frequencies(d: int, m: int, bandwidth: float, seed: int) -> np.ndarray:
    """``(m, d)`` public frequencies i.i.d. ``N(0, I / bandwidth^2)`` from ``seed`` (no data)."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(d, m)))
    return rng.standard_normal((m, d)) / bandwidth


def features(x: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """``(n, 2m)``: ``(cos(omega_l . x_i), sin(omega_l . x_i))`` for rows ``x`` (n, d)."""
    a = x @ omega.T
    return np.concatenate([np.cos(a), np.sin(a)], axis=1)


def sketch_sensitivity(m: int, n: int) -> float:
    """``2 sqrt(2) m / n``: ℓ1 sensitivity of the average sketch under replace-one (module docstring)."""
    return 2.0 * math.sqrt(2.0) * m / n


def _ball_grid(d: int, spacing: float) -> np.ndarray:
    r = int(round(1.0 / spacing))
    axes = np.arange(-r, r + 1)
    mesh = np.stack(np.meshgrid(*([axes] * d), indexing="ij"), -1).reshape(-1, d)
    return mesh[(mesh * mesh).sum(axis=1) <= r * r].astype(np.float64) * spacing


def _nnls(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    from scipy.optimize import nnls  # imported when used: workers that never decode skip it

    return nnls(A, b)[0]


def decode(z: np.ndarray, omega: np.ndarray, k: int) -> tuple[np.ndarray, int]:
    """``(centres (k, d), L-BFGS-B iterations)`` fitted to the (noisy) sketch ``z`` (module docstring)."""
    from scipy.optimize import minimize

    m, d = omega.shape
    cand = _ball_grid(d, DECODER_SPACING) if d <= 3 else np.vstack([np.zeros((1, d)), np.eye(d), -np.eye(d)])
    atoms = features(cand, omega)  # (G, 2m), each of norm sqrt(m)
    chosen: list[int] = []
    residual = z.copy()
    alpha = np.zeros(0)
    for _ in range(k):
        score = atoms @ residual
        score[chosen] = -np.inf
        chosen.append(int(np.argmax(score)))
        alpha = _nnls(atoms[chosen].T, z)
        residual = z - atoms[chosen].T @ alpha
    C0 = cand[chosen]
    if alpha.sum() <= 0:
        alpha = np.full(k, 1.0 / k)

    def loss(p):
        C, a = p[:k * d].reshape(k, d), p[k * d:]
        arg = C @ omega.T  # (k, m)
        cs, sn = np.cos(arg), np.sin(arg)
        r = z - np.concatenate([a @ cs, a @ sn])
        rc, rs = r[:m], r[m:]
        g_a = -2.0 * (cs @ rc + sn @ rs)
        # d/dc_j of sum_l (rc_l cos(w_l c_j) + rs_l sin(w_l c_j)) = sum_l (-rc_l sin + rs_l cos) w_l
        g_c = -2.0 * a[:, None] * ((-sn * rc + cs * rs) @ omega)
        return float(r @ r), np.concatenate([g_c.ravel(), g_a])

    from threadpoolctl import threadpool_limits

    p0 = np.concatenate([C0.ravel(), alpha])
    bounds = [(-1.0, 1.0)] * (k * d) + [(0.0, None)] * k
    # one BLAS thread: L-BFGS-B's tiny products are 20 times slower with a thread pool
    with threadpool_limits(limits=1, user_api="blas"):
        res = minimize(loss, p0, jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": 200})
    p = res.x if np.all(np.isfinite(res.x)) and res.fun <= loss(p0)[0] else p0
    C = p[:k * d].reshape(k, d)
    r = np.sqrt((C * C).sum(axis=1))
    C = np.where((r > 1.0)[:, None], C / np.maximum(r, 1.0)[:, None], C)
    return C, int(res.nit)


class Sketch(Mechanism):
    """Compressive k-means: a Laplace-noised random-Fourier sketch, decoded to ``k`` centres; ε-DP.

    ``z~ = (1/n) sum_i phi(x_i) + Lap(b)^(2m)``, ``b = 2 sqrt(2) m / (n eps)`` (module
    docstring), then the centres fitted to ``z~`` (:func:`decode`, post-processing).

    Keyword-only options: ``frequencies`` (``m``, int >= 1, or None: ``5 k d``),
    ``bandwidth`` (> 0, default 0.2: the frequencies' scale is ``1 / bandwidth``, matched to
    clusters of that spread), ``frequency_seed`` (int >= 0, default 0: the public seed of the
    frequencies).

    Hardenable: the noisy sketch is snapped (site ``"statistic"``, :meth:`hardening`).

    Claim: :class:`~kngflow.mechanisms.claims.StatisticNoise`, ℓ1 K-norm (i.i.d. Laplace)
    noise of scale ``b`` on the average sketch.
    """

    kind = "sketch"
    diagnostics = SAMPLER_DIAGNOSTICS

    def __init__(self, *, frequencies=None, bandwidth=0.2, frequency_seed=0):
        self.frequencies = None if frequencies is None else check_int("frequencies", frequencies, 1)
        self.bandwidth = check_positive("bandwidth", bandwidth)
        self.frequency_seed = check_int("frequency_seed", frequency_seed, 0)

    def __repr__(self) -> str:
        return (f"Sketch(frequencies={self.frequencies!r}, bandwidth={self.bandwidth:g}, "
                f"frequency_seed={self.frequency_seed})")

    def size(self, k: int, d: int) -> int:
        """``m``: the option, or ``5 k d``."""
        return 5 * k * d if self.frequencies is None else self.frequencies

    def omega(self, data) -> np.ndarray:
        """The public frequencies ``(m, d)`` for data of this ``k`` and ``d``."""
        return frequencies(data.d, self.size(data.k, data.d), self.bandwidth, self.frequency_seed)

    def statistic(self, data) -> np.ndarray:
        """``z(D)``: the average of the records' features ``(2m,)``."""
        data = check_kmeans_data(data)
        return features(data.x, self.omega(data)).mean(axis=0)

    def scale(self, data, epsilon) -> float:
        """``b = 2 sqrt(2) m / (n eps)``: the Laplace scale of each sketch coordinate."""
        data = check_kmeans_data(data)
        return sketch_sensitivity(self.size(data.k, data.d), data.n) / check_epsilon(epsilon)

    def statistic_noise(self, data, epsilon):
        """ℓ1 K-norm noise (i.i.d. Laplace) of scale ``b`` on the sketch."""
        return get_norm("l1"), self.scale(data, epsilon)

    def hardening(self, data, epsilon) -> Hardening:
        """Lipschitz route on the noisy sketch (site ``"statistic"``; the decoder is post-processing).

        ``V`` has density ``∝ exp(-||v||_1 / b)``: ``L = 2m / b``
        (:func:`~kngflow.mechanisms.hardening.knorm_lipschitz`).  Clamp
        ``B = 1 + 64 b`` (``|z_l| <= 1``; a Laplace coordinate exceeds ``64 b`` with
        probability ``e^-64``).  Rounding of a coordinate, ``u = 2^-53``: the angle
        ``omega_l . x`` is within ``(d + 1) u W`` (``W`` the largest ``||omega_l||_1``, public;
        ``|x_a| <= 1``), cos/sin add ``2u``; the sum of ``n`` features of size at most 1 adds
        ``(n - 1) u`` relative to ``n``, the division by ``n`` ``u``; the noise, the sum and the
        dither add ``32 u B``: ``eta = (n + 2 + (d + 1) W + 32 B) u``.
        """
        data = check_kmeans_data(data)
        b = self.scale(data, epsilon)
        om = self.omega(data)
        size = 2 * om.shape[0]
        W = float(np.abs(om).sum(axis=1).max())
        bound = 1.0 + _REACH * b
        eta = (data.n + 2.0 + (data.d + 1.0) * W + 32.0 * bound) * UNIT_ROUNDOFF
        return lipschitz_hardening(knorm_lipschitz("l1", size, b), bound, eta, size, check_epsilon(epsilon),
                                   site="statistic")

    def noisy_sketch(self, data, epsilon, rng) -> np.ndarray:
        """``z~ = z(D) + Lap(b)^(2m)`` (snapped when hardened): the only use of the data."""
        data = check_kmeans_data(data)
        rng = check_rng(rng)
        om = self.omega(data)
        z = features(data.x, om).mean(axis=0) + rng.laplace(0.0, self.scale(data, epsilon), size=2 * om.shape[0])
        if self.hardened:
            # the dither comes from a stream 2^128 draws ahead: the noise is the unhardened release's
            z = snap(z, self.hardening(data, epsilon), np.random.Generator(rng.bit_generator.jumped()))
        return z

    def release(self, data, epsilon, rng) -> Release:
        data = check_kmeans_data(data)
        epsilon = check_epsilon(epsilon)
        rng = check_rng(rng)
        z = self.noisy_sketch(data, epsilon, rng)
        C, nit = decode(z, self.omega(data), data.k)
        return Release(canonical_centres(C), {"sampler": "exact", "acceptance": 1.0, "steps": nit})

    def privacy_claim(self) -> StatisticNoise:
        return StatisticNoise(statistic=self.statistic, noise=self.statistic_noise, additive=True,
                              description="the average random-Fourier sketch (cos, sin of public frequencies); "
                                          "the centres fitted to the noisy sketch are post-processing")
