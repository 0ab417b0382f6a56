"""What every sampler's draw returns: the states and a :class:`DrawInfo` record.

A draw method ``draw_<sampler>(data, epsilon, rng, size, ...)`` of a sampled mechanism
returns ``(theta, info)``: ``theta`` the ``(size, d)`` final states (scaled units) and
``info`` a :class:`DrawInfo` naming the sampler and giving, per draw, its acceptance rate
and its steps (exact tries, sweeps of a chain, proposals of a map).  A release reads its
``Release.info`` from it (:meth:`DrawInfo.release_info`).  Like ``Release.info``, the
record is a function of the data and is NOT private.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DrawInfo"]


@dataclass(frozen=True, eq=False)
class DrawInfo:
    """How ``size`` draws were made (non-private).

    ``sampler``: the sampler's name (``"exact"``, ``"gibbs"``, ``"metropolis"``,
    ``"gradient_map"``, ``"surrogate_map"``, ...); ``acceptance``: (size,) float64, the
    accepted fraction of each draw's tries or proposals (1 for exact Gibbs); ``steps``:
    (size,) int64, each draw's tries, sweeps or proposals; ``directions``: the frozen
    directions (size, d, d) of chains along preconditioned directions, else None.
    """

    sampler: str
    acceptance: np.ndarray
    steps: np.ndarray
    directions: np.ndarray | None = None

    @classmethod
    def constant(cls, sampler: str, size: int, acceptance: float, steps: int) -> DrawInfo:
        """The record of ``size`` draws that share their acceptance and steps."""
        return cls(sampler, np.full(size, float(acceptance)), np.full(size, int(steps), dtype=np.int64))

    @classmethod
    def chains(cls, sampler: str, acceptance, steps, directions=None) -> DrawInfo:
        """The record of chains with acceptance rates ``acceptance`` (size,) and ``steps``
        (an int shared by all, or one per chain)."""
        acceptance = np.asarray(acceptance, dtype=np.float64)
        steps = np.broadcast_to(np.asarray(steps, dtype=np.int64), acceptance.shape).copy()
        return cls(sampler, acceptance, steps, directions)

    def release_info(self, i: int = 0) -> dict:
        """``Release.info`` of draw ``i``: ``{"sampler", "acceptance", "steps"}`` as Python scalars."""
        return {"sampler": self.sampler, "acceptance": float(self.acceptance[i]), "steps": int(self.steps[i])}
