"""Warnings kngflow raises about privacy: :class:`PrivacyLeakWarning`.

Kept at the bottom of the import graph (it imports nothing from kngflow) so that every layer,
the models included, can raise it; :mod:`kngflow.api` and :mod:`kngflow.estimators` re-export it.
"""

from __future__ import annotations

__all__ = ["PrivacyLeakWarning"]


class PrivacyLeakWarning(UserWarning):
    """A release is not end-to-end differentially private because a bound was taken from the data.

    Raised (``warnings.warn``) wherever kngflow computes a scale or bound of the records
    without privacy -- e.g. :func:`kngflow.api.stats_from_arrays` without ``y_bound`` divides
    by ``max|y|`` of the data (the KNG paper's protocol), and the estimators of
    :mod:`kngflow.estimators` without a declared bound.  Declare a public bound (chosen
    without looking at the data) to silence it.  The name follows diffprivlib's
    ``PrivacyLeakWarning``; ``warnings.simplefilter("error", PrivacyLeakWarning)`` turns
    every such leak into an error.
    """
