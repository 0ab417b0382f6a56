"""What every estimator of :mod:`kngflow.estimators` shares: building the registered mechanism,
the declared record domain, the random generator, the privacy budget and one release."""

from __future__ import annotations

import math
import warnings
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator

from kngflow import api, registry
from kngflow.accountant import BudgetAccountant, claim_event
from kngflow.mechanisms.base import check_epsilon
from kngflow.problems.domains import RecordDomain, record_domain
from kngflow.warnings import PrivacyLeakWarning

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:  # pragma: no cover - scikit-learn < 1.6
    def _validate_data(estimator, X="no_validation", y="no_validation", reset=True, **kw):
        return estimator._validate_data(X, y, reset=reset, **kw)

__all__ = ["DPEstimator", "validate_data", "generator", "check_domain", "add_intercept", "INTERCEPT_SHRINK"]

validate_data = _validate_data

#: the factor ``s`` by which :func:`add_intercept` divides a row ``[x, r]`` so that it stays in
#: the ball ``{||.||_D <= r}`` of ``x``: ``||[x, r]||_D <= s r`` when ``||x||_D <= r`` (ℓ∞: 1,
#: ℓ2: ``sqrt(2)``, ℓ1: 2)
INTERCEPT_SHRINK = {"linf": 1.0, "l2": math.sqrt(2.0), "l1": 2.0}


def generator(random_state) -> np.random.Generator:
    """The generator a fit draws from: ``None`` fresh OS entropy; an int seeds
    ``numpy.random.default_rng``; a ``Generator`` is used as is; a ``RandomState`` seeds a new
    generator from four of its draws (scikit-learn's ``random_state`` convention)."""
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**32, size=4, dtype=np.uint64))
    if isinstance(random_state, Integral) and not isinstance(random_state, bool) and random_state >= 0:
        return np.random.default_rng(int(random_state))
    raise ValueError(f"random_state must be None, an int >= 0, a numpy Generator or RandomState, got {random_state!r}")


def check_domain(X: np.ndarray, data_norm, radius, name: str = "X") -> RecordDomain:
    """The declared ball ``{||x||_data_norm <= radius}`` after checking that every row of ``X``
    lies in it: one-line ValueError naming ``name``, the domain and the largest row norm
    otherwise (never a clip).  ValueError naming ``data_norm`` or ``radius`` when invalid."""
    domain = record_domain(data_norm, radius)
    domain.require(np.ascontiguousarray(X, dtype=np.float64), name)
    return domain


def add_intercept(X: np.ndarray, domain: RecordDomain) -> tuple[np.ndarray, float]:
    """``([x, r] / s, s)``: rows with a constant column ``r`` (the radius) appended, divided by
    ``s`` = :data:`INTERCEPT_SHRINK` so that they lie in the same declared ball as ``x``.  A
    model fitted on them with coefficients ``(b, b_0)`` has ``x'b / s + r b_0 / s``: slope
    ``b / s`` and intercept ``r b_0 / s`` in the user's units."""
    s = INTERCEPT_SHRINK[domain.data_norm]
    n, d = X.shape
    out = np.empty((n, d + 1))
    out[:, :d] = X
    out[:, d] = domain.radius
    if s != 1.0:
        out /= s
    return out, s


