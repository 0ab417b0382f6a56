r"""Exact privacy audits: the law of the release is computed, not sampled.

**Density audit** (:func:`exact_audit`) for mechanisms with an unnormalised
``log_density(data, epsilon, theta)`` on a parameter box (KNG, exponential mechanism) in
one or two dimensions.  On a grid of spacing ``h`` over the box the densities of adjacent
data sets ``D, D'`` are normalised numerically, and the privacy loss of the pair is

    L(D, D') = max_theta |log f_D(theta) - log f_D'(theta)|
             = max_theta |E_D'(theta) - E_D(theta) + log Z_D' - log Z_D|,

with ``E`` the energy and ``Z`` the normaliser (a mechanism whose ``log_density`` is
exact up to a data-independent constant says so by ``density_normalised = True``; its
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
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from .pairs import AdjacentPair, audit_view, candidate_pairs

__all__ = ["AuditResult", "exact_audit", "exact_audit_applies", "knorm_audit", "parameter_box", "statistic_audit"]


@dataclass
class AuditResult:
    """Outcome of one audit.

    ``bound`` is the privacy loss found: exact (``kind`` "exact" / "knorm") or a
    lower confidence bound (``kind`` "black-box"); ``passed`` is ``bound <= epsilon +
    tolerance`` (the declared ε, or its share for "knorm").  ``details`` holds per-kind
    extras (numerical error, the run ε, per-field bounds of a side-channel audit...).
    """

    kind: str
    mechanism: str
    epsilon: float
    bound: float
    tolerance: float
    pair: AdjacentPair | None
    passed: bool
    details: dict = field(default_factory=dict)

    def summary(self) -> str:
        """Lines for people: the loss found, the limit, the pair and the verdict."""
        run = self.details.get("run_epsilon", self.epsilon)
        ran = "" if run == self.epsilon else f" run at epsilon={run:g}"
        what = "privacy loss" if self.kind in ("exact", "knorm") else "privacy loss lower bound"
        limit = f"declared epsilon {self.epsilon:g}"
        if self.details.get("delta"):
            limit += f" at delta {self.details['delta']:g}"
        if self.kind == "knorm":
            dt = self.details
            limit += (f" (noise {dt['noise_max']:.4f} of {dt['noise_limit']:g}, "
                      f"Jacobian {dt['jacobian_max']:.4f} of {dt['jacobian_limit']:g})")
        lines = [
            f"{self.kind} audit of {self.mechanism}{ran}",
            f"  {what} {self.bound:.4f} vs {limit} (tolerance {self.tolerance:.2g}): "
            f"{'PASS' if self.passed else 'FLAGGED'}",
        ]
        if self.pair is not None:
            lines.append(f"  pair: {self.pair}")
        for name, (b, flag) in self.details.get("fields", {}).items():
            verdict = "DATA-DEPENDENT (not private)" if flag else "no evidence of data dependence"
            lines.append(f"  field {name}: lower bound {b:.3f} -> {verdict}")
        return "\n".join(lines)


def parameter_box(mechanism, problem):
    """``(lo, hi)`` of a box holding ``Theta``, or None when there is none (``Theta = R^d``).

    The mechanism's ``parameter_box(d)``, else the problem's ``parameter_box()`` (where
    ``Theta`` is part of the declared domain).
    """
    if hasattr(mechanism, "parameter_box"):
        return mechanism.parameter_box(problem.d)
    return problem.parameter_box() if hasattr(problem, "parameter_box") else None


def exact_audit_applies(mechanism, problem) -> bool:
    """Whether :func:`exact_audit` can compute the law: ``log_density``, d <= 2, a bounded ``Theta``."""
    return hasattr(mechanism, "log_density") and problem.d <= 2 and parameter_box(mechanism, problem) is not None


def _grid(mechanism, problem, points: int) -> tuple[np.ndarray, np.ndarray]:
    """Grids of ``points`` and about ``points / 2`` per axis over :func:`parameter_box`."""
    d = problem.d
    lo, hi = parameter_box(mechanism, problem)
    axes = [np.linspace(lo[i], hi[i], points) for i in range(d)]
    mesh = np.stack(np.meshgrid(*axes, indexing="ij"), -1)
    return mesh, mesh[(slice(None, None, 2),) * d]


def _normalised(mechanism, data, epsilon, theta):
    ld = mechanism.log_density(data, epsilon, theta).ravel()
    if getattr(mechanism, "density_normalised", False):
        return ld
    return ld - np.logaddexp.reduce(ld)


def _pair_loss(mechanism, problem, pair, epsilon, fine, coarse):
    D, D2 = (problem.audit_data(r) for r in pair.datasets())
    l1, l2 = _normalised(mechanism, D, epsilon, fine), _normalised(mechanism, D2, epsilon, fine)
    inside = np.isfinite(l1)
    if np.any(inside != np.isfinite(l2)):
        return np.inf, 0.0  # different supports: unbounded loss
    loss = float(np.max(np.abs(l1[inside] - l2[inside])))
    if coarse is None or getattr(mechanism, "density_normalised", False):
        return loss, 0.0
    # log Z_D - log Z_D' at spacing h and 2h (cell volumes cancel in the difference)
    e1, e2 = (mechanism.log_density(x, epsilon, fine).ravel() for x in (D, D2))
    c1, c2 = (mechanism.log_density(x, epsilon, coarse).ravel() for x in (D, D2))
    dz_h = np.logaddexp.reduce(e1) - np.logaddexp.reduce(e2)
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
    mechanism : object with ``log_density(data, epsilon, theta)`` and ``parameter_box(d)``.
    problem : object with ``d``, ``audit_records()`` and ``audit_data(records)``.
    epsilon : declared ε; ``run_epsilon`` (default ε) is the one the density uses —
        a negative control runs at ``2 epsilon``.
    pairs : pairs to check; default ``candidates`` random candidate pairs, of which the
        ``keep`` best on a coarse grid are re-evaluated on the fine grid.
    points : grid points per axis (default 20001 in 1-D, 801 in 2-D).
    progress : optional callable ``progress(k)`` called after each pair is scored.
    """
    d = problem.d
    problem = audit_view(mechanism, problem)
    if not exact_audit_applies(mechanism, problem):
        raise ValueError("exact audits need a mechanism with log_density on a bounded Theta and a problem with d = 1 or 2")
    run = float(epsilon if run_epsilon is None else run_epsilon)
    points = points or (20001 if d == 1 else 801)
    fine, coarse = _grid(mechanism, problem, points)
    if pairs is None:
        pairs = candidate_pairs(problem, np.random.default_rng(seed), candidates, min_size=d)
        search, _ = _grid(mechanism, problem, 81 if d == 2 else 2001)
        scores = []
        for p in pairs:
            scores.append(_pair_loss(mechanism, problem, p, run, search, None)[0])
            if progress:
                progress(1)
        pairs = [pairs[i] for i in np.argsort(scores)[::-1][:keep]]
    best = (-np.inf, 0.0, None)
    for p in pairs:
        loss, err = _pair_loss(mechanism, problem, p, run, fine, coarse)
        if loss > best[0]:
            best = (loss, err, p)
    loss, err, pair = best
    tol = 2.0 * err
    return AuditResult(
        "exact", repr(mechanism), float(epsilon), loss, tol, pair, bool(loss <= epsilon + tol),
        {"run_epsilon": run, "numerical_error": err, "grid_points": points},
    )


