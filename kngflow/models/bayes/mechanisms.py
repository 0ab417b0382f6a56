r"""Mechanisms for the Beta–Bernoulli posterior (Sarwate's survey §7.2.2); the model in :mod:`kngflow.models.bayes.problem`.

Every mechanism releases a posterior summary: ``(mean, lower, upper)`` of the equal-tailed
credible interval at the data's ``level``, or the point estimate alone
(:class:`~kngflow.models.bayes.problem.BernoulliData`'s ``interval``).

Adjacency and sensitivity
-------------------------
Replace-one adjacency with ``n`` public (the package's notion: ``D`` and ``D'`` of the same
size differ in one record).  The count of ones ``s(D) = sum_i x_i`` with ``x_i in {0, 1}``
changes by ``x' - x in {-1, 0, 1}`` when ``x`` is replaced by ``x'``: its sensitivity is
``Delta = 1``, reached by replacing a 0 by a 1.

Noisy sufficient statistic (:class:`Naive`, :class:`NoiseAware`)
-----------------------------------------------------------------
Release ``s~ = s + L``, ``L ~ Laplace(0, c)`` with ``c = Delta / eps = 1 / eps``.  For any
output ``t`` the density ratio of adjacent data sets is
``exp(-|t - s| / c) / exp(-|t - s'| / c) = exp((|t - s'| - |t - s|) / c) <= exp(|s - s'| / c)
<= exp(Delta / c) = exp(eps)`` (triangle inequality): ``s~`` is ε-DP, and anything computed
from ``s~`` and public facts (``n``, the prior, the level) is post-processing.

* :class:`Naive` clamps ``s~`` to ``[0, n]`` and reports the conjugate posterior
  ``Beta(a + s~, b + n - s~)`` as if ``s~`` were exact: its interval ignores the noise and
  under-covers when the noise (sd ``sqrt(2) / eps``) is not small against the sampling
  spread ``sqrt(n theta (1 - theta))``.
* :class:`NoiseAware` reports the posterior given what was released, ``p(theta | s~)``,
  which integrates over the noise: an exact mixture of Beta laws
  (:mod:`kngflow.models.bayes.posterior`; Bernstein & Sheldon 2018's noise-aware
  inference, here in closed form; their Gibbs sampler over the latent count is the
  option ``sampler = "gibbs"``).  It uses the unclamped ``s~``.

One posterior sample (:class:`OPS`)
-----------------------------------
Wang, Fienberg & Smola (2015), Dimitrakakis et al. (2014): one draw from a posterior is
differentially private when the log-likelihood of a record is bounded in range.  For the
Bernoulli likelihood ``log p(x | theta) = x log theta + (1 - x) log(1 - theta)`` is unbounded
at 0 and 1, so ``theta`` is restricted to the public ``Theta = [theta_min, 1 - theta_min]``
(option ``theta_min`` in (0, 1/2)).  On ``Theta`` the change of one record moves the
log-likelihood by

    |log p(x | theta) - log p(x' | theta)| <= |log(theta / (1 - theta))|
                                          <= B = log((1 - theta_min) / theta_min).

The release is one draw of the *tempered* posterior restricted to ``Theta``,

    f_D(theta) = pi(theta) exp(t l(theta; D)) / Z_D  on Theta,   l(theta; D) = sum_i log p(x_i | theta),

with ``pi`` the prior ``Beta(a, b)`` (data-independent) and temperature ``t``.  For adjacent
``D, D'``: ``t |l(theta; D) - l(theta; D')| <= t B`` for every ``theta``, hence
``Z_D' / Z_D in [e^(-tB), e^(tB)]`` and

    f_D(theta) / f_D'(theta) = exp(t (l(theta; D) - l(theta; D'))) Z_D' / Z_D <= exp(2 t B):

the draw is ``2 t B``-DP — the exponential mechanism with score ``l`` of sensitivity ``B``,
whose ``2`` comes from the normaliser, as in KNG.  ``t = eps / (2B)`` gives ε-DP; one
sample of the untempered posterior (``t = 1``) is ``2B``-DP.  The temperature is capped at
1 (``t = min(1, eps / (2B))``: at ``eps >= 2B`` the posterior itself is already ε-DP, and a
sharper-than-posterior draw is no longer a posterior sample).  The tempered restricted
posterior is ``Beta(a + t s, b + t (n - s))`` restricted to ``Theta`` — conjugacy survives
tempering — and is drawn exactly by inverse CDF (:func:`~kngflow.models.bayes.posterior.truncated_beta`).

The release is the sample itself, as the point estimate.  One sample carries no interval;
rather than inventing one, the ``lower`` and ``upper`` entries are NaN (their ``miss`` and
``width`` errors are NaN: the studies of coverage leave OPS out).  OPS's accuracy cost is
plain: the tempered posterior's spread is ``sqrt(theta (1 - theta) / (t n))``, so its
squared error is about ``(1 + 1/t)`` times the posterior variance, against ``1 + O(1 / (n eps^2))``
for the noisy count.
"""

