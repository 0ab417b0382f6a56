"""kngflow: simulation studies of differential-privacy mechanisms on Dask.

The numerical layers (:mod:`kngflow.norms`, :mod:`kngflow.noise`,
:mod:`kngflow.problems`, :mod:`kngflow.kernels`, :mod:`kngflow.mechanisms`)
never import dask; :mod:`kngflow.sweep` and :mod:`kngflow.store` run studies
on a Dask cluster and write them to zarr; :mod:`kngflow.analysis` reads them.
"""

__version__ = "0.1.0"
