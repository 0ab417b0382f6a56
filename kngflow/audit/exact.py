r"""Exact privacy audits: the law of the release is computed, not sampled.

Which audit applies follows from the mechanism's privacy claim
(:meth:`~kngflow.mechanisms.Mechanism.privacy_claim`, :mod:`kngflow.mechanisms.claims`):
a :class:`~kngflow.mechanisms.claims.Density` claim gets the density audit, a
:class:`~kngflow.mechanisms.claims.GradientNoise` claim the K-norm noise audit, a
:class:`~kngflow.mechanisms.claims.StatisticNoise` (or
:class:`~kngflow.mechanisms.claims.Composed`) claim the statistic audit
(:func:`kngflow.audit.pipeline.audit_plan`).  The audits read the claim only.

**Density audit** (:func:`exact_audit`) for mechanisms claiming an unnormalised
``log_density(data, epsilon, theta)`` on a parameter box (KNG, exponential mechanism) in
one or two dimensions.  On a grid of spacing ``h`` over the box the densities of adjacent
data sets ``D, D'`` are normalised numerically, and the privacy loss of the pair is

    L(D, D') = max_theta |log f_D(theta) - log f_D'(theta)|
             = max_theta |E_D'(theta) - E_D(theta) + log Z_D' - log Z_D|,

with ``E`` the energy and ``Z`` the normaliser (a mechanism whose ``log_density`` is
exact up to a data-independent constant says so by ``Density(normalised=True)``; its
ratio is then read pointwise, with no quadrature, on a box large enough to approach the
supremum — objective perturbation on ``Theta = R^d``).  ε-DP requires ``L <= epsilon`` for every
adjacent pair.  The only numerical error is the quadrature of ``log Z_D - log Z_D'``
(the energies are exact at grid points); it is estimated as the change of that
difference between spacings ``h`` and ``2h`` (the Riemann sum's error is ``O(h)``, so
this over-estimates the error at ``h``).  Pairs are searched over small data sets with
a changed boundary record (:func:`~kngflow.audit.pairs.candidate_pairs`): many on a
coarse grid, the best few again on the fine grid.  Verdict: ``L <= epsilon + 2 error``.

**K-norm noise audit** (:func:`knorm_audit`, closed form) for mechanisms adding K-norm
noise ``V ∝ exp(-||V||_K / s)`` to a problem's loss gradient (objective perturbation).
For outputs ``z = g + V`` the density ratio is
``(||z - g'||_K - ||z - g||_K) / s <= ||g - g'||_K / s`` with equality far along
``g - g'``, so the noise's loss is exactly ``sup_theta ||grad_D(theta) - grad_D'(theta)||_K / s``.
The gradient difference is affine in ``theta``, its norm convex, so the supremum over the
ℓ1 ball is reached at a vertex ``±B e_j``.  An interior release ``theta`` has density
``f_V(V(theta)) |det dV/dtheta|``, so the loss adds the change of ``log |det|``.  Pairs are
enumerated over the problem's records.  Verdict: loss ``<= epsilon``.

**Statistic audit** (:func:`statistic_audit`, closed form) for releases that are
post-processing of ``T(D) + V``: K-norm noise (loss ``||T(D) - T(D')|| / scale``) or
Gaussian noise, whose exact (ε, δ) curve is the hockey-stick divergence
``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``, ``mu = ||T(D) - T(D')||_2 / sigma``
(Balle & Wang 2018; :func:`gaussian_delta`, :func:`gaussian_epsilon`).  A release made of
``T`` such steps, each at a public input (a gradient step at the current iterate), is
audited step by step over the public inputs the mechanism names and composed: K-norm steps
by basic composition (``T x`` the step's loss), Gaussian steps exactly (``T`` adaptively
chosen Gaussian steps of ``mu_step`` are ``sqrt(T) mu_step``-GDP, Dong, Roth & Su 2022).

**Discrete audit** (:func:`discrete_audit`, exact, any dimension) for releases drawn from a
public finite set of outcomes (a :class:`~kngflow.mechanisms.claims.Discrete` claim: the
exponential mechanism over a finite candidate set).  The probabilities are normalised
exactly (log-sum-exp over the outcomes), so the loss of a pair is
``max_o |log p_D(o) - log p_D'(o)|`` with no numerical error beyond rounding; outcomes with
probability 0 under one data set only make the loss infinite.  Pairs as the statistic
audit's (every ordered two records, the rest ``d`` or 64 copies of one fill record: many
copies of one record concentrate the law, which is where a changed record's loss is
largest).  Verdict: loss ``<= epsilon``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy.optimize import brentq

from ..mechanisms.claims import Density, Discrete, GradientNoise, StatisticNoise, gaussian_hockey_stick
from .pairs import AdjacentPair, audit_view, candidate_pairs
from .result import AuditResult

__all__ = ["AuditResult", "discrete_audit", "discrete_audit_applies", "exact_audit", "exact_audit_applies", "gaussian_delta", "gaussian_epsilon",
           "knorm_audit", "parameter_box", "statistic_audit", "statistic_audit_applies"]


def _box(claim, problem):
    if isinstance(claim, Density) and claim.parameter_box is not None:
        return claim.parameter_box(problem.d)
    return problem.parameter_box()


def parameter_box(mechanism, problem):
    """``(lo, hi)`` of a box holding ``Theta``, or None when there is none (``Theta = R^d``).

    The ``parameter_box(d)`` of the mechanism's :class:`~kngflow.mechanisms.claims.Density`
    claim where it gives one, else the problem's ``parameter_box()`` (where ``Theta`` is
    part of the declared domain).
    """
    return _box(mechanism.privacy_claim(), problem)


def _density_applies(claim, problem) -> bool:
    return isinstance(claim, Density) and problem.d <= 2 and _box(claim, problem) is not None


def exact_audit_applies(mechanism, problem) -> bool:
    """Whether :func:`exact_audit` can compute the law: a :class:`~kngflow.mechanisms.claims.Density`
    claim, d <= 2, a bounded ``Theta``."""
    return _density_applies(mechanism.privacy_claim(), problem)


def _grid(claim, problem, points: int) -> np.ndarray:
    """A grid of ``points`` per axis over :func:`parameter_box` (shape ``(points,) * d + (d,)``)."""
    d = problem.d
    lo, hi = _box(claim, problem)
    axes = [np.linspace(lo[i], hi[i], points) for i in range(d)]
    return np.stack(np.meshgrid(*axes, indexing="ij"), -1)


def _pair_loss(claim, problem, pair, epsilon, grid, error: bool):
    """``(loss, numerical error)`` of ``pair`` on ``grid``; with ``error``, the error is
    estimated from the normalisers on ``grid`` and on its every other point (twice the
    spacing), else 0."""
    D, D2 = (problem.audit_data(r) for r in pair.datasets())
    e1, e2 = (claim.log_density(x, epsilon, grid).ravel() for x in (D, D2))
    if claim.normalised:
        l1, l2 = e1, e2
    else:  # log Z_D at spacing h, computed once: the normaliser and the error estimate below
        z1, z2 = np.logaddexp.reduce(e1), np.logaddexp.reduce(e2)
        l1, l2 = e1 - z1, e2 - z2
    inside = np.isfinite(l1)
    if np.any(inside != np.isfinite(l2)):
        return np.inf, 0.0  # different supports: unbounded loss
    loss = float(np.max(np.abs(l1[inside] - l2[inside])))
    if not error or claim.normalised:
        return loss, 0.0
    # log Z_D - log Z_D' at spacing h and 2h (cell volumes cancel in the difference); the
    # density at spacing 2h is the one at spacing h on every other point of each axis
    shape, every_other = grid.shape[:-1], (slice(None, None, 2),) * (grid.ndim - 1)
    c1, c2 = (e.reshape(shape)[every_other].ravel() for e in (e1, e2))
    dz_h = z1 - z2
    dz_2h = np.logaddexp.reduce(c1) - np.logaddexp.reduce(c2)
    return loss, float(abs(dz_h - dz_2h))


def exact_audit(
    mechanism,
    problem,
    epsilon: float,
    *,
    run_epsilon: float | None = None,
    pairs: list[AdjacentPair] | None = None,
    candidates: int = 1000,
    keep: int = 5,
    points: int | None = None,
    seed: int = 0,
    progress=None,
) -> AuditResult:
    """Largest normalised log density ratio over adjacent pairs (1-D or 2-D problems).

    Parameters
    ----------
    mechanism : a mechanism whose claim is a :class:`~kngflow.mechanisms.claims.Density`
        (``log_density(data, epsilon, theta)``, a parameter box from the claim or the problem).
    problem : object with ``d``, ``audit_records()`` and ``audit_data(records)``.
    epsilon : declared ε; ``run_epsilon`` (default ε) is the one the density uses —
        a negative control runs at ``2 epsilon``.
    pairs : pairs to check; default ``candidates`` random candidate pairs, of which the
        ``keep`` best on a coarse grid are re-evaluated on the fine grid.
    points : grid points per axis (default 20001 in 1-D, 801 in 2-D).
    progress : optional callable ``progress(k)`` called after each pair is scored.
    """
    d = problem.d
    claim = mechanism.privacy_claim()
    problem = audit_view(mechanism, problem)
    if not _density_applies(claim, problem):
        raise ValueError("exact audits need a mechanism claiming a Density (log_density) on a bounded Theta and "
                         "a problem with d = 1 or 2")
    run = float(epsilon if run_epsilon is None else run_epsilon)
    points = points or (20001 if d == 1 else 801)
    fine = _grid(claim, problem, points)
    if pairs is None:
        pairs = candidate_pairs(problem, np.random.default_rng(seed), candidates, min_size=d)
        search = _grid(claim, problem, 81 if d == 2 else 2001)
        scores = []
        for p in pairs:
            scores.append(_pair_loss(claim, problem, p, run, search, False)[0])
            if progress:
                progress(1)
        pairs = [pairs[i] for i in np.argsort(scores)[::-1][:keep]]
    best = (-np.inf, 0.0, None)
    for p in pairs:
        loss, err = _pair_loss(claim, problem, p, run, fine, True)
        if loss > best[0]:
            best = (loss, err, p)
    loss, err, pair = best
    tol = max(2.0 * err, 1e-9 * epsilon)  # floor: rounding of densities known pointwise
    return AuditResult(
        "exact", repr(mechanism), float(epsilon), loss, tol, pair, bool(loss <= epsilon + tol),
        {"run_epsilon": run, "numerical_error": err, "grid_points": points},
    )


def knorm_audit(mechanism, problem, epsilon: float, *, run_epsilon: float | None = None,
                max_records: int = 64, max_rests: int = 3, seed: int = 0) -> AuditResult:
    """Closed-form privacy loss of K-norm noise added to the loss gradient (objective
    perturbation), interior releases.

    The mechanism's :class:`~kngflow.mechanisms.claims.GradientNoise` claim gives
    ``noise_law(d, epsilon) -> (norm, scale, share)``, ``log_jacobian(data, epsilon)`` (log
    det of the map from the release to the noise) and ``bound`` (the radius of the ℓ1 ball
    ``Theta``); ``problem`` supplies ``gradient(data, theta)`` besides the audit records.  For a
    pair the loss is the noise's ``max_theta ||grad_D(theta) - grad_D'(theta)||_K / scale``
    (vertices of the ℓ1 ball ``Theta``) plus ``|log_jacobian(D) - log_jacobian(D')|``.
    Pairs: every two records among the boundary and fill records (``max_records`` drawn
    when there are more), each with ``d - 1`` copies of a fill record as the rest — the
    ``max_rests`` fill records of smallest Euclidean norm, which add least curvature to
    the data set, so that one record's change weighs most in the Jacobian.
    Passes when the largest loss is at most ε; ``details`` has the two parts' maxima and
    their limits ``share * epsilon`` and ``(1 - share) * epsilon``.
    """
    d = problem.d
    claim = mechanism.privacy_claim()
    if not isinstance(claim, GradientNoise):
        raise ValueError(f"knorm audits need a mechanism claiming GradientNoise; {mechanism!r} claims "
                         f"{claim.kind}")
    problem = audit_view(mechanism, problem)
    run = float(epsilon if run_epsilon is None else run_epsilon)
    norm, scale, share = claim.noise_law(d, run)
    order = {"l1": 1, "l2": 2, "linf": np.inf}[norm]
    boundary, fill = problem.audit_records()
    records = np.unique(np.vstack([boundary, fill]), axis=0)
    if len(records) > max_records:
        records = records[np.random.default_rng(seed).choice(len(records), max_records, replace=False)]
    B = claim.bound
    vertices = np.vstack([B * np.eye(d), -B * np.eye(d)])
    best, parts, where = -np.inf, (0.0, 0.0), None
    noise_max = jac_max = 0.0
    for filler in fill[np.argsort(np.linalg.norm(fill, axis=1), kind="stable")[:max_rests]]:
        rest = np.tile(filler, (max(d, 2) - 1, 1))
        for r, r2 in itertools.combinations(records, 2):
            pair = AdjacentPair(rest, r, r2)
            D, D2 = (problem.audit_data(x) for x in pair.datasets())
            diff = np.array([claim.gradient(D, t) - claim.gradient(D2, t) for t in vertices])
            noise = float(np.max(np.linalg.norm(diff, ord=order, axis=1)) / scale)
            jac = abs(claim.log_jacobian(D, run) - claim.log_jacobian(D2, run))
            noise_max, jac_max = max(noise_max, noise), max(jac_max, jac)
            if noise + jac > best:
                best, parts, where = noise + jac, (noise, jac), pair
    tol = 1e-9 * epsilon
    return AuditResult(
        "knorm", repr(mechanism), float(epsilon), best, tol, where, bool(best <= epsilon + tol),
        {"run_epsilon": run, "noise": parts[0], "jacobian": parts[1], "noise_max": noise_max,
         "jacobian_max": jac_max, "noise_limit": share * epsilon, "jacobian_limit": (1 - share) * epsilon},
    )


def gaussian_delta(epsilon: float, mu: float) -> float:
    """Exact δ(ε) of the Gaussian mechanism whose sensitivity is ``mu`` noise standard
    deviations (``mu``-GDP): the hockey-stick divergence
    ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (Balle & Wang 2018, Thm 8)."""
    if mu <= 0.0:
        return 0.0
    if not math.isfinite(mu):
        return 1.0
    return max(0.0, gaussian_hockey_stick(epsilon, mu))


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Smallest ε with ``gaussian_delta(ε, mu) <= delta`` (to 1e-12): the exact ε at ``delta``
    of the ``mu``-GDP Gaussian mechanism; 0 when already ``delta(0) <= delta``, inf when
    ``delta <= 0 < mu``."""
    if mu <= 0.0 or gaussian_delta(0.0, mu) <= delta:
        return 0.0
    if delta <= 0.0 or not math.isfinite(mu):
        return math.inf
    hi = 1.0
    while gaussian_delta(hi, mu) > delta:
        hi *= 2.0
    return float(brentq(lambda e: gaussian_delta(e, mu) - delta, 0.0, hi, xtol=1e-13, rtol=1e-13))


#: rest sizes of the statistic audit's default pairs: ``d`` (at least 2) and 64 copies of a fill record
def _rest_sizes(d: int) -> tuple[int, int]:
    return max(d, 2), 64


def _steps(claim, n: int):
    """Steps composed by the release on data sets of public size ``n`` (1 when the claim gives
    no ``steps``; None: the release is not made of statistic-plus-noise steps at this ``n``)."""
    return 1 if claim.steps is None else claim.steps(n)


def _statistic_applies(claim, problem, pair: AdjacentPair | None = None) -> bool:
    if not isinstance(claim, StatisticNoise):
        return False
    sizes = [len(pair.rest) + 1] if pair is not None else [k + 1 for k in _rest_sizes(problem.d)]
    return any(_steps(claim, n) is not None for n in sizes)


def statistic_audit_applies(mechanism, problem, pair: AdjacentPair | None = None) -> bool:
    """Whether :func:`statistic_audit` decides the mechanism: a
    :class:`~kngflow.mechanisms.claims.StatisticNoise` claim (or :class:`~kngflow.mechanisms.claims.Composed`)
    whose ``steps(n)`` is not None at some audited size (the pair's, else the default rests')."""
    return _statistic_applies(mechanism.privacy_claim(), problem, pair)


def _fmt_point(p) -> str:
    return "(" + ",".join(f"{v + 0.0:.4g}" for v in np.ravel(p)) + ")"  # + 0.0: no "-0"


def statistic_audit(mechanism, problem, epsilon: float, *, run_epsilon: float | None = None,
                    pairs: list[AdjacentPair] | None = None, max_records: int = 64, seed: int = 0) -> AuditResult:
    """Closed-form privacy loss of noise added to a released statistic ``T``.

    The mechanism claims :class:`~kngflow.mechanisms.claims.StatisticNoise`: its
    ``statistic(data)`` is ``T`` (noisy sufficient statistics; the computed minimiser of
    output perturbation; a gradient step's statistic) and its ``noise(data, epsilon)`` the
    law of ``V`` in ``T + V``; the estimate is post-processing of ``T + V``.

    * ``(norm, scale)``: K-norm noise, density ∝ ``exp(-norm(v) / scale)`` (``scale`` may
      depend on the public ``n``).  The log density ratio at ``t`` is ``(norm(t - T') -
      norm(t - T)) / scale <= norm(T - T') / scale`` with equality far along ``T - T'``, so
      the loss of a pair is exactly ``norm(T(D) - T(D')) / scale``.
    * ``("gaussian", sigma)``: ``V ~ N(0, sigma^2 I)``, an (ε, δ) mechanism (δ the
      claim's ``delta``).  The pair's law is exactly the Gaussian mechanism with ``mu =
      ||T(D) - T(D')||_2 / sigma``; the loss reported is its exact ε at δ
      (:func:`gaussian_epsilon`), and ``delta(epsilon)`` of the pair is in ``details``.

    Optional parts of the claim for releases made of steps (noisy gradient descent, DP-SGD
    without subsampling): ``statistic`` may return rows ``(k, dim)``, the statistic at the
    public inputs ``iterates(d)`` (a step's current iterate: each step is a mechanism of the
    data given the public past), of which the audit takes the worst; ``steps(n)`` is the
    number ``T`` of steps on data sets of public
    size ``n`` (None: not a composition of such steps at that ``n``, e.g. Poisson-subsampled
    steps; those pairs are skipped).  The steps compose: K-norm steps by basic composition
    (loss ``T x`` the step's, an upper bound, which is what their calibration uses),
    Gaussian steps exactly (``sqrt(T) mu_step``-GDP).  The claim's ``description`` (a
    string) says what ``T`` is, e.g. the statistic before a projection.

    Pairs: every ordered two records of the (restricted) domain's boundary and fill records
    (``max_records`` drawn when there are more), the rest ``d`` or 64 copies of one fill
    record (many copies of one record pull a minimiser far along it, where the changed
    record's loss has no curvature left and moves it most).  A mechanism whose statistic
    is a sum of per-record terms (the claim's ``additive``) takes one fill record for
    the rest (it cancels in ``T(D) - T(D')``).  ``pairs`` replaces that enumeration.
    Passes when the largest loss is at most ε.
    """
    d = problem.d
    claim = mechanism.privacy_claim()
    if not isinstance(claim, StatisticNoise):
        raise ValueError(f"statistic audits need a mechanism claiming StatisticNoise; {mechanism!r} claims "
                         f"{claim.kind}")
    problem = audit_view(mechanism, problem)
    run = float(epsilon if run_epsilon is None else run_epsilon)
    delta = float(claim.delta)
    if pairs is None:
        boundary, fill = problem.audit_records()
        records = np.unique(np.vstack([boundary, fill]), axis=0)
        if len(records) > max_records:
            records = records[np.random.default_rng(seed).choice(len(records), max_records, replace=False)]
        rests = fill[:1] if claim.additive else fill
        pairs = [AdjacentPair(np.tile(f, (k, 1)), r, r2)
                 for f in rests for k in _rest_sizes(d) for r, r2 in itertools.permutations(records, 2)]
    points = None if claim.iterates is None else claim.iterates(d)
    best, where, info = -np.inf, None, {}
    first, skipped, gaussian = 0.0, set(), False
    for pair in pairs:
        n = len(pair.rest) + 1
        steps = _steps(claim, n)
        if steps is None:
            skipped.add(n)
            continue
        D, D2 = (problem.audit_data(x) for x in pair.datasets())
        norm, scale = claim.noise(D, run)
        diff = np.atleast_2d(np.asarray(claim.statistic(D), float) - np.asarray(claim.statistic(D2), float))
        gaussian = isinstance(norm, str) and norm == "gaussian"
        per = np.atleast_1d(np.linalg.norm(diff, axis=-1) if gaussian else norm(diff)) / scale
        k = int(np.argmax(per))
        step = float(per[k])
        first = max(first, float(per[0]))
        loss = gaussian_epsilon(math.sqrt(steps) * step, delta) if gaussian else steps * step
        if loss > best:
            best, where, info = loss, pair, {"steps": int(steps), "step_loss": step, "point": k}
    if where is None:
        raise ValueError("statistic audit: no audited pair is made of statistic-plus-noise steps "
                         f"(sizes {sorted(skipped)})")
    tol = 1e-9 * epsilon
    steps, step = info["steps"], info["step_loss"]
    details = {"run_epsilon": run, **info, "law": "gaussian" if gaussian else "knorm"}
    notes = []
    if claim.description:
        notes.append(f"statistic: {claim.description}")
    where_pt = ""
    if points is None:
        details.pop("point")
    else:
        details["point"] = np.asarray(points[info["point"]]).tolist()
        details["first_point_step"] = first
        where_pt = f" at public iterate {_fmt_point(points[info['point']])}"
    quantity = "mu = ||T(D) - T(D')||_2 / sigma" if gaussian else "loss"
    notes.append(f"step {quantity} {step:.4f}{where_pt}" + (
        f" (largest at the first iterate {_fmt_point(points[0])}: {first:.4f})" if points is not None else ""))
    if gaussian:
        mu = math.sqrt(steps) * step
        details.update(delta=delta, mu=mu, delta_at_epsilon=gaussian_delta(float(epsilon), mu))
        notes.append(f"{steps} step{'s' if steps > 1 else ''}: mu = sqrt({steps}) x {step:.4f} = {mu:.4f} "
                     f"(Gaussian DP composition, exact); exact delta at epsilon {epsilon:g}: "
                     f"{details['delta_at_epsilon']:.3g} (limit {delta:g})")
    elif steps > 1:
        notes.append(f"{steps} steps, each audited at its per-step budget epsilon/{steps}: "
                     f"loss <= {steps} x {step:.4f} = {best:.4f} (basic composition)")
    elif points is not None:
        notes.append("1 step: no composition")
    if skipped:
        details["skipped_sizes"] = sorted(skipped)
        notes.append(f"data sets of size {sorted(skipped)} skipped (not statistic-plus-noise steps there)")
    details["notes"] = notes
    return AuditResult("statistic", repr(mechanism), float(epsilon), best, tol, where, bool(best <= epsilon + tol),
                       details)


def discrete_audit_applies(mechanism, problem=None) -> bool:
    """Whether :func:`discrete_audit` computes the law: a :class:`~kngflow.mechanisms.claims.Discrete` claim."""
    return isinstance(mechanism.privacy_claim(), Discrete)


def _log_probabilities(claim, data, epsilon) -> np.ndarray:
    lw = np.asarray(claim.log_weights(data, epsilon), dtype=np.float64).ravel()
    return lw - np.logaddexp.reduce(lw)


def discrete_audit(mechanism, problem, epsilon: float, *, run_epsilon: float | None = None,
                   pairs: list[AdjacentPair] | None = None, max_records: int = 64, seed: int = 0) -> AuditResult:
    """Exact privacy loss of a release drawn from a public finite set of outcomes.

    The mechanism claims :class:`~kngflow.mechanisms.claims.Discrete`: ``outcomes(data)``
    (public, the same for both data sets of a pair: checked) and ``log_weights(data,
    epsilon)``.  For a pair the law is normalised exactly on each side and the loss is
    ``max_o |log p_D(o) - log p_D'(o)|`` (inf where one side gives an outcome probability 0
    and the other does not).  Pairs: every ordered two of the (restricted) domain's boundary
    and fill records (``max_records`` drawn when there are more), the rest ``d`` (at least
    2) or 64 copies of one fill record; ``pairs`` replaces that enumeration.  Passes when the
    largest loss is at most ε (a tolerance of ``1e-9 ε`` for rounding).
    """
    d = problem.d
    claim = mechanism.privacy_claim()
    if not isinstance(claim, Discrete):
        raise ValueError(f"discrete audits need a mechanism claiming Discrete; {mechanism!r} claims {claim.kind}")
    problem = audit_view(mechanism, problem)
    run = float(epsilon if run_epsilon is None else run_epsilon)
    if pairs is None:
        boundary, fill = problem.audit_records()
        records = np.unique(np.vstack([boundary, fill]), axis=0)
        if len(records) > max_records:
            records = records[np.random.default_rng(seed).choice(len(records), max_records, replace=False)]
        pairs = [AdjacentPair(np.tile(f, (k, 1)), r, r2)
                 for f in fill for k in _rest_sizes(d) for r, r2 in itertools.permutations(records, 2)]
    best, where, info = -np.inf, None, {}
    for pair in pairs:
        D, D2 = (problem.audit_data(x) for x in pair.datasets())
        o1, o2 = np.asarray(claim.outcomes(D)), np.asarray(claim.outcomes(D2))
        if o1.shape != o2.shape or not np.array_equal(o1, o2):
            raise ValueError(f"discrete audit: {mechanism!r} gives different outcome sets for adjacent data sets "
                             "(outcomes must depend on public facts only)")
        l1, l2 = _log_probabilities(claim, D, run), _log_probabilities(claim, D2, run)
        if l1.shape != (len(o1),) or l2.shape != (len(o1),):
            raise ValueError(f"discrete audit: log_weights must give one value per outcome ({len(o1)})")
        f1, f2 = np.isfinite(l1), np.isfinite(l2)
        if np.any(f1 != f2):
            loss, at = math.inf, int(np.argmax(f1 != f2))
        else:
            diff = np.where(f1, np.abs(l1 - np.where(f2, l2, 0.0)), 0.0)
            at = int(np.argmax(diff))
            loss = float(diff[at])
        if loss > best:
            best, where, info = loss, pair, {"outcome": np.asarray(o1[at]).tolist(), "outcomes": int(len(o1))}
    tol = 1e-9 * epsilon
    notes = [f"law computed exactly over {info['outcomes']} public outcomes; largest log-probability ratio at "
             f"outcome {_fmt_point(info['outcome'])}"]
    return AuditResult("exact", repr(mechanism), float(epsilon), best, tol, where, bool(best <= epsilon + tol),
                       {"run_epsilon": run, **info, "law": "discrete", "notes": notes})