from __future__ import annotations

import math

import numpy as np

from kngflow.mechanisms.base import (SAMPLER_DIAGNOSTICS, Mechanism, Release, check_choice, check_epsilon, check_int,
                                     check_rng)
from kngflow.mechanisms.claims import Density, StatisticNoise
from kngflow.mechanisms.generic import NonPrivateBase
from kngflow.models.bayes.posterior import beta_summary, gibbs_noise_aware, noise_aware_summary, truncated_beta
from kngflow.models.bayes.problem import BernoulliData, check_bernoulli_data
from kngflow.norms import get_norm

__all__ = ["NonPrivate", "Naive", "NoiseAware", "OPS", "count_sensitivity", "laplace_scale", "ops_range",
           "ops_temperature"]


def count_sensitivity() -> float:
    """``1``: the count of ones changes by at most 1 when one record in {0, 1} is replaced."""
    return 1.0


def laplace_scale(epsilon: float) -> float:
    """``c = Delta / eps = 1 / eps``: the Laplace scale that makes the noisy count ε-DP."""
    return count_sensitivity() / check_epsilon(epsilon)


def ops_range(theta_min: float) -> float:
    """``B = log((1 - theta_min) / theta_min)``: the range bound of one record's log-likelihood on Theta."""
    return math.log((1.0 - theta_min) / theta_min)


def ops_temperature(epsilon: float, theta_min: float) -> float:
    """``t = min(1, eps / (2 B))`` (module docstring)."""
    return min(1.0, check_epsilon(epsilon) / (2.0 * ops_range(theta_min)))


def _summary_release(data: BernoulliData, mean: float, lo: float, hi: float, info: dict) -> Release:
    est = np.array([mean, lo, hi]) if data.interval else np.array([mean])
    return Release(est, info)


class NonPrivate(NonPrivateBase):
    """The exact conjugate posterior ``Beta(a + s, b + n - s)``: the non-private baseline."""

    def check_data(self, data):
        return check_bernoulli_data(data)

    def estimate(self, data) -> np.ndarray:
        m, lo, hi = beta_summary(data.a + data.s, data.b + data.n - data.s, data.level)
        return np.array([m, lo, hi]) if data.interval else np.array([m])


class _NoisyCount(Mechanism):
    """Shared by the noisy-count mechanisms: the ε-DP count ``s~ = s + Laplace(1 / eps)`` and its claim."""

    diagnostics = SAMPLER_DIAGNOSTICS

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    @staticmethod
    def noisy_count(data: BernoulliData, epsilon: float, rng: np.random.Generator) -> float:
        """``s + Laplace(0, 1 / eps)``: the only use of the data."""
        return float(data.s) + rng.laplace(0.0, laplace_scale(epsilon))

    def statistic(self, data) -> np.ndarray:
        """``[[s]]``: the count of ones (one row, one entry)."""
        return np.array([[float(check_bernoulli_data(data).s)]])

    def statistic_noise(self, data, epsilon: float):
        """Laplace noise (the ℓ1 K-norm in one dimension) of scale ``1 / eps``."""
        return get_norm("l1"), laplace_scale(float(epsilon))

    def privacy_claim(self) -> StatisticNoise:
        return StatisticNoise(statistic=self.statistic, noise=self.statistic_noise, additive=True,
                              description="the count of ones s (sensitivity 1 under replace-one, n public); the "
                                          "posterior summary is post-processing of s + Laplace(1/eps)")


