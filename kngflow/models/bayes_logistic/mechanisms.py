r"""Mechanisms for Bayesian logistic regression: the posterior mean and one posterior sample.

The model, its data and the range ``B`` of one record's log-likelihood are in
:mod:`kngflow.models.bayes_logistic.problem`; the target laws and their samplers in
:mod:`kngflow.models.bayes_logistic.posterior`.

Adjacency
---------
Replace-one with ``n`` public: ``D`` and ``D'`` have the same size and differ in one record.
The public facts (the domain, ``R``, the prior scale ``s``, ``n``, ``m``) are the same for both.

One posterior sample (:class:`OPS`): the privacy derivation
-----------------------------------------------------------
Wang, Fienberg & Smola (2015, Theorem 1) and Dimitrakakis et al. (2014, 2017): one draw from
a posterior is differentially private when one record's log-likelihood is bounded.  Here
``theta`` is restricted to the public ball ``Theta = {||theta||_2 <= R}`` (the Gaussian prior
``pi = N(0, s^2 I)`` truncated to it), and one record's log-likelihood
``log sigma(y x'theta)`` then ranges over ``[log sigma(-B), log sigma(B)]``, of width exactly
``B = R R_2`` (``R_2 = sup ||x||_2`` over the record domain, 1 for the unit ℓ2 ball;
derived in the problem module).  Let ``l(theta; D) = sum_i log sigma(y_i x_i'theta)``.  For
adjacent ``D, D'`` and every ``theta`` in ``Theta``

    |l(theta; D) - l(theta; D')|  <=  B.

The release is one draw of the posterior *tempered* by ``t``,

    f_D(theta) = pi(theta) exp(t l(theta; D)) / Z_D   on Theta,     Z_D = ∫_Theta pi exp(t l(.; D)),

so ``t |l(theta; D) - l(theta; D')| <= t B`` everywhere, hence ``Z_D' / Z_D`` lies in
``[e^(-tB), e^(tB)]``, and

    f_D(theta) / f_D'(theta) = exp(t (l(theta; D) - l(theta; D'))) Z_D' / Z_D  <=  exp(2 t B):

the draw is ``2 t B``-DP — the exponential mechanism (McSherry & Talwar) with score ``l`` of
sensitivity ``B`` and base measure ``pi``; the ``2`` pays for the data-dependent
normaliser, as in KNG.  Wang et al.'s Theorem 1 states the same bound as ``4 B'`` for
``sup |log p(x | theta)| <= B'`` (a range of width ``2 B'``), and their tempered version as
``4 t B'``: ``2 x`` the width of the range times ``t``, as here.  So

    t = eps / (2 B)   gives ε-DP      (option ``temper = true``, the default),

capped at 1: at ``eps >= 2 B`` one sample of the posterior itself (``t = 1``) is already
ε-DP, and a sharper-than-posterior draw is no longer a posterior sample.  The untempered
posterior sample (``temper = false``) is ``2B``-DP: ``8`` for ``R = 4`` on the unit ℓ2 ball;
with ``temper = false`` a release at ``eps < 2 B`` is refused.  The bound ``2 t B`` is
reached only in the limit (both the score's change ``t B`` and the normaliser's ``t B`` at
once); the exact density audit reads a loss between ``t B`` and ``2 t B``.

The sample's accuracy: at large ``n`` the tempered posterior is about normal around the
mode with covariance ``Sigma / t`` (``Sigma`` the posterior's), so ``theta_OPS - beta`` has
covariance about ``(1 + 1/t) Sigma`` against ``Sigma`` for the posterior mean: OPS's error
is about ``sqrt(1 + 1/t) = sqrt(1 + 2B/eps)`` times the posterior mean's (3 at ε = 1 and
``B = 4``), and it is consistent at every fixed ε (Wang et al.'s headline): the error falls
like ``n^(-1/2)``, but the ratio to the non-private error does not tend to 1.
"""

from __future__ import annotations

import math

import numpy as np

from kngflow.kernels.generic import metropolis_chains
from kngflow.mechanisms.base import (SAMPLER_DIAGNOSTICS, Mechanism, Release, check_choice, check_epsilon, check_int,
                                     check_rng)
from kngflow.mechanisms.claims import Density
from kngflow.mechanisms.hardening import Hardening, coupling_hardening, dyadic_lattice, snap
from kngflow.models.bayes_logistic.posterior import (envelope, envelope_weights, energy, log_density, rejection)
from kngflow.models.bayes_logistic.problem import BayesLogisticData, check_bayes_logistic_data

__all__ = ["NonPrivate", "OPS", "ops_temperature", "SAMPLERS", "GRID_BITS", "ETA_BITS"]

