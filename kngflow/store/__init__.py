"""Chunked xarray/zarr result stores: template, one writer of compact chunks, done flags, resume.

This layer imports only xarray and zarr (and dask.array for the lazy template);
it knows nothing about mechanisms. See :mod:`kngflow.store.zarrstore` and
:mod:`kngflow.store.writer`.
"""

from .writer import Block, StoreWriter, empty_cells, write_blocks
from .zarrstore import (
    CELL_DIMS,
    VARIABLES,
    STORE_FORMAT,
    StoreDamaged,
    StoreError,
    StoreMeta,
    cell_variable_names,
    check_cell_variables,
    check_data_variables,
    consolidate,
    create_store,
    data_variable_names,
    extend_store,
    open_dataset,
    read_failures,
    read_flags,
    read_meta,
    read_region,
    store_axes,
    update_attrs,
    write_failures,
)

__all__ = [
    "Block",
    "CELL_DIMS",
    "VARIABLES",
    "STORE_FORMAT",
    "StoreDamaged",
    "StoreError",
    "StoreMeta",
    "StoreWriter",
    "cell_variable_names",
    "check_cell_variables",
    "check_data_variables",
    "consolidate",
    "create_store",
    "data_variable_names",
    "empty_cells",
    "extend_store",
    "open_dataset",
    "read_failures",
    "read_flags",
    "read_meta",
    "read_region",
    "store_axes",
    "update_attrs",
    "write_blocks",
    "write_failures",
]
