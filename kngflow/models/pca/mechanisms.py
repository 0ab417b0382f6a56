r"""Mechanisms for the top-``k`` principal subspace; sensitivities in :mod:`kngflow.models.pca.problem`.

Every mechanism releases the canonical basis (:func:`~kngflow.models.pca.problem.canonical_basis`)
of a ``k``-dimensional subspace, flattened row-major.

* :class:`NonPrivate`: the top-``k`` eigenvectors of ``A``.
* :class:`AnalyzeGauss` (Dwork, Talwar, Thakurta & Zhang 2014), :class:`ModSULQ` (Chaudhuri,
  Sarwate & Sinha 2013) and :class:`SULQ` (the SuLQ framework's per-entry
  calibration): ``A + E`` with ``E`` symmetric, its upper triangle (with the diagonal)
  i.i.d. ``N(0, sigma^2)``; then the top-``k`` eigenvectors.  (ε, δ)-DP; they differ in
  ``sigma`` only.
* :class:`Exponential` (CSS 2013's PPCA): density ``∝ exp((eps n / 2) tr(V^T A V))`` on the
  Stiefel manifold, a matrix Bingham law; exact for ``k = 1``, Hoff's Gibbs sampler for ``k > 1``.

Hardening: none of them declares one (:mod:`kngflow.mechanisms.hardening`), so
:func:`kngflow.api.get_mechanism` refuses to build them, in one line naming
``hardened=False``, unless ``hardened=False`` is spelled out; their releases are float64
eigenvectors whose low bits depend on the data.  The noisy-moment family would snap its
noisy statistic ``T(D) + N(0, sigma^2 I)`` (site ``"statistic"``, the eigenvectors then
post-processing) by the coupling route, but the statistic's rounding bound η must cover the
caller's float64 ``A = X^T X / n`` (``n u`` per entry, any order of summation), and
``δ′ - δ = (1 + e^ε) d (d + 1) η / Λ`` with ``Λ`` a sixteenth of ``sigma ~ 1/n`` grows like
``n^2 u``: 1.5e-5 at ``n = 10^4``, ``d = 10``, ε = 1.  It needs ``A`` with a certified
double-double error from the records (``pca_data`` and ``simulate`` carrying a low part) or
lattice records with discrete Gaussian noise.  The exponential mechanism's samplers
(rejection from an angular central Gaussian, Gibbs with Bingham conditionals) have no
certified rounding bound.

KNG for the leading eigenvector: why it is not offered
-----------------------------------------------------
KNG on the sphere (Soto, Bharath, Reimherr & Slavković 2022) releases ``v`` with density
``∝ exp(-eps / (2 Delta) ||grad_S l(v; D)||)`` against the uniform law, with the loss
``l(v) = -(1/2) sum_i (x_i^T v)^2 = -(n/2) v^T A v`` and its Riemannian gradient
``grad_S l(v) = -(I - v v^T) n A v = -sum_i (x_i^T v) (I - v v^T) x_i``.  Its sensitivity
can be derived: one record contributes ``(x^T v) (I - v v^T) x``, of norm
``||x||^2 |cos a| |sin a| <= 1/2`` (``a`` the angle between ``x`` and ``v``), so replacing it
changes the gradient by at most 1, reached by ``x, x'`` at ±45° to ``v`` in one plane:
``Delta = 1``.  The privacy proof of KNG then goes through on the sphere (the base measure
does not depend on the data; numerator and normaliser each move by at most ``eps / 2``).

What breaks is the premise that makes KNG an estimator: the gradient of a convex loss
vanishes only at its minimiser, but the Rayleigh quotient on the sphere has ``2 d``
critical points, ``±u_1, ..., ±u_d`` (every eigenvector of ``A``), and the KNG density is
maximal, equal to 1, at every one of them.  Near ``±u_j`` the gradient is
``n |lam_i - lam_j| |<v, u_i>|`` along each ``u_i`` (``i != j``), so the mass of KNG near
``±u_j`` is proportional to ``prod_{i != j} 1 / |lam_i - lam_j|`` (times ``(2 Delta / eps n)^(d-1)``):
in ``d = 2`` the top and the bottom eigenvector get equal mass whatever ``n`` and ``eps``,
and in higher ``d`` the middle eigenvectors, with two close neighbours, get the most.  The
release does not converge to the leading eigenvector as ``n`` grows, so KNG is left out
(``tests/models/pca/test_pca.py`` computes this mass on a grid of the circle).
"""