class Naive(_NoisyCount):
    """The noisy count clamped to ``[0, n]``, then the conjugate posterior as if it were exact (ε-DP).

    ``s~ = s + Laplace(1 / eps)`` (module docstring), ``s_c = min(max(s~, 0), n)``, release the
    summary of ``Beta(a + s_c, b + n - s_c)``.  No options.
    """

    kind = "naive"

    def release(self, data, epsilon, rng) -> Release:
        data = check_bernoulli_data(data)
        rng = check_rng(rng)
        sc = min(max(self.noisy_count(data, epsilon, rng), 0.0), float(data.n))
        m, lo, hi = beta_summary(data.a + sc, data.b + data.n - sc, data.level)
        return _summary_release(data, m, lo, hi, {"sampler": "exact", "acceptance": 1.0, "steps": 1})


class NoiseAware(_NoisyCount):
    """The posterior given the noisy count, ``p(theta | s~)`` (ε-DP; Bernstein & Sheldon 2018).

    ``s~ = s + Laplace(1 / eps)`` as :class:`Naive`; the summary is that of the mixture
    ``sum_s w_s Beta(a + s, b + n - s)``, ``w_s ∝ Lap(s~ - s; 1/eps) BetaBinom(s; n, a, b)``
    (:func:`~kngflow.models.bayes.posterior.noise_aware_summary`), truncated to a window of
    counts around ``s~`` with neglected mass below 1e-12 of the kept.

    Keyword-only options: ``sampler`` (``"exact"``, default: the mixture's mean and
    quantiles, exact; ``"gibbs"``: Bernstein & Sheldon's Gibbs sampler over the latent
    count, :func:`~kngflow.models.bayes.posterior.gibbs_noise_aware`, whose ``draws`` give
    the mean and the empirical quantiles), ``draws`` (default 4000) and ``burn_in`` (sweeps
    per chain, default 100), used by ``"gibbs"`` only.  Either way the release reads the data
    through ``s~`` alone, so the claim is the same.  The stored ``steps`` diagnostic is the
    number of mixture components kept (exact) or the draws (Gibbs).
    """

    kind = "noise_aware"

    def __init__(self, *, sampler="exact", draws=4000, burn_in=100):
        self.sampler = check_choice("sampler", sampler, ("exact", "gibbs"))
        self.draws = check_int("draws", draws, 10)
        self.burn_in = check_int("burn_in", burn_in, 0)

    def __repr__(self) -> str:
        return f"NoiseAware(sampler={self.sampler!r}, draws={self.draws}, burn_in={self.burn_in})"

    def posterior(self, s_noisy: float, data: BernoulliData, epsilon: float):
        """``(mean, lower, upper, terms, bound)`` of ``p(theta | s~ = s_noisy)`` for the data's public facts."""
        return noise_aware_summary(s_noisy, data.n, data.a, data.b, laplace_scale(epsilon), data.level)

    def gibbs(self, s_noisy: float, data: BernoulliData, epsilon: float, rng: np.random.Generator) -> np.ndarray:
        """``draws`` values of ``theta`` from the Gibbs sampler targeting ``p(theta | s~ = s_noisy)``."""
        return gibbs_noise_aware(rng, s_noisy, data.n, data.a, data.b, laplace_scale(epsilon), self.draws,
                                 self.burn_in)

    def release(self, data, epsilon, rng) -> Release:
        data = check_bernoulli_data(data)
        rng = check_rng(rng)
        s_noisy = self.noisy_count(data, epsilon, rng)
        if self.sampler == "gibbs":
            x = self.gibbs(s_noisy, data, epsilon, rng)
            q = (1.0 - data.level) / 2.0
            lo, hi = np.quantile(x, [q, 1.0 - q])
            return _summary_release(data, float(x.mean()), float(lo), float(hi),
                                    {"sampler": "gibbs", "acceptance": 1.0, "steps": int(x.size)})
        m, lo, hi, terms, _ = self.posterior(s_noisy, data, epsilon)
        return _summary_release(data, m, lo, hi, {"sampler": "exact", "acceptance": 1.0, "steps": terms})


