r"""Privacy claims: what a mechanism promises, as one object an audit can check.

Every mechanism makes exactly one claim (:meth:`kngflow.mechanisms.Mechanism.privacy_claim`).
The claim carries δ (0 for pure ε-DP) and says how the release's law can be audited;
:mod:`kngflow.audit` dispatches on its type:

======================  =====================================================================
claim                   what the audit checks
======================  =====================================================================
:class:`BlackBox`       only (ε, δ): releases are sampled on adjacent data sets and a lower
                        confidence bound on the loss is compared with ε (the default claim)
:class:`Density`        an unnormalised log density of the release: the loss is computed
                        exactly on a grid over the parameter box (1-D and 2-D)
:class:`GradientNoise`  K-norm noise added to the loss gradient (objective perturbation):
                        the loss is the noise's, in closed form, plus the Jacobian's change
:class:`StatisticNoise` K-norm or Gaussian noise added to a statistic ``T(D)``, possibly in
                        ``T`` steps at public iterates: the loss in closed form, composed
:class:`Composed`       :class:`StatisticNoise` steps whose ε comes from a privacy
                        accountant (dp-accounting): both the steps and the accountant's ε
:class:`Discrete`       the release is one of a public finite set of outcomes with a
                        computable probability each (the exponential mechanism over a
                        finite candidate set): the loss is computed exactly, any dimension
======================  =====================================================================

Every claim is also checked black-box.  The callables a claim holds are bound methods of
the mechanism; their signatures are given with each class.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

__all__ = ["PrivacyClaim", "BlackBox", "Density", "GradientNoise", "StatisticNoise", "Composed", "Discrete",
           "gaussian_hockey_stick"]


@dataclass(frozen=True)
class PrivacyClaim:
    """(ε, δ)-DP of the released estimate at the ε the mechanism is called with.

    ``delta``: 0 for pure ε-DP.  ``restrict_records``: optional
    ``(boundary, fill) -> (boundary, fill)`` narrowing the problem's audit records to the
    mechanism's declared domain (sufficient-statistics regression needs the intercept
    column equal to 1); audits draw their adjacent data sets from the narrowed domain.
    ``additive_centre``: optional ``centre(data) -> (d,) array``, the data-dependent point
    the release is built around: for a release computed in floating point as the centre
    plus data-independent noise, that centre; for other releases of additive noise (a
    noisy statistic, a perturbed objective) or exact samplers, their non-private estimate.
    The bit-level audit then counts, around the centres of both candidate data sets,
    events that are impossible in exact arithmetic (:func:`kngflow.audit.bit_audit`).
    """

    delta: float = 0.0
    restrict_records: Callable | None = None
    additive_centre: Callable | None = None

    def __post_init__(self):
        d = self.delta
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not (math.isfinite(d) and 0.0 <= d < 1.0):
            raise ValueError(f"delta of a privacy claim must be a number in [0, 1), got {d!r}")

    @property
    def kind(self) -> str:
        """Short name of the claim, for reports: ``black-box``, ``density``, ..."""
        return _KINDS[type(self)]


@dataclass(frozen=True)
class BlackBox(PrivacyClaim):
    """Only (ε, δ) is claimed; the law is audited by sampling releases."""


@dataclass(frozen=True)
class Density(PrivacyClaim):
    """The release has unnormalised log density ``log_density(data, epsilon, theta)``.

    ``log_density`` maps ``theta`` of shape ``(..., d)`` to ``(...)``, -inf outside the
    support.  ``parameter_box(d) -> (lo, hi) | None`` bounds the support (None here: the
    problem's ``parameter_box()``; a box of None: no grid audit).  ``normalised``: the
    log density is exact up to a data-independent constant, so ratios are read pointwise.
    """

    log_density: Callable | None = None
    parameter_box: Callable | None = None
    normalised: bool = False

    def __post_init__(self):
        super().__post_init__()
        if not callable(self.log_density):
            raise TypeError("Density claim needs a callable log_density(data, epsilon, theta)")


@dataclass(frozen=True)
class GradientNoise(PrivacyClaim):
    """K-norm noise on the loss gradient (objective perturbation, ``Theta`` the ℓ1 ball of radius ``bound``).

    ``noise_law(d, epsilon) -> (norm, scale, share)``: the noise's norm name, its scale,
    and the share of ε it spends; ``log_jacobian(data, epsilon)``: log det of the map from
    the release to the noise (the rest of ε); ``gradient(data, theta)``: the loss gradient
    the noise is added to (what the audit differences between adjacent data sets).
    """

    noise_law: Callable | None = None
    log_jacobian: Callable | None = None
    bound: float = 1.0
    gradient: Callable | None = None

    def __post_init__(self):
        super().__post_init__()
        if not (callable(self.noise_law) and callable(self.log_jacobian) and callable(self.gradient)):
            raise TypeError("GradientNoise claim needs callables noise_law(d, epsilon), log_jacobian(data, epsilon) "
                            "and gradient(data, theta)")


@dataclass(frozen=True)
class StatisticNoise(PrivacyClaim):
    """The estimate is post-processing of ``T(D) + V``.

    ``statistic(data)``: ``T`` (rows ``(k, dim)``: ``T`` at the public iterates
    ``iterates(d)``); ``noise(data, epsilon)``: ``(norm, scale)`` for K-norm noise
    (``norm`` a callable on rows) or ``("gaussian", sigma)``; ``steps(n)``: number of such
    steps on data sets of public size ``n`` (None: 1 step; a return of None: not steps at
    that ``n``); ``additive``: ``T`` is a sum of per-record terms; ``description``: what
    ``T`` is, for the audit's report.
    """

    statistic: Callable | None = None
    noise: Callable | None = None
    steps: Callable | None = None
    iterates: Callable | None = None
    additive: bool = False
    description: str = ""

    def __post_init__(self):
        super().__post_init__()
        if not (callable(self.statistic) and callable(self.noise)):
            raise TypeError("StatisticNoise claim needs callables statistic(data) and noise(data, epsilon)")


@dataclass(frozen=True)
class Composed(StatisticNoise):
    """:class:`StatisticNoise` steps whose ε at ``delta`` a privacy accountant certifies:
    ``accountant_epsilon(n, epsilon, run_epsilon) -> float`` (dp-accounting's ε for the
    noise calibrated at ``run_epsilon``, data sets of size ``n``)."""

    accountant_epsilon: Callable | None = None

    def __post_init__(self):
        super().__post_init__()
        if not callable(self.accountant_epsilon):
            raise TypeError("Composed claim needs a callable accountant_epsilon(n, epsilon, run_epsilon)")
        if not self.delta > 0.0:
            raise ValueError("Composed claim needs delta > 0 (the accountant's epsilon is at that delta)")


@dataclass(frozen=True)
class Discrete(PrivacyClaim):
    """The release is one of finitely many public outcomes, drawn with probability
    ``∝ exp(log_weights(data, epsilon))``.

    ``outcomes(data) -> (m, d)``: the candidate releases, a function of public facts of
    ``data`` only (its size and shape), the same for adjacent data sets;
    ``log_weights(data, epsilon) -> (m,)``: unnormalised log probabilities of the outcomes
    (-inf: never released).  The audit normalises them and reads the privacy loss
    ``max_o |log p_D(o) - log p_D'(o)|`` exactly, in any dimension
    (:func:`kngflow.audit.exact.discrete_audit`).
    """

    outcomes: Callable | None = None
    log_weights: Callable | None = None

    def __post_init__(self):
        super().__post_init__()
        if not (callable(self.outcomes) and callable(self.log_weights)):
            raise TypeError("Discrete claim needs callables outcomes(data) and log_weights(data, epsilon)")


_KINDS = {PrivacyClaim: "black-box", BlackBox: "black-box", Density: "density", GradientNoise: "gradient-noise",
          StatisticNoise: "statistic-noise", Composed: "composed", Discrete: "discrete"}


def gaussian_hockey_stick(epsilon: float, mu: float) -> float:
    """δ(ε) of Gaussian noise whose sensitivity is ``mu`` > 0 noise standard deviations
    (``mu``-GDP, the law of a Gaussian :class:`StatisticNoise` step): the hockey-stick
    divergence of ``N(mu, 1)`` from ``N(0, 1)`` (Balle & Wang 2018, Theorem 8),
    ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``, the second term through
    ``log Phi`` so that it neither overflows nor underflows.  Computed as written (it may
    round below 0 where it is 0); the audit's :func:`~kngflow.audit.exact.gaussian_delta`
    clamps it and takes ``mu`` 0 or inf."""
    from scipy.special import log_ndtr, ndtr  # here: importing the contract loads no scipy

    a = -epsilon / mu
    return float(ndtr(a + mu / 2.0) - math.exp(min(epsilon + log_ndtr(a - mu / 2.0), 700.0)))


def gaussian_mu(epsilon: float, delta: float) -> float:
    """``mu*``, the root of ``delta(eps; mu) = delta`` (:func:`gaussian_hockey_stick`, to relative
    1e-13): δ(ε; μ) increases with μ, so Gaussian noise of sensitivity ``mu`` standard
    deviations is (ε, δ)-DP exactly when ``mu <= mu*`` (the analytic Gaussian mechanism,
    Balle & Wang 2018).  ValueError when no ``mu`` above 1e-300 reaches ``delta``."""
    hi = 1.0
    while gaussian_hockey_stick(epsilon, hi) < delta:
        hi *= 2.0
    lo = hi / 2.0
    while lo > 1e-300 and gaussian_hockey_stick(epsilon, lo) > delta:
        lo /= 2.0
    from scipy.optimize import brentq  # here: importing scipy.optimize costs every worker ~0.5 s
    return brentq(lambda m: gaussian_hockey_stick(epsilon, m) - delta, lo, hi, xtol=1e-300, rtol=1e-13)