class DPEstimator(BaseEstimator):
    """Base of the estimators: the parameters every one takes and one private release.

    Subclasses set ``_problem`` (the registered problem) and call :meth:`_release` from ``fit``
    with the problem's data (built by the model's data helper).
    """

    _problem: ClassVar[str] = ""

    def _check_params(self) -> float:
        epsilon = check_epsilon(self.epsilon)
        if self.options is not None and not isinstance(self.options, dict):
            raise ValueError(f"options must be a dict of mechanism options or None, got {self.options!r}")
        if self.hardened is not None and not isinstance(self.hardened, (bool, np.bool_)):
            raise ValueError(f"hardened must be None (default: hardened where the mechanism can be), True or False, "
                             f"got {self.hardened!r}")
        if self.accountant is not None and not callable(getattr(self.accountant, "spend", None)):
            raise ValueError("accountant must be None or have a spend(epsilon, delta) method "
                             f"(kngflow.accountant.BudgetAccountant), got {self.accountant!r}")
        return epsilon

    #: per kind, options the estimator sets unless ``options`` says otherwise (studies keep
    #: the mechanisms' own defaults, the papers' rules)
    _mechanism_defaults: dict = {}

    def _mechanism(self, n: int, *, C=None):
        """The registered mechanism ``self.mechanism`` of ``self._problem``, built by
        :func:`kngflow.api.get_mechanism` with ``options``, ``hardened`` and ``reg = 1 / (C n)``."""
        cls = registry.mechanism_class(self._problem, self.mechanism)  # ValueError naming the allowed kinds
        options = {**self._mechanism_defaults.get(self.mechanism, {}), **(self.options or {})}
        if "hardened" in options:
            raise ValueError("hardened is a parameter of the estimator: pass hardened=..., not options={'hardened': ...}")
        if C is not None:
            if isinstance(C, bool) or not isinstance(C, Real) or not (math.isfinite(C) and C > 0):
                raise ValueError(f"C must be a finite number > 0 or None, got {C!r}")
            if "reg" not in cls.option_names():
                raise ValueError(f"C: mechanism {self.mechanism!r} of {self._problem!r} has no regularisation "
                                 f"(option 'reg'); leave C=None (mechanisms with 'reg': "
                                 f"{_kinds_with(self._problem, 'reg')})")
            if "reg" in options:
                raise ValueError("give either C or options={'reg': ...}, not both (reg = 1 / (C n))")
            options["reg"] = 1.0 / (float(C) * n)
        if self.hardened is not None:
            options["hardened"] = bool(self.hardened)
        return api.get_mechanism(self._problem, self.mechanism, **options)

    def _release(self, mechanism, data, epsilon: float) -> np.ndarray:
        """Spend ``(epsilon, claim's delta)`` from the accountant, then release; sets
        ``hardened_`` and ``privacy_guarantee_`` only after the release.  Nothing is released
        or recorded when the accountant refuses.

        A :class:`~kngflow.accountant.BudgetAccountant` is also given the release's
        dp_accounting event (:func:`~kngflow.accountant.claim_event`: Gaussian releases, so
        that they compose tightly; None for a hardened release, whose snapped law is not
        Gaussian, and for claims that map to no event); any other accountant gets
        ``spend(epsilon, delta)``."""
        if not mechanism.private:
            if self.accountant is not None:
                raise ValueError(f"mechanism {self.mechanism!r} is not private: it cannot spend from a privacy budget "
                                 "(accountant must be None)")
            warnings.warn(PrivacyLeakWarning(f"mechanism {self.mechanism!r} is the non-private estimator: the fitted "
                                             "model is not differentially private"), stacklevel=3)
        rng = generator(self.random_state)
        delta = float(mechanism.privacy_claim().delta) if mechanism.private else math.inf
        if isinstance(self.accountant, BudgetAccountant):
            event = None if mechanism.hardened else claim_event(mechanism.privacy_claim(), data, epsilon,
                                                                 n=_records(mechanism, data))
            self.accountant.spend(epsilon, delta, event=event)
        elif self.accountant is not None:
            self.accountant.spend(epsilon, delta)
        estimate = np.asarray(mechanism.release(data, epsilon, rng).estimate, dtype=np.float64)
        self.hardened_ = bool(mechanism.hardened)
        if not mechanism.private:
            self.privacy_guarantee_ = (math.inf, 1.0)
        elif mechanism.hardened:
            self.privacy_guarantee_ = tuple(float(v) for v in mechanism.hardened_guarantee(data, epsilon))
        else:
            self.privacy_guarantee_ = (epsilon, delta)
        return estimate


def _records(mechanism, data) -> int | None:
    """The number of records of ``data`` where the mechanism declares it (a ``size(data) ->
    (n, d)`` hook, as the ERM mechanisms have: their claims' ``steps(n)`` depend on it), else None."""
    size = getattr(mechanism, "size", None)
    return int(size(data)[0]) if callable(size) else None


def _kinds_with(problem: str, option: str) -> list[str]:
    return [k for k in registry.kind_names(problem) if option in registry.mechanism_class(problem, k).option_names()]
