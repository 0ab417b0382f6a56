"""Shared test helpers (kept minimal): a tiny real study spec as TOML text."""

from __future__ import annotations

import pytest

TINY_SPEC = """\
name = "tiny"
seed = {seed}

[problem]
name = "linear"
d = 3
protocol = "paper"

[grid]
n = {n}
epsilon = {epsilon}
replicates = {replicates}

[sampler]
steps = 200

[[mechanisms]]
label = "nonprivate"
kind = "nonprivate"

[[mechanisms]]
label = "kng"
kind = "kng"
norm = "linf"
bound = 1.0
{extra}
"""


def tiny_spec(*, seed=7, n=(20, 50), epsilon=(0.5, 2.0), replicates=4, extra="") -> str:
    """TOML text of a small real linear-regression study (d = 3)."""
    return TINY_SPEC.format(
        seed=seed,
        n=list(n),
        epsilon=list(epsilon),
        replicates=replicates if isinstance(replicates, int) else list(replicates),
        extra=extra,
    )


EXPONENTIAL = """
[[mechanisms]]
label = "exponential"
kind = "exponential"
bound = 1.0
"""


@pytest.fixture
def spec_text():
    return tiny_spec
