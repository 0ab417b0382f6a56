"""The one place that decides numba's jit options.

Every kernel is compiled with ``cache=True`` (compiled once per machine, then
loaded from ``__pycache__``), ``nogil=True`` (so Dask threads can overlap) and
without ``fastmath`` (results must be bit-identical across runs and workers).
Kernels take an explicit :class:`numpy.random.Generator`; numba's Generator
support draws the same numbers as numpy for the same state, so a kernel and its
``.py_func`` agree draw for draw.
"""

from __future__ import annotations

import numba

__all__ = ["jit"]


def jit(func=None, **kwargs):
    """``numba.njit`` with the project's options (``cache``, ``nogil``)."""
    opts = {"cache": True, "nogil": True}
    opts.update(kwargs)
    if func is None:
        return lambda f: numba.njit(**opts)(f)
    return numba.njit(**opts)(func)
