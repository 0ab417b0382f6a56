r"""Mechanisms for Bayesian linear regression with a NIG prior; the model in :mod:`kngflow.models.bayes_linear.problem`.

Every mechanism releases a posterior summary of ``beta_j`` (``j`` the data's ``coef``):
``(mean, lower, upper)`` of the equal-tailed credible interval at the data's ``level``, or
the posterior mean alone (:class:`~kngflow.models.bayes_linear.problem.BayesLinearData`'s
``interval``).

Noisy sufficient statistics (:class:`Naive`, :class:`NoiseAware`)
------------------------------------------------------------------
Replace-one adjacency with ``n`` public.  The statistic ``T`` (the upper triangle of the
augmented Gram matrix ``[1 X y']'[1 X y']`` without its constant corner, ``y' = y / y_bound``)
has ℓ1 sensitivity ``Delta_1 = d (d + 2)^2 / (2 (d + 1))`` on the box (16/3 at ``d = 2``;
derived in :mod:`kngflow.models.bayes_linear.problem`, attained; the ℓ2 ball's bound is there
too).  The release is

    T~ = T + V,   V_k i.i.d. Laplace(0, s),   s = Delta_1 / eps,

the ℓ1 K-norm mechanism: ``V`` has density ∝ ``exp(-||v||_1 / s)``, translation invariant,
so for any output ``t`` the density ratio of adjacent data sets is
``exp((||t - T'||_1 - ||t - T||_1) / s) <= exp(||T - T'||_1 / s) <= exp(Delta_1 / s) = exp(eps)``
(triangle inequality): ``T~`` is ε-DP, and every summary below is post-processing of ``T~`` and
public facts (``n``, ``y_bound``, the domain, the prior, the level).  The same derivation as
the linear model's ``ss`` mechanism (:mod:`kngflow.models.linear.ss`), on a statistic that
also holds ``y'y`` (the noise variance is unknown here) and without its doubled diagonal.
The claim is :class:`~kngflow.mechanisms.claims.StatisticNoise` (ℓ1 noise of scale ``s`` on
``T``): the statistic audit computes ``max ||T(D) - T(D')||_1 / s`` over the declared records,
which include the pair attaining ``Delta_1``.

* :class:`Naive` projects ``T~`` (in original units: entries holding ``y`` once times
  ``y_bound``, ``y'y`` times ``y_bound^2``) onto valid statistics — entries clamped to the
  domain's bounds, ``X'X`` made positive definite by raising the eigenvalues of its Schur
  complement to ``s`` (:func:`~kngflow.models.bayes_linear.posterior.project_statistics`) — and
  reports the conjugate posterior as if they were exact (``b_n``'s bracket clamped at 0).
  It ignores the noise: its interval under-covers where the noise (sd ``sqrt(2) s`` per
  entry) is not small against the statistics' sampling spread (about ``sigma sqrt(n/3)`` for a
  slope's ``X'y`` on the box).
* :class:`NoiseAware` reports the posterior given ``T~``, integrating the noise: a
  Metropolis–Hastings sampler over the latent statistics with ``(beta, sigma^2)`` integrated
  out, Rao–Blackwellised into a mixture of Student t laws
  (:mod:`kngflow.models.bayes_linear.posterior`, where the model of the latent statistics is
  stated: exact given ``X'X``, flat prior on ``X'X`` over the domain's feasible set).

Hardening (both): the Lipschitz route on the noisy statistic (site ``"statistic"``, as
``ss``): ``V`` ∝ ``exp(-||v||_1 / s)`` moves by at most ``||(1, ..., 1)||_1 / s = d_T / s`` per unit
∞-norm shift, the clamp is ``n + 128 (d_T + 1) s`` (``|T_k| <= n``; a Laplace coordinate beyond
``128 (d_T + 1) s`` has probability ``exp(-128 (d_T + 1))``), and the rounding of ``T`` (sums of
``n`` products of numbers in [-1, 1], each within ``n u`` of exact in any order) plus ``T + V``
and the dither is at most ``eta = (2 n^2 + 128 B) u``, ``u = 2^-53``
(:func:`~kngflow.mechanisms.hardening.lipschitz_hardening`).  Built by
:func:`kngflow.api.get_mechanism` with its defaults, both are hardened; the noise-aware
posterior then treats the snapped release as Laplace-noised (the snapping adds a uniform
dither of width at most ``s / 1024``, ignored).  One posterior sample is not offered here.
"""

from __future__ import annotations

import numpy as np