class OPS(Mechanism):
    """One posterior sample (Wang, Fienberg & Smola 2015): one draw of the tempered posterior on
    ``[theta_min, 1 - theta_min]`` (ε-DP; derivation in the module docstring).

    The draw is ``Beta(a + t s, b + t (n - s))`` restricted to ``Theta = [theta_min, 1 - theta_min]``,
    ``t = min(1, eps / (2 B))``, ``B = log((1 - theta_min) / theta_min)``, drawn exactly by
    inverse CDF.  The release is the sample (``lower``, ``upper``: NaN).

    Keyword-only option: ``theta_min`` (in (0, 1/2); default 0.01, ``B = 4.6``: ``t = eps / 9.19``).
    Not hardenable.

    Claim: :class:`~kngflow.mechanisms.claims.Density`, the sample's log density on ``Theta``
    (the exact density audit grids it; the audits' problem view releases the point alone).
    """

    kind = "ops"
    diagnostics = SAMPLER_DIAGNOSTICS

    def __init__(self, *, theta_min=0.01):
        if isinstance(theta_min, bool) or not isinstance(theta_min, (int, float)) or not 0.0 < theta_min < 0.5:
            raise ValueError(f"theta_min must be a number in (0, 1/2), got {theta_min!r}")
        self.theta_min = float(theta_min)

    def __repr__(self) -> str:
        return f"OPS(theta_min={self.theta_min:g})"

    def temperature(self, epsilon: float) -> float:
        """``t = min(1, eps / (2 B))``."""
        return ops_temperature(epsilon, self.theta_min)

    def tempered(self, data: BernoulliData, epsilon: float) -> tuple[float, float]:
        """``(alpha, beta)`` of the tempered posterior ``Beta(a + t s, b + t (n - s))`` (before the restriction)."""
        t = self.temperature(epsilon)
        return data.a + t * data.s, data.b + t * (data.n - data.s)

    def draw(self, data, epsilon, rng) -> tuple[float, int]:
        """One sample of the restricted tempered posterior and the tries it took (1: inverse CDF)."""
        data = check_bernoulli_data(data)
        rng = check_rng(rng)
        alpha, beta = self.tempered(data, epsilon)
        return truncated_beta(rng, alpha, beta, self.theta_min, 1.0 - self.theta_min)

    def release(self, data, epsilon, rng) -> Release:
        data = check_bernoulli_data(data)
        x, tries = self.draw(data, epsilon, rng)
        return _summary_release(data, x, math.nan, math.nan,
                                {"sampler": "exact", "acceptance": 1.0 / tries, "steps": tries})

    def log_density(self, data, epsilon, theta) -> np.ndarray:
        """Unnormalised log density of the sample at ``theta[..., 0]``: ``(alpha - 1) log theta +
        (beta - 1) log(1 - theta)`` on ``Theta``, -inf outside (the prior times the tempered
        likelihood, :meth:`tempered`)."""
        data = check_bernoulli_data(data)
        alpha, beta = self.tempered(data, float(epsilon))
        x = np.asarray(theta, dtype=np.float64)[..., 0]
        inside = (x >= self.theta_min) & (x <= 1.0 - self.theta_min)
        xc = np.where(inside, x, 0.5)
        return np.where(inside, (alpha - 1.0) * np.log(xc) + (beta - 1.0) * np.log1p(-xc), -np.inf)

    def _box(self, d: int):
        return np.full(d, self.theta_min), np.full(d, 1.0 - self.theta_min)

    def privacy_claim(self) -> Density:
        return Density(log_density=self.log_density, parameter_box=self._box)
