"""DP-SGD (Abadi et al. 2016) on a loss's per-example gradients: clipping, Poisson
subsampling and Gaussian noise, calibrated by dp-accounting's RDP accountant."""

from __future__ import annotations

import math
from numbers import Real

import numpy as np

from kngflow.mechanisms.base import Release, check_epsilon, check_int, check_positive, check_probability, check_rng
from kngflow.mechanisms.claims import StatisticNoise
from kngflow.mechanisms.hardening import UNIT_ROUNDOFF, Hardening, lipschitz_hardening, snap
from kngflow.mechanisms.erm.accountants import dpsgd_accountant_epsilon, dpsgd_noise_multiplier
from kngflow.mechanisms.erm.base import DEFAULT_REG, GAUSS_REACH, ERMMechanism, erm_release, gaussian_lipschitz
from kngflow.mechanisms.erm.noisy_gd import audit_iterates, poisson_sample, steps_claim


#: Largest ε DP-SGD calibrates at: a mechanism that is (EPS_CAP, δ)-DP is (ε, δ)-DP for
#: every ε >= EPS_CAP, and the subsampled-Gaussian RDP series stay well conditioned there.
#: At EPS_CAP the noise is already negligible in the studies.
EPS_CAP = 64.0


#: radius of DP-SGD's audited iterates (its iterates are not projected): for the logistic
#: loss ``sigma(-40) ~ 4e-18``, so per-example gradients there are at their limits; for the
#: Huber hinge every margin of a unit-ball record is beyond the band for most directions
DPSGD_AUDIT_RADIUS = 40.0


