"""Principal components (Sarwate's survey §7.2.3; Chaudhuri, Sarwate & Sinha 2013): data, release, errors.

Model
-----
Records ``x_1, ..., x_n`` in ``R^d`` lie in the public unit ball ``||x_i||_2 <= 1`` (a
user's data is rescaled by a public bound first: :func:`rescale`).  The statistic every
mechanism starts from is the second-moment matrix

    A = X^T X / n = (1/n) sum_i x_i x_i^T,

symmetric positive semi-definite with ``tr A <= 1``.  The estimand is the top-``k``
eigenspace of ``A`` (of the population second moment ``Sigma = E x x^T`` for the error).

Release
-------
A ``k``-dimensional subspace, released as an orthonormal ``d x k`` basis ``V`` in the
canonical form of :func:`canonical_basis` (a function of the subspace alone, so it is
post-processing of any mechanism's output and costs no privacy), stored row-major: the
problem's ``d`` coefficients are the ``d * k`` entries ``V[i, j]`` at ``coef = i * k + j``
(:meth:`PCAProblem.basis`).  Only subspace-invariant functions of it are meaningful:

* the projection distance ``||V V^T - U U^T||_F`` to the population subspace ``U``
  (:func:`projection_distance`, the problem's ``error`` by default);
* the captured-energy ratio ``q = tr(V^T A V) / tr(V_k^T A V_k)`` of Chaudhuri, Sarwate
  & Sinha (CSS 2013), with ``V_k`` the top-``k`` eigenvectors of ``A`` (:func:`captured_energy`);
  on the sample ``A`` it needs the data, so the problem's ``error`` offers its population
  version as a loss, ``1 - tr(V^T Sigma V) / tr(U^T Sigma U)`` (``error_measure =
  "energy_loss"``: lower is better, like every stored ``error``; ``q >= 0.9`` is a loss
  ``<= 0.1``), and :meth:`PCAProblem.error_measures` gives all of them given the data.

Both are invariant to the basis's signs and to any rotation ``V -> V O`` within the subspace.

Sensitivities (replace-one adjacency, ``||x||_2, ||x'||_2 <= 1``)
-----------------------------------------------------------------
Replacing ``x`` by ``x'`` changes ``A`` by ``M / n`` with ``M = x x^T - x' x'^T``.

* Frobenius: ``||M||_F^2 = ||x||^4 + ||x'||^4 - 2 (x^T x')^2 <= 2``, so
  ``||A - A'||_F <= sqrt(2) / n`` (not ``2 / n``: the two rank-one terms cannot both have
  norm 1 and be aligned), with equality for orthogonal unit ``x, x'``.
* The upper triangle with the diagonal, as a vector (what i.i.d. noise is added to):
  ``sum_{a <= b} M_ab^2 = (||M||_F^2 + sum_a M_aa^2) / 2`` and
  ``sum_a M_aa^2 = sum_a (x_a^2 - x'_a^2)^2 <= sum_a (x_a^4 + x'_a^4) <= 2``, so its ℓ2
  sensitivity is also ``sqrt(2) / n`` (:func:`upper_sensitivity`), reached at ``x = e_1``,
  ``x' = e_2``.
* One entry: ``|x_a^2 - x'_a^2| <= 1`` and ``|x_a x_b - x'_a x'_b| <= 1/2 + 1/2`` (``a != b``,
  ``|x_a x_b| <= (x_a^2 + x_b^2) / 2 <= 1/2``): sensitivity ``1 / n`` per entry.
* The exponential mechanism's score ``u(D, V) = n tr(V^T A V) = sum_i ||V^T x_i||^2``:
  one record contributes ``||V^T x||^2`` in ``[0, ||x||^2] subset [0, 1]``, so
  ``|u(D, V) - u(D', V)| <= 1`` for every ``V``: sensitivity 1 (not 2: both terms are
  non-negative).
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

from kngflow.problems.base import SimulatedProblem, check_dimension
from kngflow.problems.declared import STACKED_COEFFICIENTS
from kngflow.problems.records import to_unit_ball

__all__ = [
    "PCAData",
    "PCAProblem",
    "pca_data",
    "rescale",
    "second_moment",
    "canonical_basis",
    "top_eigenvectors",
    "projection_distance",
    "captured_energy",
    "upper_triangle",
    "upper_sensitivity",
    "ERROR_MEASURES",
    "DigitsPCAProblem",
    "digits_moment",
    "load_digits_records",
]

#: rows simulated at a time (bounds the memory of one data set at ``CHUNK * d`` floats)
CHUNK = 1 << 16
#: the error measures the problem declares (``error_measure`` picks the one stored as ``error``)
ERROR_MEASURES = ("projection", "energy_loss")


class PCAData(NamedTuple):
    """The sufficient statistic of a data set in the unit ball: ``A = X^T X / n``, ``n``, and the
    public target dimension ``k`` of the subspace to release."""

    A: np.ndarray
    n: int
    k: int

    @property
    def d(self) -> int:
        return int(self.A.shape[0])


def rescale(x, bound) -> np.ndarray:
    """``x / bound``: records with the public bound ``||x_i||_2 <= bound`` moved into the unit ball.

    ``bound`` must be public (chosen without looking at the data: a known range of the
    measurements).  Raises ValueError naming ``x`` when a record exceeds it, rather than
    clipping silently.
    """
    return to_unit_ball(x, bound)


def second_moment(x: np.ndarray) -> np.ndarray:
    """``X^T X / n`` of rows ``x`` (n, d), symmetrised exactly."""
    A = x.T @ x / x.shape[0]
    return (A + A.T) / 2.0


def pca_data(x, k: int = 1, bound: float = 1.0) -> PCAData:
    """A user's records ``x`` (n, d) with public bound ``||x_i||_2 <= bound`` as mechanism input.

    The records are rescaled by ``bound`` (:func:`rescale`); every release is then a
    subspace of the rescaled data, which is the subspace of the original records.
    """
    x = rescale(x, bound)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= x.shape[1]:
        raise ValueError(f"k must be an integer in [1, d = {x.shape[1]}], got {k!r}")
    return PCAData(second_moment(x), int(x.shape[0]), int(k))


def canonical_basis(V: np.ndarray, tol: float = 1e-9) -> np.ndarray:
    """The canonical orthonormal basis of ``span(V)`` (``V`` a ``d x k`` orthonormal basis).

    Gram–Schmidt on the columns ``P e_1, P e_2, ...`` of the projection ``P = V V^T``, keeping
    each column whose residual exceeds ``tol``, until ``k`` are kept.  ``P`` depends on the
    subspace only, so the result does too: a deterministic, data-independent function of
    the released subspace (post-processing).  For ``k = 1`` it is ``v`` with the sign that
    makes its first non-zero coordinate positive.  It has an echelon shape: when the first
    ``k`` columns of ``P`` are kept (always, for subspaces in general position), ``out[i, j] = 0``
    for ``i < j``, since column ``j`` is orthogonal to ``P e_i``, ``i < j``, and
    ``e_i^T r = (P e_i)^T r`` for ``r`` in the subspace.
    """
    V = np.asarray(V, dtype=np.float64)
    d, k = V.shape
    P = V @ V.T
    out = np.empty((d, k))
    m = 0
    for j in range(d):
        r = P[:, j].copy()
        for _ in range(2):  # twice is enough (Kahan–Parlett)
            r -= out[:, :m] @ (out[:, :m].T @ r)
        nr = float(np.linalg.norm(r))
        if nr > tol:
            out[:, m] = r / nr
            m += 1
            if m == k:
                break
    if m < k:
        raise ValueError(f"V must have {k} orthonormal columns; its span has dimension {m}")
    return out


def top_eigenvectors(A: np.ndarray, k: int) -> np.ndarray:
    """The eigenvectors of the ``k`` largest eigenvalues of symmetric ``A``, as columns (largest first)."""
    w, Q = np.linalg.eigh(A)
    return Q[:, ::-1][:, :k].copy()


def projection_distance(V: np.ndarray, U: np.ndarray) -> float:
    """``||V V^T - U U^T||_F`` for orthonormal ``V``, ``U`` (``d x k``): ``sqrt(2 (k - ||U^T V||_F^2))``."""
    k = V.shape[1]
    c = float(np.sum((U.T @ V) ** 2))
    return math.sqrt(max(2.0 * (k - c), 0.0))


def captured_energy(V: np.ndarray, A: np.ndarray) -> float:
    """``tr(V^T A V) / tr(V_k^T A V_k)``: CSS 2013's captured-energy ratio of ``V`` on ``A`` (at most 1)."""
    k = V.shape[1]
    top = float(np.sum(np.linalg.eigvalsh(A)[::-1][:k]))
    return float(np.trace(V.T @ A @ V)) / top