def knorm_audit(mechanism, problem, epsilon: float, *, run_epsilon: float | None = None,
                max_records: int = 64, max_rests: int = 3, seed: int = 0) -> AuditResult:
    """Closed-form privacy loss of K-norm noise added to the loss gradient (objective
    perturbation), interior releases.

    ``mechanism.noise_law(d, epsilon) -> (norm, scale, share)`` and
    ``mechanism.log_jacobian(data, epsilon)`` (log det of the map from the release to the
    noise); ``problem`` supplies ``gradient(data, theta)`` besides the audit records.  For a
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
    problem = audit_view(mechanism, problem)
    run = float(epsilon if run_epsilon is None else run_epsilon)
    norm, scale, share = mechanism.noise_law(d, run)
    order = {"l1": 1, "l2": 2, "linf": np.inf}[norm]
    boundary, fill = problem.audit_records()
    records = np.unique(np.vstack([boundary, fill]), axis=0)
    if len(records) > max_records:
        records = records[np.random.default_rng(seed).choice(len(records), max_records, replace=False)]
    B = mechanism.bound
    vertices = np.vstack([B * np.eye(d), -B * np.eye(d)])
    best, parts, where = -np.inf, (0.0, 0.0), None
    noise_max = jac_max = 0.0
    for filler in fill[np.argsort(np.linalg.norm(fill, axis=1), kind="stable")[:max_rests]]:
        rest = np.tile(filler, (max(d, 2) - 1, 1))
        for r, r2 in itertools.combinations(records, 2):
            pair = AdjacentPair(rest, r, r2)
            D, D2 = (problem.audit_data(x) for x in pair.datasets())
            diff = np.array([problem.gradient(D, t) - problem.gradient(D2, t) for t in vertices])
            noise = float(np.max(np.linalg.norm(diff, ord=order, axis=1)) / scale)
            jac = abs(mechanism.log_jacobian(D, run) - mechanism.log_jacobian(D2, run))
            noise_max, jac_max = max(noise_max, noise), max(jac_max, jac)
            if noise + jac > best:
                best, parts, where = noise + jac, (noise, jac), pair
    tol = 1e-9 * epsilon
    return AuditResult(
        "knorm", repr(mechanism), float(epsilon), best, tol, where, bool(best <= epsilon + tol),
        {"run_epsilon": run, "noise": parts[0], "jacobian": parts[1], "noise_max": noise_max,
         "jacobian_max": jac_max, "noise_limit": share * epsilon, "jacobian_limit": (1 - share) * epsilon},
    )


def statistic_audit(mechanism, problem, epsilon: float, *, run_epsilon: float | None = None,
                    pairs: list[AdjacentPair] | None = None, max_records: int = 64, seed: int = 0) -> AuditResult:
    """Closed-form privacy loss of K-norm noise added to a released statistic ``T``.

    ``mechanism.statistic(data)`` is ``T`` (noisy sufficient statistics; the computed
    minimiser of output perturbation) and ``mechanism.statistic_noise(data, epsilon) ->
    (norm, scale)`` the law of ``V`` in ``T + V`` (density ∝ ``exp(-norm(v) / scale)``;
    ``scale`` may depend on the public ``n``); the estimate is post-processing of
    ``T + V``.  The log density ratio at ``t`` is ``(norm(t - T') - norm(t - T)) / scale
    <= norm(T - T') / scale`` with equality far along ``T - T'``, so the loss of a pair is
    exactly ``norm(T(D) - T(D')) / scale``.  Pairs: every ordered two records of the
    (restricted) domain's boundary and fill records (``max_records`` drawn when there
    are more), the rest ``d`` or 64 copies of one fill record (many copies of one record
    pull a minimiser far along it, where the changed record's loss has no curvature left
    and moves it most; for a sum over records the rest does not matter).  ``pairs``
    replaces that enumeration.  Passes when the largest loss is at most ε.
    """
    d = problem.d
    problem = audit_view(mechanism, problem)
    run = float(epsilon if run_epsilon is None else run_epsilon)
    if pairs is None:
        boundary, fill = problem.audit_records()
        records = np.unique(np.vstack([boundary, fill]), axis=0)
        if len(records) > max_records:
            records = records[np.random.default_rng(seed).choice(len(records), max_records, replace=False)]
        pairs = [AdjacentPair(np.tile(f, (k, 1)), r, r2)
                 for f in fill for k in (max(d, 2), 64) for r, r2 in itertools.permutations(records, 2)]
    best, where = -np.inf, None
    for pair in pairs:
        D, D2 = (problem.audit_data(x) for x in pair.datasets())
        norm, scale = mechanism.statistic_noise(D, run)
        loss = float(norm(mechanism.statistic(D) - mechanism.statistic(D2))) / scale
        if loss > best:
            best, where = loss, pair
    tol = 1e-9 * epsilon
    return AuditResult("exact", repr(mechanism), float(epsilon), best, tol, where, bool(best <= epsilon + tol),
                       {"run_epsilon": run})
