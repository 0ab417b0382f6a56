"""Stable random streams: one ``SeedSequence`` per cell, keyed by values, never by position.

For a data set ``(problem, n, replicate)`` the cell key is
``(crc32(problem), n, replicate)``; the data stream appends ``0`` and the stream
of a release appends ``(1, crc32(label), bits(ε))`` where ``bits(ε)`` is the
IEEE-754 float64 bit pattern of ε.  All are ``SeedSequence(entropy=root_seed,
spawn_key=...)``, so a stream depends only on the root seed and those values:
not on the worker, the task batching, the order of the grid axes, resumes, or
which other n, ε, mechanisms or replicates the study has.  Python's ``hash()``
(salted per process) is never used.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

__all__ = ["stable_key", "cell_key", "data_seed", "release_seed", "data_rng", "release_rng"]

_DATA, _RELEASE = 0, 1


def stable_key(text: str) -> int:
    """CRC-32 of the UTF-8 text: a stable 32-bit integer for names and labels."""
    return zlib.crc32(text.encode("utf-8")) & 0xFFFFFFFF


def float_bits(x: float) -> int:
    """The float64 bit pattern of ``x`` as an unsigned integer."""
    return struct.unpack("<Q", struct.pack("<d", float(x)))[0]


def cell_key(problem: str, n: int, replicate: int) -> tuple[int, ...]:
    """Spawn key of the data set ``(problem, n, replicate)``."""
    return (stable_key(problem), int(n), int(replicate))


def data_seed(root: int, problem: str, n: int, replicate: int) -> np.random.SeedSequence:
    """SeedSequence of the simulated data set of ``(n, replicate)``."""
    return np.random.SeedSequence(entropy=int(root), spawn_key=cell_key(problem, n, replicate) + (_DATA,))


def release_seed(root: int, problem: str, n: int, replicate: int, label: str, epsilon: float) -> np.random.SeedSequence:
    """SeedSequence of the release of mechanism ``label`` at ``epsilon`` on that data set."""
    key = cell_key(problem, n, replicate) + (_RELEASE, stable_key(label), float_bits(epsilon))
    return np.random.SeedSequence(entropy=int(root), spawn_key=key)


def data_rng(root: int, problem: str, n: int, replicate: int) -> np.random.Generator:
    return np.random.default_rng(data_seed(root, problem, n, replicate))


def release_rng(root: int, problem: str, n: int, replicate: int, label: str, epsilon: float) -> np.random.Generator:
    return np.random.default_rng(release_seed(root, problem, n, replicate, label, epsilon))
