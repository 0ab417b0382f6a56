"""Chunked xarray/zarr result stores: template, chunk-aligned region writes, done flags, resume.

This layer imports only xarray and zarr (and dask.array for the lazy template);
it knows nothing about mechanisms. See :mod:`kngflow.store.zarrstore`.
"""

from .zarrstore import (
    CELL_DIMS,
    VARIABLES,
    StoreError,
    StoreMeta,
    check_aligned,
    check_data_variables,
    clear_failures,
    consolidate,
    create_store,
    data_variable_names,
    extend_store,
    open_dataset,
    read_failures,
    read_flags,
    read_meta,
    read_region,
    update_attrs,
    write_failures,
    write_region,
)

__all__ = [
    "CELL_DIMS",
    "VARIABLES",
    "StoreError",
    "StoreMeta",
    "check_aligned",
    "check_data_variables",
    "clear_failures",
    "consolidate",
    "create_store",
    "data_variable_names",
    "extend_store",
    "open_dataset",
    "read_failures",
    "read_flags",
    "read_meta",
    "read_region",
    "update_attrs",
    "write_failures",
    "write_region",
]