class DPSGD(ERMMechanism):
    """DP-SGD (Abadi et al. 2016; chapter §7.4.1) for ``J`` with Poisson subsampling.

    ``q = sampling_rate`` if given, else ``min(1, batch_size / n)``;
    ``T = min(ceil(epochs / q), max_steps)``; from 0, per step: include each record
    independently with probability ``q``; clip each sampled per-example gradient
    (hook :meth:`per_example_gradients`) to ℓ2 norm ``clip`` (C; default the loss's
    Lipschitz bound ``L``, which bounds every such gradient, so no clipping bias);
    ``g = (sum of clipped + N(0, (z C)^2 I)) / (q n) + reg theta``; ``theta <- theta - lr g``
    (default ``lr`` one over ``J``'s smoothness, :meth:`smoothness_of`).  The normaliser
    ``q n`` (expected batch size) is public: ``n`` is public under kngflow's adjacency.

    Privacy.  The per-step query (sum of clipped gradients of a Poisson sample) is the
    subsampled Gaussian mechanism with sensitivity C under add-or-remove-one; its T-fold
    adaptive composition is (ε_a, δ_a)-DP with ``z`` calibrated by dp_accounting's RDP
    accountant (:func:`dpsgd_noise_multiplier`, cached).  kngflow's adjacency replaces a
    record (fixed n); replacement is a removal followed by an addition, so group privacy
    (size 2) gives ``(2 ε_a, (1 + e^{ε_a}) δ_a)``.  The mechanism calibrates
    ``ε_a = ε/2``, ``δ_a = δ / (1 + e^{ε/2})``: (ε, δ)-DP under replacement.  (This costs
    noise: the RDP accountant does not support Poisson subsampling under replace-one, and
    the tight PLD accountant with ``REPLACE_ONE`` takes 10–100 s per calibration.)

    (The group-privacy step applies the add-or-remove guarantee to ``D minus the record``:
    the mechanism, with the public ``n`` in ``q`` and the normaliser, is defined on data
    sets of any size.)

    ε above :data:`EPS_CAP` is calibrated at the cap; where the accountant cannot certify
    the target (tiny ε, below the floor of the RDP orders used — under 1e-3 at δ = 1e-5)
    the release is the data-independent 0 (0-DP, ``info["sampler"] = "none"``).

    Audit.  With ``q = 1`` (``sampling_rate = 1``, or ``batch_size >= n``) a step is the
    Gaussian mechanism on the sum of clipped per-example gradients at the public iterate,
    then an affine bijection (``lr``, ``q n`` public): the exact audit
    (:func:`~kngflow.audit.statistic_audit`) reads ``mu = ||S_D - S_D'||_2 / (z C)`` at
    ``theta = 0`` and at points of radius :data:`DPSGD_AUDIT_RADIUS` (the iterates are not
    projected), composes the ``T`` steps exactly (``sqrt(T) mu``) and checks the exact ε at
    δ of that Gaussian mechanism — under replace-one directly, with no group-privacy step.
    With ``q < 1`` the step is a subsampled mixture with no closed form: the accountant
    audit (:func:`~kngflow.audit.accountant_audit`) re-checks dp_accounting's ε for the
    configuration ``(z, q, T)`` at ``δ_a``, doubled by group privacy, against ε.  The
    accountant audit runs for ``q = 1`` as well.

    A model supplies the loss hooks of :class:`ERMMechanism` and :meth:`per_example_gradients`.
    """

    kind = "dpsgd"

    def __init__(self, *, reg=DEFAULT_REG, batch_size=256, sampling_rate=None, epochs=5.0, max_steps=5000,
                 clip=None, lr=None, delta=1e-5):
        super().__init__(reg)
        self.batch_size = check_int("batch_size", batch_size, 1)
        self.sampling_rate = None
        if sampling_rate is not None:
            if not isinstance(sampling_rate, Real) or isinstance(sampling_rate, bool):
                raise TypeError(f"sampling_rate must be a real number in (0, 1], got {type(sampling_rate).__name__}")
            if not 0.0 < sampling_rate <= 1.0:  # also rejects NaN
                raise ValueError(f"sampling_rate must lie in (0, 1], got {sampling_rate!r}")
            self.sampling_rate = float(sampling_rate)
        self.epochs = check_positive("epochs", epochs)
        self.max_steps = check_int("max_steps", max_steps, 1)
        self.clip = None if clip is None else check_positive("clip", clip)
        self.lr = None if lr is None else check_positive("lr", lr)
        self.delta = check_probability("delta", delta)

    def options(self) -> dict:
        out = {"reg": self.reg, "epochs": self.epochs, "max_steps": self.max_steps, "delta": self.delta}
        if self.sampling_rate is None:
            out["batch_size"] = self.batch_size
        else:
            out["sampling_rate"] = self.sampling_rate
        if self.clip is not None:
            out["clip"] = self.clip
        if self.lr is not None:
            out["lr"] = self.lr
        return out

    # ---------------------------------------------------------------- the loss's hook
    def per_example_gradients(self, data, theta: np.ndarray, idx) -> np.ndarray:
        """The gradients ``grad l(theta; z_i)`` of the records ``idx`` (an index array, or
        ``slice(None)`` for every record) as rows."""
        raise NotImplementedError

    def schedule(self, n: int) -> tuple[float, int]:
        """``(q, T)``."""
        q = self.sampling_rate if self.sampling_rate is not None else min(1.0, self.batch_size / n)
        return q, int(min(math.ceil(self.epochs / q), self.max_steps))

    def accountant_target(self, epsilon: float) -> tuple[float, float]:
        """``(ε_a, δ_a)`` under add-or-remove that give (ε, δ) under replacement."""
        e = min(epsilon, EPS_CAP)
        return e / 2.0, self.delta / (1.0 + math.exp(e / 2.0))

    def noise_multiplier(self, n: int, epsilon: float) -> float | None:
        q, T = self.schedule(n)
        ea, da = self.accountant_target(epsilon)
        return dpsgd_noise_multiplier(ea, da, q, T)

    def clip_norm(self, d: int, lipschitz: float | None = None) -> float:
        """``C``: ``clip``, default ``L`` (``lipschitz``, default :meth:`lipschitz` of ``d``)."""
        if self.clip is not None:
            return self.clip
        return self.lipschitz(d) if lipschitz is None else lipschitz

    # ---------------------------------------------------------------- audit seam
    #: the step's statistic is a sum over records (the rest cancels in ``S_D - S_D'``)
    statistic_additive = True
    statistic_description = ("the sum S of clipped per-example gradients at the step's public iterate (q = 1: "
                             "every record); the step releases theta - lr ((S + N(0, (zC)^2 I)) / (q n) + reg theta), "
                             "an affine bijection of S + noise")

    def privacy_claim(self) -> StatisticNoise:
        """Noisy steps at public iterates (:meth:`statistic`, :meth:`statistic_noise`,
        :meth:`statistic_steps`), with the accountant's ε when the noise is Gaussian (δ > 0)."""
        return steps_claim(self, self.delta)

    def audit_iterates(self, d: int) -> np.ndarray:
        """``theta_0 = 0`` and points of radius :data:`DPSGD_AUDIT_RADIUS` (:func:`audit_iterates`)."""
        return audit_iterates(d, DPSGD_AUDIT_RADIUS)

    def _clip_sum(self, G: np.ndarray, C: float) -> np.ndarray:
        """``sum_i clip_C(G_i)`` over the rows of ``G``."""
        scale = np.minimum(1.0, C / np.maximum(np.sqrt(np.einsum("ij,ij->i", G, G)), 1e-300))
        return scale @ G

    def statistic(self, data) -> np.ndarray:
        """``S(theta) = sum_i clip_C(grad l(theta; z_i))`` at each of :meth:`audit_iterates` (rows)."""
        data = self.check_data(data)
        d = self.size(data)[1]
        C = self.clip_norm(d, self.lipschitz_of(data))
        return np.array([self._clip_sum(self.per_example_gradients(data, w, slice(None)), C)
                         for w in self.audit_iterates(d)])

    def statistic_noise(self, data, epsilon: float):
        """``("gaussian", z C)`` on the sum (infinite for the data-independent release)."""
        n, d = self.size(data)
        z = self.noise_multiplier(n, epsilon)
        return "gaussian", (math.inf if z is None else z * self.clip_norm(d, self.lipschitz_of(data)))

    def statistic_steps(self, n: int) -> int | None:
        """``T`` when ``q = 1``; None for Poisson-subsampled steps (no closed form)."""
        q, T = self.schedule(n)
        return T if q >= 1.0 else None

    def accountant_epsilon(self, n: int, epsilon: float, run_epsilon: float | None = None) -> float:
        """ε under replace-one that dp_accounting's RDP accountant certifies, at ``delta``, for
        the noise multiplier calibrated at ``run_epsilon``: ``2 ε_a`` with ``ε_a`` the
        add-or-remove ε of ``(z, q, T)`` at ``δ_a = δ / (1 + e^{ε/2})`` (group privacy; 0 for
        the data-independent release)."""
        q, T = self.schedule(n)
        z = self.noise_multiplier(n, epsilon if run_epsilon is None else run_epsilon)
        if z is None:
            return 0.0
        return 2.0 * dpsgd_accountant_epsilon(z, q, T, self.accountant_target(epsilon)[1])

    def hardening(self, data, epsilon) -> Hardening:
        """Lipschitz route on each step's noisy sum ``S_b + N(0, (zC)^2 I)`` (site
        "statistic", ``T`` snaps; the iterates and the release are post-processing).

        Given the Poisson batch ``b`` (drawn without looking at the data), the step is
        Gaussian around ``S_b(D)``, so the rounding lemma holds batch by batch with
        :func:`gaussian_lipschitz` ``(d, zC)``, and so for the mixture over batches.  Clamp
        ``B = n C + 64 zC``.  Rounding: ``S_b`` sums at most ``n`` clipped gradients of norm
        at most ``C``, within ``n u n C`` in any order of summation; the sums with the noise
        and the dither add ``16 u 2B``.  ``u = 2^-53``.
        """
        data = self.check_data(data)
        n, d = self.size(data)
        z = self.noise_multiplier(n, epsilon)
        C = self.clip_norm(d, self.lipschitz_of(data))
        _, T = self.schedule(n)
        sigma = (z if z is not None else 1.0) * C
        bound = n * C + GAUSS_REACH * sigma
        eta = (float(n) ** 2 * C + 32.0 * bound) * UNIT_ROUNDOFF
        return lipschitz_hardening(gaussian_lipschitz(d, sigma), bound, eta, d, epsilon, snaps=T, site="statistic")

    def release(self, data, epsilon, rng) -> Release:
        data = self.check_data(data)
        epsilon = check_epsilon(epsilon)
        rng = check_rng(rng)
        n, d = self.size(data)
        q, T = self.schedule(n)
        z = self.noise_multiplier(n, epsilon)
        if z is None:
            return erm_release(np.zeros(d), 0, "none")
        C = self.clip_norm(d, self.lipschitz_of(data))
        lr = self.lr if self.lr is not None else 1.0 / self.smoothness_of(data)
        reg, norm = self.reg, q * n
        h = self.hardening(data, epsilon) if self.hardened else None
        # the dither comes from a stream 2^128 draws ahead, so the batches and the noise are
        # those of the unhardened release (the hardened one is its snapping, step by step)
        dither = np.random.Generator(rng.bit_generator.jumped()) if h is not None else None
        theta = np.zeros(d)
        for _ in range(T):
            idx = poisson_sample(rng, n, q)
            s = self._clip_sum(self.per_example_gradients(data, theta, idx), C) + rng.standard_normal(d) * (z * C)
            if h is not None:
                s = snap(s, h, dither)
            theta = theta - lr * (s / norm + reg * theta)
        return erm_release(self.finish(data, theta), T)
