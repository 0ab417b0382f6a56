"""``dask worker --preload`` module: this worker reports another kngflow version, as a
worker whose environment holds another kngflow release would."""

import kngflow

kngflow.__version__ = "0.0.0+other"
