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

__all__ = ["first_class", "jit"]


def jit(func=None, **kwargs):
    """``numba.njit`` with the project's options (``cache``, ``nogil``)."""
    opts = {"cache": True, "nogil": True}
    opts.update(kwargs)
    if func is None:
        return lambda f: numba.njit(**opts)(f)
    return numba.njit(**opts)(func)


def first_class(kernel, args, calls):
    """The compiled entry point of jitted ``kernel`` for ``args``, with the jitted functions
    among them taken as first-class functions: ``calls`` maps the position of each to the
    numba types of the arguments the kernel calls it with.

    A kernel given a jitted function as a plain argument is compiled for that function
    object, which numba cannot cache on disk, so every process compiled such a kernel again
    (seconds a kernel).  Typed as a first-class function (a pointer, called indirectly) the
    argument's type is its signature, the same in every process: the kernel compiles once
    per machine and signature.  The code run is the same, so are the results.
    """
    sig = []
    for i, value in enumerate(args):
        if i in calls:
            argtypes = tuple(calls[i])
            value.compile(argtypes)
            sig.append(numba.types.FunctionType(value.overloads[argtypes].signature))
        else:
            sig.append(numba.typeof(value))
    return kernel.compile(tuple(sig))
