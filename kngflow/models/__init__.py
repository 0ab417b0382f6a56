"""The built-in statistical models, one package per model.

Each package holds its problem (data protocol, loss, gradient, sensitivities), its
mechanisms and its model-specific kernels, and exposes ``PROBLEM`` (the problem class) and
``MECHANISMS`` (kind -> mechanism class): a model module is the unit of registration
(:data:`kngflow.registry.BUILTIN_MODELS` lists the built-in ones; outside packages register
theirs in the ``kngflow.models`` entry-point group).  No model imports another; shared
pieces live in :mod:`kngflow.kernels`, :mod:`kngflow.mechanisms` (the contract and the
mechanism families written once: generic KNG and exponential mechanism, private ERM) and
:mod:`kngflow.problems`.
"""
