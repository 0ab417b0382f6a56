"""Members a data class or problem derives from the public fields it declares.

Data classes and problems of models with covariates in a declared record domain carry the
fields ``data_norm`` and ``radius`` (:class:`~kngflow.problems.domains.RecordDomain`), and
regression-type problems carry their true coefficients ``beta``.  What follows from them is
the same everywhere, so it is written once, as properties a class takes as attributes
(``NamedTuple`` classes cannot inherit a mixin)::

    class MyData(NamedTuple):
        X: np.ndarray
        radius: float = 1.0
        data_norm: str = "l2"
        domain = DECLARED_DOMAIN

* :data:`DECLARED_DOMAIN`: ``{||x||_data_norm <= radius}``;
* :data:`BETA_DIMENSION`: ``d = len(beta)``, the number of coefficients;
* :data:`TRUE_BETA`: ``theta_star = beta`` as a new float array (the simulation's truth);
* :data:`STACKED_COEFFICIENTS`: ``d = k d_data`` for an estimate made of ``k`` vectors of
  ``R^{d_data}`` stored flat (``k`` centres, a basis of ``k`` columns).
"""

from __future__ import annotations

import numpy as np

from kngflow.problems.domains import RecordDomain

__all__ = ["DECLARED_DOMAIN", "BETA_DIMENSION", "TRUE_BETA", "STACKED_COEFFICIENTS"]

#: the declared record domain ``{||x||_data_norm <= radius}`` (public)
DECLARED_DOMAIN = property(lambda self: RecordDomain(self.data_norm, self.radius),
                           doc="The declared record domain ``{||x||_data_norm <= radius}`` (public).")
#: ``d``: the number of coefficients, ``len(beta)``
BETA_DIMENSION = property(lambda self: len(self.beta), doc="The number of coefficients, ``len(beta)``.")
#: ``theta_star``: the true coefficients ``beta`` (a new array on every access)
TRUE_BETA = property(lambda self: np.array(self.beta), doc="The true coefficients ``beta``.")
#: ``d``: the number of stored coefficients of ``k`` vectors of ``R^{d_data}``, ``k * d_data``
STACKED_COEFFICIENTS = property(lambda self: self.k * self.d_data,
                                doc="The number of stored coefficients: ``k`` vectors of ``d_data`` entries.")
