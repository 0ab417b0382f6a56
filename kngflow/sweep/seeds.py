"""Stable random streams: one ``SeedSequence`` per cell, keyed by values, never by position.

For a data set ``(problem, n, replicate)`` the cell key is
``(crc32(problem), n, replicate)``; the data stream appends ``0`` and the stream
of a release appends ``(1, crc32(label), bits(ε))`` where ``bits(ε)`` is the
IEEE-754 float64 bit pattern of ε.  All are ``SeedSequence(entropy=root_seed,
spawn_key=...)``, so a stream depends only on the root seed and those values:
not on the worker, the task batching, the order of the grid axes, resumes, or
which other n, ε, mechanisms or replicates the study has.  Python's ``hash()``
(salted per process) is never used.

Problem axes (``[grid.problem]`` of a spec, e.g. ``d = [8, 16, 32]``): a cell of a study
with problem axes has the key ``(crc32(problem), n, replicate, 2, crc32(name), kind, v, ...)``,
one ``(crc32(name), kind, v)`` triple per axis in name order, where ``kind, v`` encode the
option's value (``0, value`` for an integer >= 0, ``1, bits(value)`` for a float, ``2,
crc32(JSON)`` otherwise).  The data and release suffixes follow as above.  The marker ``2``
keeps these streams apart from the streams of a study without axes (whose keys are
unchanged: its cells keep their seeds), and since a cell's key holds only its own axis
values, adding a value to an axis leaves every other value's cells as they were.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

__all__ = ["stable_key", "value_key", "axes_key", "cell_key", "data_seed", "release_seed", "data_rng", "release_rng"]

_DATA, _RELEASE, _AXES = 0, 1, 2


def stable_key(text: str) -> int:
    """CRC-32 of the UTF-8 text: a stable 32-bit integer for names and labels."""
    return zlib.crc32(text.encode("utf-8")) & 0xFFFFFFFF


def float_bits(x: float) -> int:
    """The float64 bit pattern of ``x`` as an unsigned integer."""
    return struct.unpack("<Q", struct.pack("<d", float(x)))[0]


def value_key(value) -> tuple[int, int]:
    """``(kind, v)``: a stable integer pair for a problem option's value (see the module docstring)."""
    import json

    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and int(value) >= 0:
        return (0, int(value))
    if isinstance(value, (float, np.floating)):
        return (1, float_bits(value))
    return (2, stable_key(json.dumps(value, sort_keys=True)))


def axes_key(axes=()) -> tuple[int, ...]:
    """The key suffix of the problem-axis values ``axes`` (``((name, value), ...)``); ``()`` for none."""
    if not axes:
        return ()
    out: tuple[int, ...] = (_AXES,)
    for name, value in sorted(axes, key=lambda kv: kv[0]):
        out += (stable_key(str(name)),) + value_key(value)
    return out


def cell_key(problem: str, n: int, replicate: int, axes=()) -> tuple[int, ...]:
    """Spawn key of the data set ``(problem, n, replicate)`` (at the problem-axis values ``axes``)."""
    return (stable_key(problem), int(n), int(replicate)) + axes_key(axes)


def data_seed(root: int, problem: str, n: int, replicate: int, axes=()) -> np.random.SeedSequence:
    """SeedSequence of the simulated data set of ``(n, replicate)``."""
    return np.random.SeedSequence(entropy=int(root), spawn_key=cell_key(problem, n, replicate, axes) + (_DATA,))


def release_seed(root: int, problem: str, n: int, replicate: int, label: str, epsilon: float,
                 axes=()) -> np.random.SeedSequence:
    """SeedSequence of the release of mechanism ``label`` at ``epsilon`` on that data set."""
    key = cell_key(problem, n, replicate, axes) + (_RELEASE, stable_key(label), float_bits(epsilon))
    return np.random.SeedSequence(entropy=int(root), spawn_key=key)


def data_rng(root: int, problem: str, n: int, replicate: int, axes=()) -> np.random.Generator:
    return np.random.default_rng(data_seed(root, problem, n, replicate, axes))


def release_rng(root: int, problem: str, n: int, replicate: int, label: str, epsilon: float,
                axes=()) -> np.random.Generator:
    return np.random.default_rng(release_seed(root, problem, n, replicate, label, epsilon, axes))
