r"""Private Bayesian inference (Sarwate's survey §7.2.2): the Beta–Bernoulli model, its release, its errors.

Model
-----
Records ``x_1, ..., x_n`` in ``{0, 1}``, i.i.d. Bernoulli(``theta``), with the conjugate prior
``theta ~ Beta(a, b)`` (public options).  The sufficient statistic is the count of ones
``s = sum_i x_i``; the exact posterior is ``Beta(a + s, b + n - s)``.  ``n`` is public.

Data protocol (:class:`BetaBernoulliProblem`)
---------------------------------------------
``theta`` is fixed (option ``theta``, the study's ``theta_star``): the studies measure the
frequentist behaviour of Bayesian summaries at a true parameter.  A data set is kept as
its sufficient statistic (:class:`BernoulliData`): ``s ~ Binomial(n, theta)`` is drawn
directly, which has the law of the count of ``n`` simulated records (so ``n = 10^7`` costs
nothing).  A user's own records go through :func:`bernoulli_data`, which checks that every
record is 0 or 1.

Release (declared by the problem, as PCA declares its basis)
------------------------------------------------------------
A **posterior summary**, stored as the problem's ``d`` coefficients:

* ``summary = "interval"`` (default): ``d = 3``, ``(mean, lower, upper)``: the posterior mean
  and the equal-tailed credible interval at ``level`` (default 0.9: the 5% and 95%
  posterior quantiles).  A mechanism whose release has no interval (one posterior sample)
  stores NaN for ``lower`` and ``upper``.
* ``summary = "point"``: ``d = 1``, the point estimate alone (the posterior mean; the
  sample for one-posterior-sample).  The audits use this view (``audit_defaults``): a
  1-D release is what the exact density audit grids.

``theta_star`` is ``theta`` repeated ``d`` times (every entry is read against the one true
parameter); entries are summaries, not coefficients, so the report's per-coefficient bias
tables are dropped for the interval (``coefficient_summaries``).

Error measures (lower is better, like every stored ``error``)
-------------------------------------------------------------
* ``"abs"`` (default): ``|mean - theta|``, the point estimate's error;
* ``"miss"``: 1 when ``theta`` lies outside ``[lower, upper]``, else 0 (NaN when the release
  has no interval).  Its mean over replicates is ``1 - coverage``: a calibrated 90%
  interval misses 10% of the time (the report's reference line);
* ``"width"``: ``upper - lower``.

:meth:`BetaBernoulliProblem.error_measures` gives all three (and ``covered = 1 - miss``).
The sensitivities (replace-one adjacency, ``n`` public) are derived where they are used:
:mod:`kngflow.models.bayes.mechanisms`.
"""

from __future__ import annotations

from numbers import Real
from typing import NamedTuple

import numpy as np

from kngflow.problems.base import check_finite_positive
from kngflow.problems.summary import ERROR_MEASURES, SUMMARIES, PosteriorSummary, check_level, check_summary

__all__ = ["BernoulliData", "BetaBernoulliProblem", "bernoulli_data", "check_bernoulli_data", "ERROR_MEASURES",
           "SUMMARIES"]


class BernoulliData(NamedTuple):
    """A data set of ``n`` records in ``{0, 1}`` as its sufficient statistic ``s`` (the count of
    ones), with the public facts every mechanism needs: the prior ``Beta(a, b)``, the
    credible ``level`` and whether the release carries the interval (``interval``)."""

    s: int
    n: int
    a: float = 1.0
    b: float = 1.0
    level: float = 0.9
    interval: bool = True

    @property
    def d(self) -> int:
        """Coefficients of a release: 3 with the interval, 1 without."""
        return 3 if self.interval else 1


def check_bernoulli_data(data) -> BernoulliData:
    """Validate :class:`BernoulliData`: integers ``0 <= s <= n``, ``n >= 1``, a prior with
    ``a, b > 0`` and a level in (0, 1)."""
    if not isinstance(data, BernoulliData):
        raise TypeError(f"data must be a kngflow.models.bayes.problem.BernoulliData, got {type(data).__name__}")
    for name in ("s", "n"):
        v = getattr(data, name)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"data.{name} must be an integer, got {v!r}")
    if data.n < 1 or not 0 <= data.s <= data.n:
        raise ValueError(f"data.s must be an integer in [0, n] and data.n >= 1, got s={data.s!r}, n={data.n!r}")
    check_finite_positive("data.a", data.a)
    check_finite_positive("data.b", data.b)
    check_level(data.level)
    return data


