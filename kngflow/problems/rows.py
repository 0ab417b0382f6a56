"""The ``n`` and ``d`` of a data class whose records are the rows of an array ``X``.

Every model's data class with a records matrix ``X`` (n, d) exposes them the same way::

    class MyData(NamedTuple):
        X: np.ndarray
        n = N_ROWS
        d = D_COLUMNS
"""

from __future__ import annotations

__all__ = ["N_ROWS", "D_COLUMNS"]

#: the number of records: the rows of ``X``
N_ROWS = property(lambda self: int(self.X.shape[0]), doc="The number of records (rows of ``X``).")
#: the dimension of a record: the columns of ``X``
D_COLUMNS = property(lambda self: int(self.X.shape[1]), doc="The dimension of a record (columns of ``X``).")