def upper_triangle(A: np.ndarray) -> np.ndarray:
    """The entries ``A[a, b]``, ``a <= b``, row by row (``d (d + 1) / 2`` numbers)."""
    i, j = np.triu_indices(A.shape[-1])
    return A[..., i, j]


def upper_sensitivity(n: int) -> float:
    """``sqrt(2) / n``: ℓ2 sensitivity of :func:`upper_triangle` of ``A`` (module docstring)."""
    return math.sqrt(2.0) / n


def _haar(d: int, rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


class _SubspaceDeclarations:
    """What the report says about a subspace release (the contract's ``error_label``,
    ``reference_lines`` and ``coefficient_summaries``); a subclass gives ``d_data``, ``k``,
    ``error_measure``, :meth:`_reference_moment` and :attr:`reference`.

    The data-free release is a uniformly random ``k``-subspace ``V`` (Haar): ``E V V^T = (k/d) I``,
    so ``E tr(V^T M V) = k tr(M) / d`` for any ``M`` and ``E ||V V^T - U U^T||_F^2 = 2k - 2k^2/d``.
    The energy loss's line is that exact mean, ``1 - k tr(M) / (d tr(U^T M U))``; the projection
    distance's is its root mean square ``sqrt(2k (1 - k/d))`` (an upper bound on its mean, by
    Jensen, and within a few per cent of it at the studies' ``d``)."""

    #: basis entries are defined up to sign and rotation: no per-coefficient summaries
    coefficient_summaries = False

    def _reference_moment(self) -> tuple[np.ndarray, np.ndarray]:
        """``(M, U)``: the second moment the energy is measured on and the reference basis."""
        raise NotImplementedError

    @property
    def error_label(self) -> str:
        if self.error_measure == "projection":
            to = "the population subspace" if self.reference == "truth" else self.reference
            return f"projection distance ‖VVᵀ − UUᵀ‖_F to {to}"
        return "energy loss 1 − q (q: captured-energy ratio tr(VᵀAV) / tr(UᵀAU))"

    @property
    def reference_lines(self) -> list:
        d, k = self.d_data, self.k
        if self.error_measure == "projection":
            return [(math.sqrt(2.0 * k * (1.0 - k / d)), "random subspace (RMS distance)")]
        M, U = self._reference_moment()
        return [(1.0 - k * float(np.trace(M)) / (d * float(np.trace(U.T @ M @ U))), "random subspace (mean)")]


class PCAProblem(_SubspaceDeclarations, SimulatedProblem):
    """A spiked second-moment model with records in the unit ball.

    ``x = Q (a * t)`` with ``t_j`` i.i.d. uniform on ``[-1, 1]`` and ``a_j^2 = s_j / sum(s)``,
    ``s = (spikes..., 1, ..., 1)``: every record has ``||x||_2^2 = sum_j a_j^2 t_j^2 <= 1``, and
    the population second moment is exactly ``Sigma = Q diag(a^2 / 3) Q^T`` (independent
    zero-mean coordinates), whose top-``k`` eigenspace ``U`` is spanned by the first ``k``
    columns of ``Q`` when the spikes exceed 1.

    Parameters
    ----------
    d : int >= 2, the dimension; k : int in [1, d - 1], the subspace dimension.
    spikes : k floats > 1, decreasing (default ``(k + 1, k, ..., 2)``): the top variances over the rest's.
    spike_shares : k floats, instead of ``spikes``: the top coordinates' shares ``a_j^2`` of the
        total, the rest sharing what is left equally; ``spikes = shares * (d - k) / (1 - sum(shares))``.
        Fixed shares keep the top eigenvalues (``share / 3``) and so the eigengap fixed as ``d``
        grows (``spike_shares = [0.5]`` with ``k = 1`` is ``spikes = [d - 1]``, CSS 2013's fixed-gap
        setting for sample complexity in ``d``; ``workflows/pca_dimension.toml``).
    basis : "random" (a Haar rotation ``Q`` drawn from the public ``basis_seed``) or "identity".
    error_measure : "projection" (``||V V^T - U U^T||_F``) or "energy_loss" (``1 - tr(V^T Sigma V) /
        tr(U^T Sigma U)``), the value stored as ``error``.
    """

    audit_defaults = {"d": 2, "k": 1}

    def __init__(self, *, d: int = 5, k: int = 1, spikes=None, basis: str = "random", basis_seed: int = 0,
                 error_measure: str = "projection", spike_shares=None):
        d = check_dimension(d)
        if d < 2:
            raise ValueError(f"d must be an integer >= 2, got {d!r}")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k < d:
            raise ValueError(f"k must be an integer in [1, d - 1 = {d - 1}], got {k!r}")
        k = int(k)
        if spike_shares is not None:
            if spikes is not None:
                raise ValueError("spike_shares: give spikes or spike_shares, not both")
            if not isinstance(spike_shares, (list, tuple)) or len(spike_shares) != k or not all(
                isinstance(s, (int, float)) and not isinstance(s, bool) and 0 < s < 1 for s in spike_shares
            ) or not sum(spike_shares) < 1:
                raise ValueError(f"spike_shares must be a list of k = {k} numbers in (0, 1) summing to less than 1, "
                                 f"got {spike_shares!r}")
            rest = (1.0 - float(sum(spike_shares))) / (d - k)
            spikes = tuple(float(s) / rest for s in spike_shares)
            if not all(s > 1 for s in spikes):
                raise ValueError(f"spike_shares {list(spike_shares)} leave a spike <= 1 at d = {d}: each share must "
                                 f"exceed {rest:.4g}, the share of every other coordinate")
        if spikes is None:
            spikes = tuple(float(k + 1 - j) for j in range(k))
        if not isinstance(spikes, (list, tuple)) or len(spikes) != k or not all(
            isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s) and s > 1 for s in spikes
        ):
            raise ValueError(f"spikes must be a list of k = {k} finite numbers > 1, got {spikes!r}")
        spikes = tuple(float(s) for s in spikes)
        if any(b > a for a, b in zip(spikes, spikes[1:])):
            raise ValueError(f"spikes must be non-increasing, got {list(spikes)}")
        if basis not in ("random", "identity"):
            raise ValueError(f"basis must be one of 'random', 'identity'; got {basis!r}")
        if isinstance(basis_seed, bool) or not isinstance(basis_seed, (int, np.integer)) or basis_seed < 0:
            raise ValueError(f"basis_seed must be an integer >= 0, got {basis_seed!r}")
        if error_measure not in ERROR_MEASURES:
            raise ValueError(f"error_measure must be one of {list(ERROR_MEASURES)}, got {error_measure!r}")
        self.d_data, self.k, self.spikes, self.basis = d, k, spikes, basis
        self.basis_seed, self.error_measure = int(basis_seed), error_measure
        Q = np.eye(d) if basis == "identity" else _haar(d, np.random.default_rng(self.basis_seed))
        s = np.array(spikes + (1.0,) * (d - k))
        self._Q, self._a = Q, np.sqrt(s / s.sum())
        self._U = canonical_basis(Q[:, :k])
        self._Sigma = (Q * (self._a**2 / 3.0)) @ Q.T

    def __repr__(self) -> str:
        return (f"PCAProblem(d={self.d_data}, k={self.k}, spikes={list(self.spikes)}, basis={self.basis!r}, "
                f"basis_seed={self.basis_seed}, error_measure={self.error_measure!r})")

    # -- the contract ---------------------------------------------------------------------
    #: the number of stored coefficients: the ``d * k`` entries of the basis
    d = STACKED_COEFFICIENTS

    @property
    def scales(self) -> np.ndarray:
        """``a``: the coordinate scales in the basis ``Q`` (``sum a^2 = 1``)."""
        return self._a.copy()

    @property
    def rotation(self) -> np.ndarray:
        """``Q``: the public orthogonal matrix whose columns are the population eigenvectors."""
        return self._Q.copy()

    @property
    def population_moment(self) -> np.ndarray:
        """``Sigma = E x x^T = Q diag(a^2 / 3) Q^T``."""
        return self._Sigma.copy()

    @property
    def population_basis(self) -> np.ndarray:
        """``U``: the canonical basis of the population top-``k`` eigenspace (``d x k``)."""
        return self._U.copy()

    @property
    def theta_star(self) -> np.ndarray:
        return self.population_basis.ravel()

    def _reference_moment(self) -> tuple[np.ndarray, np.ndarray]:
        return self._Sigma, self._U

    @property
    def caveats(self) -> str:
        return ("records in the unit ball ||x||_2 <= 1 (rescaled by a public bound); the estimate is an orthonormal "
                f"{self.d_data} x {self.k} basis of the released subspace, stored row-major in canonical form; only "
                "subspace-invariant functions of it (projection distance, captured energy) are meaningful.")

    def simulate(self, n: int, rng: np.random.Generator) -> PCAData:
        """``A = X^T X / n`` of ``n`` simulated records, accumulated over chunks of :data:`CHUNK` rows."""
        self.check_n(n)
        d = self.d_data
        QA = self._Q * self._a  # x = (Q diag(a)) t
        total = np.zeros((d, d))
        for start in range(0, n, CHUNK):
            t = rng.uniform(-1.0, 1.0, size=(min(CHUNK, n - start), d))
            x = t @ QA.T
            total += x.T @ x
        A = total / n
        return PCAData((A + A.T) / 2.0, int(n), self.k)

    def data_bytes(self, n: int) -> int:
        return 3 * CHUNK * self.d_data * 8

    def error(self, estimate) -> float:
        """The declared ``error_measure`` of a stored estimate (module docstring)."""
        V = self.as_basis(estimate)
        if self.error_measure == "projection":
            return projection_distance(V, self.population_basis)
        return 1.0 - captured_energy_population(V, self._Sigma, self._U)

    def error_measures(self, estimate, data: PCAData | None = None) -> dict:
        """Every error measure of ``estimate``: ``projection``, ``energy_population`` and, given the
        data set it was released from, CSS 2013's ``energy`` on the sample ``A``."""
        V = self.as_basis(estimate)
        out = {"projection": projection_distance(V, self.population_basis),
               "energy_population": captured_energy_population(V, self.population_moment, self.population_basis)}
        if data is not None:
            out["energy"] = captured_energy(V, data.A)
        return out

    def as_basis(self, estimate) -> np.ndarray:
        """The ``d x k`` basis stored row-major in ``estimate`` (``coef = i * k + j``)."""
        e = np.asarray(estimate, dtype=np.float64)
        if e.shape != (self.d,):
            raise ValueError(f"estimate must have shape ({self.d},) = d * k entries, got {e.shape}")
        return e.reshape(self.d_data, self.k)

    # -- audits ---------------------------------------------------------------------------
    def audit_records(self) -> tuple[np.ndarray, np.ndarray]:
        """``(boundary, fill)`` records of the unit ball, for the privacy audits.

        ``boundary``: ``±e_a`` and ``(e_a ± e_b) / sqrt(2)`` (``a < b``, at most the first four
        axes): orthogonal unit pairs reach the sensitivity ``sqrt(2) / n`` of ``A`` and the
        score's sensitivity 1.  ``fill``: the boundary records and 0.
        """
        d = self.d_data
        axes = np.vstack([np.eye(d), -np.eye(d)])
        diag = []
        for a, b in itertools.combinations(range(min(d, 4)), 2):
            for s in (1.0, -1.0):
                r = np.zeros(d)
                r[a], r[b] = 1.0, s
                diag.append(r / math.sqrt(2.0))
        boundary = np.vstack([axes] + ([np.array(diag)] if diag else []))
        return boundary, np.vstack([boundary, np.zeros((1, d))])

    def audit_data(self, records: np.ndarray) -> PCAData:
        """Mechanism input for a data set given as records ``(m, d)`` in the unit ball."""
        return pca_data(records, self.k, 1.0)

    def parameter_box(self) -> tuple[np.ndarray, np.ndarray]:
        """The box ``[-1, 1]^(d k)`` holding every orthonormal basis."""
        return np.full(self.d, -1.0), np.full(self.d, 1.0)


