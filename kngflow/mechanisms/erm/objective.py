"""The constants of Chaudhuri, Monteleoni & Sarwate's objective perturbation, shared by
every model that runs it (a loss with ``|l'| <= 1``, ``l'' <= c`` on records ``||x|| <= 1``)."""

from __future__ import annotations

import math




#: the rules :func:`cms_constants` knows for taking the slack branch
SLACK_RULES = ("cms", "larger")


def cms_constants(epsilon: float, n: int, reg: float, c: float, rule: str = "cms") -> tuple[float, float]:
    """``(eps', Delta)`` of CMS 2011 Algorithm 2 (records ``||x|| <= 1``, ridge ``reg``, a loss
    with ``|l'| <= 1`` and curvature ``l'' <= c``):

    ``eps' = eps - log(1 + 2c/(n reg) + c^2/(n reg)^2)``; if ``eps' > 0``, ``Delta = 0``,
    else ``Delta = c / (n (e^{eps/4} - 1)) - reg`` and ``eps' = eps / 2``.

    ``rule="cms"`` is that rule as printed (there ``Delta > reg > 0`` whenever the slack branch
    is taken: ``eps <= 2 log(1 + a)``, ``a = c/(n reg)``, gives ``e^{eps/4} - 1 < a/2``).
    ``rule="larger"`` takes the slack branch also when it gives the larger ``eps'``, i.e.
    whenever ``eps - 2 log(1 + c/(n reg)) < eps/2``: as printed, ``eps'`` just above 0 means
    noise of scale ``2/eps'`` without bound (at ``n = 1000``, ``reg = 0.01``, ``c = 1``,
    ``eps = 0.2``: ``eps' = 0.0094``, scale 213, a noise norm of ``213 d`` on average), where
    the slack branch's ``eps/2 = 0.1`` and a slightly larger ridge serve better (``Delta`` is
    then ``max(0, .)``).  Both branches spend exactly ``eps`` (the other part in the
    Jacobian's ``2 log(1 + c/(n (reg + Delta)))``), and the choice depends on the public
    ``eps, n, reg, c`` only, so either rule is ε-DP."""
    a = c / (n * reg)
    eps_p = epsilon - 2.0 * math.log1p(a)  # log(1 + 2a + a^2) = 2 log(1 + a)
    if eps_p > (0.0 if rule == "cms" else epsilon / 2.0):
        return eps_p, 0.0
    return epsilon / 2.0, max(0.0, c / (n * math.expm1(epsilon / 4.0)) - reg)