def bernoulli_data(x, a: float = 1.0, b: float = 1.0, level: float = 0.9, interval: bool = True) -> BernoulliData:
    """A user's records ``x`` (1-D, each 0 or 1; a column ``(n, 1)`` is accepted) as mechanism input.

    A record that is not 0 or 1 is a ValueError naming ``x`` (never rounded silently).
    ``a``, ``b``: the public prior ``Beta(a, b)``; ``level``: the credible level of the interval.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 2 and x.shape[1] == 1:
        x = x[:, 0]
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"x must be a non-empty 1-D array of records in {{0, 1}}, got shape {x.shape}")
    if not np.all((x == 0.0) | (x == 1.0)):
        raise ValueError("x: every record must be 0 or 1")
    a, b = check_finite_positive("a", a), check_finite_positive("b", b)
    return BernoulliData(int(x.sum()), int(x.size), a, b, check_level(level), bool(interval))


class BetaBernoulliProblem(PosteriorSummary):
    """Bernoulli(``theta``) records with a Beta(``a``, ``b``) prior; a posterior summary released.

    Parameters
    ----------
    theta : float in (0, 1), the true parameter (default 0.3).
    a, b : float > 0, the public prior Beta(a, b) (default 1, 1: uniform).
    level : float in (0, 1), the credible level of the equal-tailed interval (default 0.9).
    summary : "interval" (release ``(mean, lower, upper)``, ``d = 3``) or "point" (``d = 1``).
    error_measure : "abs" (``|mean - theta|``), "miss" (``theta`` outside the interval) or
        "width" (the interval's width), the value stored as ``error``; "miss" and "width"
        need ``summary = "interval"``.
    """

    #: the audits see a 1-D release (the point estimate), which the exact density audit grids
    audit_defaults = {"summary": "point"}

    def __init__(self, *, theta: float = 0.3, a: float = 1.0, b: float = 1.0, level: float = 0.9,
                 summary: str = "interval", error_measure: str = "abs"):
        if isinstance(theta, bool) or not isinstance(theta, Real) or not 0.0 < theta < 1.0:
            raise ValueError(f"theta must be a number in (0, 1), got {theta!r}")
        a, b = check_finite_positive("a", a), check_finite_positive("b", b)
        level = check_level(level)
        summary, error_measure = check_summary(summary, error_measure)
        self.theta, self.a, self.b, self.level = float(theta), a, b, level
        self.summary, self.error_measure = summary, error_measure

    def __repr__(self) -> str:
        return (f"BetaBernoulliProblem(theta={self.theta:g}, a={self.a:g}, b={self.b:g}, level={self.level:g}, "
                f"summary={self.summary!r}, error_measure={self.error_measure!r})")

    # -- the contract ---------------------------------------------------------------------
    @property
    def truth(self) -> float:
        return self.theta

    @property
    def caveats(self) -> str:
        what = (f"(posterior mean, lower, upper) of the {self.level:g} equal-tailed credible interval"
                if self.interval else "the point estimate (posterior mean, or one posterior sample)")
        return (f"records in {{0, 1}}, i.i.d. Bernoulli(theta = {self.theta:g}), prior Beta({self.a:g}, {self.b:g}); "
                f"data kept as the count of ones (drawn as Binomial(n, theta)); the estimate is {what}; "
                f"error = {self.error_measure}.")

    @property
    def error_label(self) -> str:
        if self.error_measure == "miss":
            return f"miss rate of the {self.level:g} credible interval (1 − coverage)"
        if self.error_measure == "width":
            return f"width of the {self.level:g} credible interval"
        return "|point estimate − θ| (posterior mean, or the posterior sample)"

    @property
    def reference_lines(self) -> list:
        """``miss``: the nominal ``1 - level``; ``abs``: the prior mean's error; ``width``: the
        prior's interval width (the data-free releases)."""
        if self.error_measure == "miss":
            return [(round(1.0 - self.level, 12), f"nominal miss rate 1 − {self.level:g}")]
        from scipy.stats import beta

        if self.error_measure == "width":
            lo, hi = beta.ppf([(1 - self.level) / 2, (1 + self.level) / 2], self.a, self.b)
            return [(float(hi - lo), "the prior's interval")]
        return [(abs(self.a / (self.a + self.b) - self.theta), "prior mean")]

    def simulate(self, n: int, rng: np.random.Generator) -> BernoulliData:
        """The count of ones of ``n`` Bernoulli(``theta``) records, drawn as Binomial(``n``, ``theta``)."""
        self.check_n(n)
        return BernoulliData(int(rng.binomial(n, self.theta)), int(n), self.a, self.b, self.level, self.interval)

    def data_bytes(self, n: int) -> int:
        return 1 << 16

    # -- audits ---------------------------------------------------------------------------
    def audit_records(self) -> tuple[np.ndarray, np.ndarray]:
        """``(boundary, fill)``: the two records 0 and 1, as rows ``(2, 1)``; replacing one by the
        other moves the count by 1, the most one record can."""
        r = np.array([[0.0], [1.0]])
        return r, r.copy()

    def audit_data(self, records: np.ndarray) -> BernoulliData:
        """Mechanism input for a data set given as records ``(m, 1)`` in ``{0, 1}``."""
        return bernoulli_data(records, self.a, self.b, self.level, self.interval)

    def parameter_box(self) -> tuple[np.ndarray, np.ndarray]:
        """``[0, 1]^d``: every summary of a posterior on ``theta`` lies there."""
        return np.zeros(self.d), np.ones(self.d)
