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
import numpy as np

__all__ = ["MATRIX", "VECTOR", "Compiled", "first_class", "jit"]


def jit(func=None, **kwargs):
    """``numba.njit`` with the project's options (``cache``, ``nogil``)."""
    opts = {"cache": True, "nogil": True}
    opts.update(kwargs)
    if func is None:
        return lambda f: numba.njit(**opts)(f)
    return numba.njit(**opts)(func)


#: the types of a kernel's float64 vector and matrix arguments, for :func:`first_class`'s ``calls``
VECTOR = numba.types.float64[::1]
MATRIX = numba.types.float64[:, ::1]

_ENTRIES: dict = {}


def first_class(kernel, args, calls):
    """The compiled entry point of jitted ``kernel`` for ``args``, with the jitted functions
    among them taken as first-class functions, and ``args`` to call it with: ``calls`` maps
    the position of each function to the arguments the kernel calls it with, each a numba
    type (:data:`VECTOR`, :data:`MATRIX`) or a value of that type; the returned arguments
    hold each function's compiled code (:class:`Compiled`) in its place.

    A kernel given a jitted function as a plain argument is compiled for that function
    object, which numba cannot cache on disk, so every process compiled such a kernel again
    (seconds a kernel).  Typed as a first-class function (a pointer, called indirectly) the
    argument's type is its signature, the same in every process: the kernel compiles once
    per machine and signature.  The code run is the same, so are the results.

    Entry points are kept per process under a key of the arguments' types read in Python
    (:func:`_type_key`, microseconds): numba's own typing of a tuple costs about 10 µs an
    entry, as much as a short chain.
    """
    key = (kernel,) + tuple((value, _type_key(calls[i])) if i in calls else _type_key(value)
                            for i, value in enumerate(args))
    found = _ENTRIES.get(key)
    if found is None:
        compiled = {}
        for i, value in enumerate(args):
            if i in calls:
                argtypes = tuple(t if isinstance(t, numba.types.Type) else numba.typeof(t) for t in calls[i])
                value.compile(argtypes)
                compiled[i] = Compiled(value, argtypes)
        sig = tuple(numba.typeof(compiled.get(i, value)) for i, value in enumerate(args))
        found = _ENTRIES[key] = kernel.compile(sig), compiled
    entry, compiled = found
    return entry, tuple(compiled.get(i, value) for i, value in enumerate(args))


class Compiled(numba.types.WrapperAddressProtocol):
    """A jitted function's compiled code for one signature, as a first-class function value
    (numba's wrapper-address protocol): numba reads the address from here, where for the
    jitted function itself it would look the code up at every call of the kernel (about
    0.1 ms a function)."""

    def __init__(self, function, argtypes):
        result = function.overloads[argtypes]
        self.function = function  # keeps the code alive
        self._signature = result.signature
        self._address = result.library.get_pointer_to_function(result.fndesc.llvm_cfunc_wrapper_name)

    def __wrapper_address__(self):
        return self._address

    def signature(self):
        return self._signature


def _type_key(value):
    """What numba's type of argument ``value`` depends on (arrays: dtype, dimensions, layout,
    writeability, alignment; tuples: their entries; numbers: their Python type; an integer
    also whether it fits in int64; anything else, jitted functions included: itself or its type)."""
    if isinstance(value, np.ndarray):
        flags = value.flags
        return value.dtype.str, value.ndim, flags.c_contiguous, flags.f_contiguous, flags.writeable, flags.aligned
    if isinstance(value, tuple):
        return tuple(_type_key(v) for v in value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int, -(2**63) <= value < 2**63
    if isinstance(value, (numba.types.Type, numba.core.dispatcher.Dispatcher)):
        return value
    return type(value)