from kngflow.mechanisms.base import (SAMPLER_DIAGNOSTICS, Mechanism, Release, check_epsilon, check_int, check_rng)
from kngflow.mechanisms.claims import StatisticNoise
from kngflow.mechanisms.generic import NonPrivateBase
from kngflow.mechanisms.hardening import UNIT_ROUNDOFF, Hardening, knorm_lipschitz, lipschitz_hardening, snap
from kngflow.models.bayes_linear.posterior import (mixture_summary, nig_posterior, noise_aware_draws,
                                                   project_statistics, student_summary)
from kngflow.models.bayes_linear.problem import (BayesLinearData, augmented, check_bayes_linear_data, l1_sensitivity,
                                                 stats_t, t_dim, t_layout)
from kngflow.norms import get_norm

__all__ = ["NonPrivate", "Naive", "NoiseAware", "laplace_scale", "unit_factors"]


def laplace_scale(data: BayesLinearData, epsilon: float) -> float:
    """``s = Delta_1 / eps``: the Laplace scale of each entry of ``T`` (scaled units) that makes ``T~`` ε-DP."""
    return l1_sensitivity(data.d, data.data_norm) / check_epsilon(epsilon)


def unit_factors(d: int, y_bound: float) -> np.ndarray:
    """Per entry of ``T``, the factor to original units: ``y_bound`` for ``X'y``, ``y_bound^2`` for ``y'y``, else 1."""
    i, j = t_layout(d)
    return np.where(i == d, y_bound * y_bound, np.where(j == d, y_bound, 1.0))


def _summary_release(data: BayesLinearData, mean: float, lo: float, hi: float, info: dict) -> Release:
    return Release(np.array([mean, lo, hi]) if data.interval else np.array([mean]), info)


def _conjugate_summary(data: BayesLinearData, G, c, yy) -> tuple[float, float, float]:
    mu, lam, a, b = nig_posterior(G, c, yy, data.n, data.prior)
    return student_summary(mu, lam, a, b, data.coef, data.level)


class NonPrivate(NonPrivateBase):
    """The exact conjugate NIG posterior of the (clipped) data: ``beta_j`` Student t (the reference)."""

    def check_data(self, data):
        return check_bayes_linear_data(data)

    def estimate(self, data) -> np.ndarray:
        m, lo, hi = _conjugate_summary(data, *data.original())
        return np.array([m, lo, hi]) if data.interval else np.array([m])


class _NoisyStatistics(Mechanism):
    """Shared by the noisy-statistics mechanisms: ``T~ = T + Laplace(s)``, its claim and its hardening."""

    diagnostics = SAMPLER_DIAGNOSTICS

    # ---------------------------------------------------------------- the claim
    def statistic(self, data) -> np.ndarray:
        """``[T]``: the statistic in scaled units (one row)."""
        return stats_t(check_bayes_linear_data(data).A)[None, :]

    def statistic_noise(self, data, epsilon: float):
        """Laplace noise on every entry (the ℓ1 K-norm) of scale ``Delta_1 / eps``."""
        return get_norm("l1"), laplace_scale(data, float(epsilon))

    def privacy_claim(self) -> StatisticNoise:
        return StatisticNoise(statistic=self.statistic, noise=self.statistic_noise, additive=True,
                              description="the upper triangle of [1 X y/y_bound]'[1 X y/y_bound] without its corner n "
                                          "(l1 sensitivity d(d+2)^2/(2(d+1)) on the box, replace-one, n public); the "
                                          "posterior summary is post-processing of T + Laplace(Delta_1/eps)")

    # ---------------------------------------------------------------- hardening
    def hardening(self, data, epsilon) -> Hardening:
        """Lipschitz route on ``T~`` (module docstring): ``L = d_T / s``, clamp ``n + 128 (d_T + 1) s``,
        ``eta = (2 n^2 + 128 B) u``."""
        dim = t_dim(data.d)
        s = laplace_scale(data, epsilon)
        bound = float(data.n) + 128.0 * (dim + 1) * s
        eta = (2.0 * float(data.n) ** 2 + 128.0 * bound) * UNIT_ROUNDOFF
        return lipschitz_hardening(knorm_lipschitz("l1", dim, s), bound, eta, dim, float(epsilon), site="statistic")

    # ---------------------------------------------------------------- the release's statistic
    def noisy_statistic(self, data: BayesLinearData, epsilon: float, rng: np.random.Generator) -> np.ndarray:
        """``T + V`` in scaled units (snapped to the hardening's grid when hardened): the only use of the data."""
        s = laplace_scale(data, epsilon)
        T = stats_t(data.A) + rng.laplace(0.0, s, t_dim(data.d))
        if self.hardened:
            T = snap(T, self.hardening(data, epsilon), rng)
        return T

    @staticmethod
    def original(data: BayesLinearData, T: np.ndarray, s: float):
        """``(t, scales)``: a (noisy) ``T`` and its entries' Laplace scales in original units."""
        f = unit_factors(data.d, data.y_bound)
        return np.asarray(T) * f, s * f