def captured_energy_population(V: np.ndarray, Sigma: np.ndarray, U: np.ndarray) -> float:
    """``tr(V^T Sigma V) / tr(U^T Sigma U)``: the captured energy on the population second moment."""
    return float(np.trace(V.T @ Sigma @ V) / np.trace(U.T @ Sigma @ U))


#: public bound on the digits' pixels (4 x 4 block counts of an 8 x 8 bitmap: 0 .. 16)
DIGITS_PIXEL_MAX = 16.0
#: rows and columns of scikit-learn's digits
DIGITS_SHAPE = (1797, 64)


def load_digits_records() -> np.ndarray:
    """scikit-learn's handwritten digits (1797 x 64, UCI optdigits test set) rescaled into the unit
    ball by the public bound ``16 sqrt(64) = 128`` on a row's norm (every pixel is a count in
    0 .. 16).  Needs the optional dependency scikit-learn (ImportError naming it otherwise); the
    problem itself reads the shipped statistic (:func:`digits_moment`) and does not."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the digits data set needs scikit-learn, an optional dependency of kngflow: "
                          "pip install scikit-learn") from exc
    x = np.asarray(load_digits().data, dtype=np.float64)
    return rescale(x, DIGITS_PIXEL_MAX * math.sqrt(x.shape[1]))


_DIGITS_CACHE: dict = {}


def digits_moment() -> np.ndarray:
    """``A = X'^T X' / 1797`` of the digits' rows rescaled by 128 (read-only), from the exact integer
    statistic shipped in :mod:`kngflow.models.pca.digits` (no scikit-learn needed); equal bit for
    bit to :func:`second_moment` of :func:`load_digits_records`."""
    from kngflow.models.pca import digits

    S = np.zeros(DIGITS_SHAPE[1:] * 2)
    i, j = np.triu_indices(DIGITS_SHAPE[1])
    S[i, j] = digits.UPPER
    S[j, i] = digits.UPPER
    A = S / (DIGITS_PIXEL_MAX * DIGITS_PIXEL_MAX * DIGITS_SHAPE[1]) / digits.N_ROWS
    A.flags.writeable = False
    return A


class DigitsPCAProblem(_SubspaceDeclarations, SimulatedProblem):
    """The top-``k`` subspace of scikit-learn's digits: a fixed real data set (CSS 2013 ran PPCA on
    real data sets of this kind).

    Rows are rescaled by the public bound 128 (:func:`load_digits_records`) and not centred
    (a centring mean would have to be public or private itself).  ``simulate(1797, rng)``
    returns the same read-only :class:`PCAData` for every replicate; the reference is the
    non-private top-``k`` subspace of the data, so the stored errors measure the privacy
    noise alone: ``"projection"`` the distance to it, ``"energy_loss"`` ``1 - q`` with CSS's
    captured-energy ratio ``q`` on the data set itself (the second moment is the data's).

    Parameters
    ----------
    k : int in [1, 63]; error_measure : "projection" or "energy_loss".
    """

    audit_defaults = {"k": 1}

    def __init__(self, *, k: int = 2, error_measure: str = "projection"):
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k < 64:
            raise ValueError(f"k must be an integer in [1, 63], got {k!r}")
        if error_measure not in ERROR_MEASURES:
            raise ValueError(f"error_measure must be one of {list(ERROR_MEASURES)}, got {error_measure!r}")
        self.k, self.error_measure, self.d_data = int(k), error_measure, DIGITS_SHAPE[1]

    def _load(self) -> tuple[PCAData, np.ndarray]:
        """The data set's statistic and the reference basis, cached per process."""
        if "data" not in _DIGITS_CACHE:
            _DIGITS_CACHE["data"] = digits_moment()
        A = _DIGITS_CACHE["data"]
        if self.k not in _DIGITS_CACHE:
            _DIGITS_CACHE[self.k] = canonical_basis(top_eigenvectors(A, self.k))
        return PCAData(A, DIGITS_SHAPE[0], self.k), _DIGITS_CACHE[self.k]

    def __repr__(self) -> str:
        return f"DigitsPCAProblem(k={self.k}, error_measure={self.error_measure!r})"

    d = STACKED_COEFFICIENTS

    @property
    def theta_star(self) -> np.ndarray:
        return self._load()[1].ravel()

    def _reference_moment(self) -> tuple[np.ndarray, np.ndarray]:
        data, U = self._load()
        return data.A, U

    @property
    def reference(self) -> str:
        return "the non-private estimate"

    @property
    def caveats(self) -> str:
        return (f"real data set: scikit-learn's digits (n = {DIGITS_SHAPE[0]}, d = 64, fixed: replicates differ only in the "
                "mechanisms' noise), rows divided by the public bound 128 on their norm and not centred; the "
                "reference is the non-private top-k subspace, so errors measure the privacy noise alone.")

    def data_bytes(self, n: int) -> int:
        """The shared read-only 64 x 64 statistic and its copies in the releases."""
        return 4 * DIGITS_SHAPE[1] ** 2 * 8

    def check_n(self, n: int) -> None:
        super().check_n(n)
        if n != DIGITS_SHAPE[0]:
            raise ValueError(f"n must be {DIGITS_SHAPE[0]}, the digits' row count, got n={n}")

    def simulate(self, n: int, rng: np.random.Generator) -> PCAData:
        self.check_n(n)
        return self._load()[0]

    def as_basis(self, estimate) -> np.ndarray:
        return PCAProblem.as_basis(self, estimate)

    def error(self, estimate) -> float:
        V = self.as_basis(estimate)
        data, U = self._load()
        if self.error_measure == "projection":
            return projection_distance(V, U)
        return 1.0 - captured_energy(V, data.A)

    def audit_records(self) -> tuple[np.ndarray, np.ndarray]:
        return PCAProblem.audit_records(self)

    def audit_data(self, records: np.ndarray) -> PCAData:
        return pca_data(records, self.k, 1.0)