#: samplers of :class:`OPS`
SAMPLERS = ("auto", "exact", "metropolis")
#: a hardened release's grid is ``2^-GRID_BITS`` of the bound ``R`` (no public lower bound on
#: the law's spread exists: truncated by the ball, it can pile up against the sphere)
GRID_BITS = 20
#: a hardened exact draw is certified in double-double within ``2^-ETA_BITS`` of the grid
ETA_BITS = 44


def ops_temperature(epsilon: float, score_range: float, temper: bool = True) -> float:
    """``t = min(1, eps / (2 B))`` (``temper``), or 1 (untempered: needs ``eps >= 2 B``).

    Raises ValueError naming ``epsilon`` and ``temper`` for an untempered sample at ``eps < 2 B``."""
    epsilon = check_epsilon(epsilon)
    if temper:
        return min(1.0, epsilon / (2.0 * score_range))
    if epsilon < 2.0 * score_range:
        raise ValueError(f"epsilon must be at least 2B = {2.0 * score_range:g} with temper = false (one sample of the "
                         f"untempered posterior is 2B-DP), got {epsilon!r}; use temper = true")
    return 1.0


class NonPrivate(Mechanism):
    """The posterior mean (not private): the reference.

    Self-normalised importance sampling from the exact sampler's Gaussian envelope at
    ``t = 1`` (:func:`~kngflow.models.bayes_logistic.posterior.envelope_weights`): ``draws``
    proposals (option, default 4000), weighted by their acceptance probabilities.  Its Monte
    Carlo error is about the posterior's standard deviation over ``sqrt(ESS)``; the stored
    ``acceptance`` is ``ESS / draws``, ``steps`` the draws, ``sampler`` ``"none"`` (not a
    private sampler).  :meth:`summary` adds the equal-tailed credible interval.
    """

    kind = "nonprivate"
    private = False
    diagnostics = SAMPLER_DIAGNOSTICS

    def __init__(self, *, draws=4000):
        self.draws = check_int("draws", draws, 10)

    def __repr__(self) -> str:
        return f"NonPrivate(draws={self.draws})"

    def weighted_draws(self, data, rng) -> tuple[np.ndarray, np.ndarray]:
        """``(thetas (draws, m), normalised weights (draws,))`` of the posterior (``t = 1``)."""
        data = check_bayes_logistic_data(data)
        rng = check_rng(rng)
        inv_s2 = 1.0 / data.prior_scale**2
        env = envelope(data.X, data.y, 1.0, inv_s2, data.bound)
        if not env.ok:
            raise RuntimeError("the posterior's Gaussian envelope could not be verified (ill-conditioned curvature)")
        thetas = np.empty((self.draws, data.d))
        logw = np.empty(self.draws)
        envelope_weights(rng, data.X, data.y, 1.0, inv_s2, data.bound, env.c, env.M, env.k, env.K0, thetas, logw)
        if not np.isfinite(logw).any():
            raise RuntimeError(f"no proposal of {self.draws} fell inside the ball ||theta||_2 <= {data.bound:g}")
        w = np.exp(logw - logw.max())
        return thetas, w / w.sum()

    def release(self, data, epsilon, rng) -> Release:
        check_epsilon(epsilon)
        thetas, w = self.weighted_draws(data, rng)
        ess = 1.0 / float(np.sum(w * w))
        return Release(w @ thetas, {"sampler": "none", "acceptance": ess / self.draws, "steps": self.draws})

    def summary(self, data, rng, level: float = 0.9) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(mean, lower, upper)`` (each (m,)): the posterior mean and the equal-tailed
        credible interval at ``level`` per coordinate, from the weighted draws."""
        thetas, w = self.weighted_draws(data, rng)
        q = (1.0 - level) / 2.0
        lo, hi = np.empty(thetas.shape[1]), np.empty(thetas.shape[1])
        for j in range(thetas.shape[1]):
            order = np.argsort(thetas[:, j])
            cw = np.cumsum(w[order])
            lo[j] = thetas[order[min(np.searchsorted(cw, q), cw.size - 1)], j]
            hi[j] = thetas[order[min(np.searchsorted(cw, 1.0 - q), cw.size - 1)], j]
        return w @ thetas, lo, hi


class OPS(Mechanism):
    """One posterior sample (Wang, Fienberg & Smola 2015): one draw of the posterior tempered by
    ``t = min(1, eps / (2B))`` on ``{||theta||_2 <= R}`` (ε-DP; derivation in the module docstring).

    Keyword-only options
    --------------------
    temper : bool, default True.  False: the untempered posterior (``t = 1``), ``2B``-DP,
        refused at ``eps < 2B``.
    sampler : {"auto", "exact", "metropolis"}, default "auto".
        ``"exact"``: rejection from the Gaussian envelope
        (:mod:`kngflow.models.bayes_logistic.posterior`), exact draws; RuntimeError when no
        proposal of ``max_tries`` is accepted.  ``"metropolis"``: the package's random-walk
        Metropolis kernel, ``steps`` sweeps from 0 (first half burn-in), not exact.
        ``"auto"``: exact, then Metropolis where the envelope fails or ``max_tries`` pass
        without an acceptance (the release's ``sampler`` diagnostic says which ran).
    max_tries : int, default 10_000; steps : int, default 2000.

    Claim: :class:`~kngflow.mechanisms.claims.Density`, the tempered posterior's unnormalised
    log density ``-U_t`` on the ball (the exact audit grids it over the problem's box
    ``[-R, R]^m``).  The claim is the exact law: the Metropolis fallback's finite chain is
    not an exact draw, and releases it makes are covered only as far as the chain has
    converged (the default ``sampler = "auto"`` runs it only when the exact sampler stalls).

    Hardened by default (through :func:`kngflow.api.get_mechanism`): the exact draw is
    computed in double-double (``c + k M z``, :func:`~kngflow.kernels.dd.affine_dd`) and
    snapped from it (:meth:`hardening`); the Metropolis fallback moves on a dyadic lattice
    (exact positions).
    """

    kind = "ops"
    diagnostics = SAMPLER_DIAGNOSTICS
    snaps_itself = True

    def __init__(self, *, temper=True, sampler="auto", max_tries=10_000, steps=2000):
        if not isinstance(temper, (bool, np.bool_)):
            raise TypeError(f"temper must be true or false, got {temper!r}")
        self.temper = bool(temper)
        self.sampler = check_choice("sampler", sampler, SAMPLERS)
        self.max_tries = check_int("max_tries", max_tries, 1)
        self.steps = check_int("steps", steps, 2)

    def __repr__(self) -> str:
        return f"OPS(temper={self.temper}, sampler={self.sampler!r})"

    def temperature(self, data, epsilon: float) -> float:
        """``t`` at ``epsilon`` for data like ``data`` (public facts only: ``B = R R_2``)."""
        return ops_temperature(epsilon, check_bayes_logistic_data(data).score_range, self.temper)

    def implied_epsilon(self, data, epsilon: float) -> float:
        """``2 t B``: the ε the release actually has (``= epsilon`` unless ``t`` is capped at 1)."""
        return 2.0 * self.temperature(data, epsilon) * data.score_range

    # -- sampling ---------------------------------------------------------------------------
    def draw_exact(self, data: BayesLogisticData, t: float, rng: np.random.Generator):
        """``(hi, lo, err, info)`` of one exact draw, or None when the envelope fails or
        ``max_tries`` pass (``hi + lo`` the draw in double-double, ``err`` its rounding in ℓ2)."""
        inv_s2 = 1.0 / data.prior_scale**2
        env = envelope(data.X, data.y, t, inv_s2, data.bound)
        if not env.ok:
            return None
        z, hi, lo = np.empty(data.d), np.empty(data.d), np.empty(data.d)
        tries, err = rejection(rng, data.X, data.y, t, inv_s2, data.bound, env.c, env.M, env.k, env.K0,
                               self.max_tries, z, hi, lo)
        if tries < 0:
            return None
        return hi, lo, err, {"sampler": "exact", "acceptance": 1.0 / tries, "steps": int(tries)}

    def draw_metropolis(self, data: BayesLogisticData, t: float, rng: np.random.Generator, lattice: float = 0.0):
        """``(theta, info)``: the final state of one chain of ``steps`` sweeps from 0
        (:func:`kngflow.kernels.generic.metropolis_chains`, Gaussian base ``N(0, s^2 I)``)."""
        out, acc = np.empty((1, data.d)), np.empty(1)
        metropolis_chains(energy, rng, (data.X, data.y, float(t), float(data.bound) ** 2), np.zeros(data.d),
                          float(data.bound), float(data.prior_scale), self.steps, out, acc, lattice)
        return out[0], {"sampler": "metropolis", "acceptance": float(acc[0]), "steps": self.steps}

    def sample(self, data, epsilon, rng, size: int, sampler: str = "exact") -> np.ndarray:
        """``size`` independent draws (size, m) of the law of an unhardened release at ``epsilon``
        (for checks of the law): ``"exact"``: rejection draws sharing one envelope (it depends
        on the data and ``t`` only), RuntimeError where it fails; ``"metropolis"``: the final
        states of ``size`` independent chains of ``steps`` sweeps from 0."""
        data = check_bayes_logistic_data(data)
        rng = check_rng(rng)
        size = check_int("size", size, 1)
        sampler = check_choice("sampler", sampler, ("exact", "metropolis"))
        t = ops_temperature(epsilon, data.score_range, self.temper)
        out = np.empty((size, data.d))
        if sampler == "metropolis":
            acc = np.empty(size)
            metropolis_chains(energy, rng, (data.X, data.y, float(t), float(data.bound) ** 2), np.zeros(data.d),
                              float(data.bound), float(data.prior_scale), self.steps, out, acc)
            return out
        inv_s2 = 1.0 / data.prior_scale**2
        env = envelope(data.X, data.y, t, inv_s2, data.bound)
        if not env.ok:
            raise RuntimeError("the Gaussian envelope could not be verified")
        z, lo = np.empty(data.d), np.empty(data.d)
        for i in range(size):
            tries, _ = rejection(rng, data.X, data.y, t, inv_s2, data.bound, env.c, env.M, env.k, env.K0,
                                 self.max_tries, z, out[i], lo)
            if tries < 0:
                raise RuntimeError(f"exact sampler: no proposal accepted in max_tries={self.max_tries}")
        return out

    def release(self, data, epsilon, rng) -> Release:
        data = check_bayes_logistic_data(data)
        epsilon = check_epsilon(epsilon)
        rng = check_rng(rng)
        t = ops_temperature(epsilon, data.score_range, self.temper)
        h = self._hardening(data) if self.hardened else None
        if self.sampler != "metropolis":
            found = self.draw_exact(data, t, rng)
            if found is not None:
                hi, lo, err, info = found
                if h is None:
                    return Release(hi, info)
                if err <= h.eta / 2.0:  # the snapping's own rounding is below the other half
                    return Release(snap(hi, h, rng, lo), info)
            elif self.sampler == "exact":
                raise RuntimeError(f"exact sampler: no proposal accepted in max_tries={self.max_tries} (or the "
                                   "envelope failed); use sampler='auto' or 'metropolis'")
        if h is None:
            theta, info = self.draw_metropolis(data, t, rng)
            return Release(theta, info)
        theta, info = self.draw_metropolis(data, t, rng, lattice=dyadic_lattice(float(data.bound)))
        return Release(snap(theta, h, rng), info)  # lattice points: exact positions

    # -- privacy ------------------------------------------------------------------------------
    def hardening(self, data, epsilon) -> Hardening:
        """The coupling route on ``[-R, R]^m`` (:mod:`kngflow.mechanisms.hardening`), snapped by
        the mechanism (``site = "sampler"``): grid ``Λ = 2^(floor(log2 R) - 20)``, rounding
        bound ``η = Λ 2^-44``, so ``δ′ = (1 + e^ε) 2 m 2^-44`` (8.5·10^-13 at ``m = 2``, ε = 1).

        The exact draw ``c + k M z`` is computed in double-double with a bound on its rounding
        (:func:`~kngflow.kernels.dd.affine_dd`, about ``u^2 |theta|``) and snapped from its
        double-double value when that bound is at most ``η / 2`` (the snapping's own rounding,
        ``u Λ + 2 u^2 |theta|``, is below the other half); otherwise — not observed — and for
        the Metropolis fallback, the chain moves on the dyadic lattice ``2^(floor(log2 R) - 46)``
        (exact positions, rounding 0).  ``c``, ``M`` and ``K0`` are what the envelope computed:
        they define the proposal, and decisions are modelled as exact.  The grid is a fixed
        fraction of ``R`` (``4·10^-6`` for ``R = 4``), not of the law's spread: no public lower
        bound on the spread exists (the law can pile up against the sphere); at ``n = 10^7``,
        ``t = 1`` the posterior's sd is about ``6·10^-4``, and the snapping adds ``Λ²/4``,
        below ``10^-5`` of its variance."""
        return self._hardening(check_bayes_logistic_data(data))

    @staticmethod
    def _hardening(data: BayesLogisticData) -> Hardening:
        h = coupling_hardening(float(data.bound), 0.0, data.d, site="sampler", bits=GRID_BITS)
        return h._replace(eta=math.ldexp(h.grid, -ETA_BITS))

    def log_density(self, data, epsilon, theta) -> np.ndarray:
        """Unnormalised log density of the release at ``theta`` (..., m): ``-U_t(theta)`` on the
        ball, ``-inf`` outside (:func:`~kngflow.models.bayes_logistic.posterior.log_density`)."""
        data = check_bayes_logistic_data(data)
        t = self.temperature(data, float(epsilon))
        return log_density(data.X, data.y, t, 1.0 / data.prior_scale**2, data.bound, theta)

    def privacy_claim(self) -> Density:
        """The exact law's log density; the box is the problem's ``[-R, R]^m``."""
        return Density(log_density=self.log_density)