class Naive(_NoisyStatistics):
    """The noisy statistics projected onto valid ones, then the conjugate posterior as if exact (ε-DP).

    ``T~ = T + Laplace(Delta_1 / eps)`` (module docstring); in original units, entries clamped to
    the domain's bounds and ``X'X`` made positive definite with eigenvalue floor ``s``
    (:func:`~kngflow.models.bayes_linear.posterior.project_statistics`); the Student t summary
    of the conjugate posterior.  No options.
    """

    kind = "naive"

    def release(self, data, epsilon, rng) -> Release:
        data = check_bayes_linear_data(data)
        rng = check_rng(rng)
        s = laplace_scale(data, epsilon)
        T = self.noisy_statistic(data, epsilon, rng)
        A = augmented(T * unit_factors(data.d, data.y_bound), data.n, data.d)
        d = data.d
        G, c, yy = project_statistics(A[:d, :d], A[:d, d], A[d, d], data.n, data.y_bound, s)
        m, lo, hi = _conjugate_summary(data, G, c, yy)
        return _summary_release(data, m, lo, hi, {"sampler": "exact", "acceptance": 1.0, "steps": 1})


class NoiseAware(_NoisyStatistics):
    """The posterior given the noisy statistics, ``p(beta_j | T~)`` (ε-DP; after Bernstein & Sheldon).

    ``T~`` as :class:`Naive`; the summary is that of the Rao–Blackwellised mixture of Student t
    laws over ``draws`` states of the Metropolis–Hastings sampler on the latent statistics
    (:func:`~kngflow.models.bayes_linear.posterior.noise_aware_draws`; the model and the sampler
    are stated in :mod:`kngflow.models.bayes_linear.posterior`).  With ``n <= d`` the latent
    residual has no degrees of freedom and the model is not defined: the release is then the
    prior's summary (data-free).

    Keyword-only options: ``draws`` (kept sweeps, default 2000), ``burn_in`` (sweeps per chain
    before them, during which the random-walk scales adapt; default 500), ``chains``
    (independent chains sharing the draws, default 1).  Diagnostics: ``sampler``
    ("metropolis"), ``acceptance`` (of the random-walk moves, kept sweeps), ``steps`` (sweeps
    per chain).
    """

    kind = "noise_aware"

    def __init__(self, *, draws=2000, burn_in=500, chains=1):
        self.draws = check_int("draws", draws, 10)
        self.burn_in = check_int("burn_in", burn_in, 0)
        self.chains = check_int("chains", chains, 1)

    def __repr__(self) -> str:
        return f"NoiseAware(draws={self.draws}, burn_in={self.burn_in}, chains={self.chains})"

    def posterior_draws(self, T_noisy: np.ndarray, data: BayesLinearData, epsilon: float,
                        rng: np.random.Generator) -> tuple:
        """``(loc, scale, dof, acceptance)`` of the sampler given the release ``T_noisy`` (scaled units)."""
        s = laplace_scale(data, epsilon)
        t, scales = self.original(data, T_noisy, s)
        return noise_aware_draws(rng, t, scales, data.n, data.d, data.y_bound, data.prior, data.data_norm, data.coef,
                                 burn_in=self.burn_in, draws=self.draws, chains=self.chains, floor=s)

    def release(self, data, epsilon, rng) -> Release:
        data = check_bayes_linear_data(data)
        rng = check_rng(rng)
        T = self.noisy_statistic(data, epsilon, rng)
        if data.n <= data.d:
            p = data.prior
            m, lo, hi = student_summary(p.mu0, p.precision, p.a0, p.b0, data.coef, data.level)
            return _summary_release(data, m, lo, hi, {"sampler": "none", "acceptance": np.nan, "steps": 0})
        loc, scale, dof, (acc, _) = self.posterior_draws(T, data, epsilon, rng)
        m, lo, hi = mixture_summary(dof, loc, scale, data.level)
        per = -(-self.draws // self.chains)
        return _summary_release(data, m, lo, hi, {"sampler": "metropolis", "acceptance": acc,
                                                  "steps": self.burn_in + per})