from __future__ import annotations

import math

import numpy as np

from kngflow._jit import jit
from kngflow.mechanisms.base import (SAMPLER_DIAGNOSTICS, Mechanism, Release, check_choice, check_epsilon, check_int,
                                     check_probability, check_rng)
from kngflow.mechanisms.claims import Density, StatisticNoise, gaussian_mu
from kngflow.mechanisms.draws import DrawInfo
from kngflow.mechanisms.generic import NonPrivateBase
from kngflow.models.pca.problem import (PCAData, canonical_basis, top_eigenvectors, upper_sensitivity,
                                        upper_triangle)
from kngflow.models.pca.sampler import bingham_gibbs, bingham_vector, haar_stiefel

__all__ = ["NonPrivate", "AnalyzeGauss", "ModSULQ", "SULQ", "Exponential", "check_pca_data",
           "analytic_gaussian_sigma"]


def check_pca_data(data) -> PCAData:
    """Validate :class:`~kngflow.models.pca.problem.PCAData`: a finite symmetric ``d x d`` float64
    ``A``, ``n >= 1``, ``1 <= k <= d``."""
    if not isinstance(data, PCAData):
        raise TypeError(f"data must be a kngflow.models.pca.problem.PCAData, got {type(data).__name__}")
    A = data.A
    if not (isinstance(A, np.ndarray) and A.ndim == 2 and A.shape[0] == A.shape[1] and A.dtype == np.float64):
        raise ValueError("data.A must be a square 2-D float64 array")
    if not (np.isfinite(A).all() and (A == A.T).all()):
        raise ValueError("data.A must be finite and symmetric")
    if isinstance(data.n, bool) or not isinstance(data.n, (int, np.integer)) or data.n < 1:
        raise ValueError(f"data.n must be an integer >= 1, got {data.n!r}")
    if isinstance(data.k, bool) or not isinstance(data.k, (int, np.integer)) or not 1 <= data.k <= A.shape[0]:
        raise ValueError(f"data.k must be an integer in [1, d], got {data.k!r}")
    return data


def _release_basis(V: np.ndarray) -> np.ndarray:
    """The canonical basis of ``span(V)``, flattened row-major (``k = 1``: the sign making the first
    coordinate above 1e-9 in magnitude positive, as :func:`canonical_basis` gives it)."""
    if V.shape[1] == 1:
        return _canonical_vector(np.ascontiguousarray(V[:, 0]))
    return canonical_basis(V).ravel()


@jit
def _canonical_vector(v):
    """``v / ||v||`` with the sign making its first coordinate above 1e-9 in magnitude positive."""
    s = 0.0
    for a in range(v.shape[0]):
        s += v[a] * v[a]
    s = math.sqrt(s)
    for a in range(v.shape[0]):
        if abs(v[a]) > 1e-9 * s:
            if v[a] < 0:
                s = -s
            break
    return v / s


class NonPrivate(NonPrivateBase):
    """The top-``k`` eigenvectors of ``A``: the non-private baseline."""

    def check_data(self, data):
        return check_pca_data(data)

    def estimate(self, data) -> np.ndarray:
        return _release_basis(top_eigenvectors(data.A, data.k))

    def __repr__(self) -> str:
        return "NonPrivate()"


