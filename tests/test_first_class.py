"""kngflow._jit.first_class: kernels that take jitted functions as first-class arguments.

Entry points are kept under a key of the argument types read in Python; a key that missed
a difference numba's typing makes (layout, dtype, writeability) would call code compiled
for one array layout on another and read the wrong memory."""

import numba
import numpy as np

from kngflow._jit import VECTOR, Compiled, _type_key, first_class, jit


@jit
def _scale(x, out):
    for i in range(x.shape[0]):
        out[i] = 2.0 * x[i]


@jit
def _apply(f, x, out):
    f(x, out)
    return out.sum()


def test_the_key_separates_what_numba_types_apart():
    a = np.arange(12.0).reshape(3, 4)
    keys = [_type_key(v) for v in (a, np.asfortranarray(a), a[:, ::2], a.astype(np.float32), a[0], 1, 2**64, 1.0,
                                   True, None)]
    frozen = a.copy()
    frozen.setflags(write=False)
    keys.append(_type_key(frozen))
    assert len(set(keys)) == len(keys)
    assert _type_key((a, 1.0)) == _type_key((a + 1, 2.5))  # same types, same key


def test_first_class_runs_the_kernel_and_follows_the_layout():
    base = np.arange(10.0)
    for x in (base, base[::2]):  # C-contiguous, then strided: two entries
        out = np.empty(x.shape[0])
        entry, call = first_class(_apply, (_scale, x, out), {0: (VECTOR if x.flags.c_contiguous else numba.typeof(x),
                                                                 numba.typeof(out))})
        assert isinstance(call[0], Compiled)
        assert entry(*call) == 2.0 * x.sum()
        assert np.array_equal(out, 2.0 * x)
    # the same types again: the same entry point, no new compile
    x = np.arange(5.0)
    first = first_class(_apply, (_scale, x, np.empty(5)), {0: (VECTOR, VECTOR)})[0]
    assert first_class(_apply, (_scale, x + 1, np.empty(5)), {0: (VECTOR, VECTOR)})[0] is first