def analytic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Smallest ``sigma`` (to relative 1e-12) for which ``N(0, sigma^2 I)`` noise on a statistic
    of ℓ2 sensitivity ``sensitivity`` is (ε, δ)-DP: ``sensitivity / mu*`` with ``mu*`` the root of
    ``delta(eps; mu) = delta`` (the analytic Gaussian mechanism, Balle & Wang 2018; δ(ε; μ)
    increases with μ; :func:`~kngflow.mechanisms.claims.gaussian_mu`)."""
    mu = gaussian_mu(epsilon, delta)
    return sensitivity / mu


class _NoisyMoment(Mechanism):
    """``A + E``, ``E`` symmetric with i.i.d. ``N(0, sigma^2)`` upper triangle (with the diagonal),
    then the top-``k`` eigenvectors; subclasses give ``sigma``.

    The statistic is the vector ``T(D)`` of the upper triangle of ``A`` (``d (d + 1) / 2``
    entries): ``E``'s upper triangle is i.i.d. Gaussian, so the release is post-processing
    of ``T(D) + N(0, sigma^2 I)``, and its privacy is that of the Gaussian mechanism with
    the ℓ2 sensitivity of ``T``, ``sqrt(2) / n`` (:func:`~kngflow.models.pca.problem.upper_sensitivity`).
    """

    diagnostics = SAMPLER_DIAGNOSTICS

    def __init__(self, *, delta=1e-5):
        self.delta = check_probability("delta", delta)

    def sigma(self, n: int, d: int, epsilon: float) -> float:
        raise NotImplementedError

    def release(self, data, epsilon, rng) -> Release:
        data = check_pca_data(data)
        rng = check_rng(rng)
        sigma = self.sigma(data.n, data.d, check_epsilon(epsilon))
        d = data.d
        E = np.zeros((d, d))
        i, j = np.triu_indices(d)
        E[i, j] = sigma * rng.standard_normal(i.size)
        E = E + np.triu(E, 1).T
        V = top_eigenvectors(data.A + E, data.k)
        return Release(_release_basis(V), {"sampler": "exact", "acceptance": 1.0, "steps": 1})

    def _statistic(self, data) -> np.ndarray:
        return upper_triangle(check_pca_data(data).A)

    def _noise(self, data, epsilon):
        data = check_pca_data(data)
        return "gaussian", self.sigma(data.n, data.d, float(epsilon))

    def privacy_claim(self) -> StatisticNoise:
        return StatisticNoise(delta=self.delta, statistic=self._statistic, noise=self._noise, additive=True,
                              description="upper triangle (with the diagonal) of A = X^T X / n; the release is "
                                          "the top-k eigenvectors of the noisy symmetric matrix")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(delta={self.delta:g})"


class AnalyzeGauss(_NoisyMoment):
    """Analyze Gauss (Dwork, Talwar, Thakurta & Zhang 2014): (ε, δ)-DP.

    ``sigma`` for the ℓ2 sensitivity ``Delta = sqrt(2) / n`` of the upper triangle of ``A``
    under replace-one adjacency (DTTZ's ``Delta = 1`` is for adding or removing a record of
    the unnormalised ``X^T X``):

    * ``calibration="analytic"`` (default): the smallest ``sigma`` with the Gaussian
      mechanism's exact δ(ε) at most δ (:func:`analytic_gaussian_sigma`), any ε > 0;
    * ``calibration="classical"``: DTTZ's ``sigma = Delta sqrt(2 ln(1.25 / delta)) / eps``
      (Dwork & Roth, Theorem A.1), valid for ε <= 1 only (ValueError otherwise).
    """

    kind = "analyze_gauss"

    def __init__(self, *, delta=1e-5, calibration="analytic"):
        super().__init__(delta=delta)
        self.calibration = check_choice("calibration", calibration, ("analytic", "classical"))

    def sigma(self, n: int, d: int, epsilon: float) -> float:
        sens = upper_sensitivity(n)
        if self.calibration == "classical":
            if epsilon > 1.0:
                raise ValueError(f"epsilon: the classical Gaussian calibration needs epsilon <= 1, got {epsilon!r}")
            return sens * math.sqrt(2.0 * math.log(1.25 / self.delta)) / epsilon
        return analytic_gaussian_sigma(sens, epsilon, self.delta)

    def __repr__(self) -> str:
        return f"AnalyzeGauss(delta={self.delta:g}, calibration={self.calibration!r})"


class ModSULQ(_NoisyMoment):
    """MOD-SULQ (Chaudhuri, Sarwate & Sinha 2013, their input-perturbation baseline): (ε, δ)-DP.

    ``sigma = beta = (d + 1) / (n eps) sqrt(2 ln((d^2 + d) / (2 sqrt(2 pi) delta))) + 1 / (n sqrt(eps))``,
    CSS's noise standard deviation.  Their proof bounds the Gaussian density ratio entry by
    entry (the ``d + 1`` and the ``d^2 + d`` in the logarithm come from the ``d (d + 1) / 2``
    entries), which is conservative: the exact (ε, δ) of this ``sigma``, from the ℓ2
    sensitivity ``sqrt(2) / n`` (the statistic audit computes it), is well below the ε it is
    run at (0.31 at ε = 1, δ = 1e-5, d = 2).
    """

    kind = "mod_sulq"

    def sigma(self, n: int, d: int, epsilon: float) -> float:
        return ((d + 1) / (n * epsilon) * math.sqrt(2.0 * math.log((d * d + d) / (2.0 * math.sqrt(2.0 * math.pi)
                                                                                  * self.delta)))
                + 1.0 / (n * math.sqrt(epsilon)))


class SULQ(_NoisyMoment):
    """The SuLQ framework's calibration (Blum, Dwork, McSherry & Nissim 2005): (ε, δ)-DP.

    Each of the ``m = d (d + 1) / 2`` entries of the upper triangle of ``A`` is answered as a
    separate query with the classical Gaussian mechanism at ``(eps / m, delta / m)``, and the
    queries compose by basic composition.  An entry's sensitivity is ``1 / n``
    (:mod:`kngflow.models.pca.problem`), so
    ``sigma = sqrt(2 ln(1.25 m / delta)) m / (n eps)``, valid while ``eps / m <= 1``.  Its
    noise grows like ``d^2 sqrt(log d)``, against MOD-SULQ's ``d sqrt(log d)`` and Analyze
    Gauss's ``sqrt(log(1/delta))``.
    """

    kind = "sulq"

    def sigma(self, n: int, d: int, epsilon: float) -> float:
        m = d * (d + 1) // 2
        if epsilon / m > 1.0:
            raise ValueError(f"epsilon: SuLQ's per-entry Gaussian calibration needs epsilon <= d (d + 1) / 2 = {m}, "
                             f"got {epsilon!r}")
        return math.sqrt(2.0 * math.log(1.25 * m / self.delta)) * m / (n * epsilon)


class Exponential(Mechanism):
    """The exponential mechanism for the top-``k`` subspace (CSS 2013's PPCA): ε-DP.

    Density ``∝ exp((eps n / 2) tr(V^T A V))`` against the uniform law on the Stiefel
    manifold of ``d x k`` orthonormal ``V``: the exponential mechanism ``exp(eps u / (2 Delta_u))``
    with the score ``u(D, V) = n tr(V^T A V)`` of sensitivity ``Delta_u = 1``
    (:mod:`kngflow.models.pca.problem`), so the log density ratio of adjacent data sets is at
    most ``eps / 2`` from the score and ``eps / 2`` from the normaliser.  The bound is reached
    in the limit: with many records along ``x'``, the normaliser's ratio tends to ``e^(-eps/2)``
    (the law of ``D'`` concentrates where ``u`` drops by 1) while the score difference
    reaches ``+1`` at ``v = x``.  The law is invariant to ``V -> V O``, so it is a law on
    subspaces; the released canonical basis is a function of the subspace.

    Samplers (:mod:`kngflow.models.pca.sampler`): ``k = 1``, exact rejection from the angular
    central Gaussian envelope (Kent, Ganeiber & Mardia 2013); ``k > 1``, Hoff's (2009)
    column-wise Gibbs sampler with exact conditionals, ``sweeps`` sweeps from a Haar-random
    start (data-independent): its law approaches the target as the sweeps grow, and it is
    that law which the black-box audit checks.

    Keyword-only options: ``sweeps`` (int >= 1, ``k > 1`` only), ``max_tries`` (proposals one
    exact draw may take before the release fails; the acceptance rate is bounded below
    whatever ``n``, so it is a guard, not a fallback).
    """

    kind = "exponential"
    diagnostics = SAMPLER_DIAGNOSTICS

    def __init__(self, *, sweeps=20, max_tries=1_000_000):
        self.sweeps = check_int("sweeps", sweeps, 1)
        self.max_tries = check_int("max_tries", max_tries, 1)

    def __repr__(self) -> str:
        return f"Exponential(sweeps={self.sweeps}, max_tries={self.max_tries})"

    @staticmethod
    def rate(data: PCAData, epsilon: float) -> float:
        """``eps n / 2``: the density is ``exp(rate tr(V^T A V))``."""
        return check_epsilon(epsilon) * data.n / 2.0

    def draw(self, data, epsilon, rng) -> tuple[np.ndarray, DrawInfo]:
        """One ``d x k`` basis from the mechanism's law (before the canonical form) and its info."""
        data = check_pca_data(data)
        rng = check_rng(rng)
        C = self.rate(data, epsilon) * data.A
        if data.k == 1:
            x, tries = bingham_vector(rng, np.ascontiguousarray(C), self.max_tries)
            return x.reshape(data.d, 1), DrawInfo.constant("exact", 1, 1.0 / tries, tries)
        V0 = haar_stiefel(data.d, data.k, rng)
        V, tries = bingham_gibbs(rng, np.ascontiguousarray(C), V0, self.sweeps, self.max_tries)
        return V, DrawInfo.constant("gibbs", 1, self.sweeps * data.k / tries, self.sweeps)

    def release(self, data, epsilon, rng) -> Release:
        V, info = self.draw(data, epsilon, rng)
        return Release(_release_basis(V), info.release_info())

    def log_density(self, data, epsilon, theta) -> np.ndarray:
        """Unnormalised log density of the released unit vector (``k = 1``), lifted to ``R^d``.

        The release ``v`` lies on a half sphere (its first non-zero coordinate positive),
        where its density against the uniform law is ``∝ exp((eps n / 2) v^T A v)``.  For the
        grid audits it is lifted to ``theta = r v`` with ``r`` independent of the data and
        uniform by volume on ``[1/2, 1]``: ``theta`` has Lebesgue density
        ``∝ exp((eps n / 2) v^T A v)`` on the half shell ``1/2 <= ||theta|| <= 1`` (-inf
        elsewhere), ``v = theta / ||theta||`` is a function of ``theta`` and ``theta`` of
        ``(v, r)``, so the two have the same privacy loss.  ``k > 1``: ValueError (no
        closed-form normaliser on a grid of the Stiefel manifold; audited black-box).
        """
        data = check_pca_data(data)
        if data.k != 1:
            raise ValueError("the lifted log density is stated for k = 1 only")
        theta = np.asarray(theta, dtype=np.float64)
        r = np.sqrt(np.sum(theta * theta, axis=-1))
        with np.errstate(invalid="ignore", divide="ignore"):
            v = theta / r[..., None]
        first = np.zeros(r.shape)
        for j in range(theta.shape[-1] - 1, -1, -1):  # the first coordinate with |v_j| > 1e-12
            vj = v[..., j]
            first = np.where(np.abs(vj) > 1e-12, vj, first)
        inside = (r >= 0.5) & (r <= 1.0) & (first > 0)
        energy = np.einsum("...i,ij,...j->...", np.where(inside[..., None], v, 0.0), data.A,
                           np.where(inside[..., None], v, 0.0))
        return np.where(inside, self.rate(data, epsilon) * energy, -np.inf)

    def privacy_claim(self) -> Density:
        return Density(log_density=self.log_density)
