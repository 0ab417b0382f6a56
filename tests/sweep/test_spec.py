"""Spec validation and the stable seed scheme (no Dask needed)."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np
import pytest
from testkit import EXPONENTIAL, tiny_spec

from kngflow.sweep import SpecError, load_spec, parse_spec, seeds

ROOT = Path(__file__).resolve().parents[2]


def test_tiny_spec_parses():
    spec = parse_spec(tiny_spec(extra=EXPONENTIAL))
    assert spec.labels == ("nonprivate", "kng", "exponential")
    assert spec.n == (20, 50) and spec.epsilon == (0.5, 2.0) and tuple(spec.replicates) == (0, 1, 2, 3)
    # sampler defaults go only to mechanisms that accept them
    opts = {m.label: m.options for m in spec.mechanisms}
    assert "steps" not in opts["nonprivate"]
    assert opts["kng"]["steps"] == 200 and opts["kng"]["norm"] == "linf"
    assert spec.problem().d == 3


@pytest.mark.parametrize("name", ["kng_linear", "kng_linear_eps", "smoke"])
def test_workflows_parse(name):
    spec = load_spec(ROOT / "workflows" / f"{name}.toml")
    assert {m.kind for m in spec.mechanisms} >= {"nonprivate", "kng", "exponential", "objective"}
    assert spec.problem().d == 12


def test_figure1_workflow_matches_paper():
    spec = load_spec(ROOT / "workflows" / "kng_linear.toml")
    assert spec.n == tuple(10**k for k in range(2, 8))
    assert spec.epsilon == (1.0,) and len(spec.replicates) == 100
    assert spec.problem_options["protocol"] == "paper"
    eps = load_spec(ROOT / "workflows" / "kng_linear_eps.toml").epsilon
    assert eps == tuple(2.0**k for k in range(-4, 5))


def test_hash_ignores_cosmetics_but_not_science():
    text = tiny_spec()
    base = parse_spec(text).hash
    cosmetic = "# a comment\n" + text.replace('name = "tiny"', 'name = "renamed"\ndescription = "x"')
    assert parse_spec(cosmetic).hash == base
    assert parse_spec(tiny_spec(seed=8)).hash != base
    assert parse_spec(tiny_spec(epsilon=(0.5, 2.0, 4.0))).hash != base
    assert parse_spec(text.replace("steps = 200", "steps = 300")).hash != base


#: Hashes of the workflow specs before the replicate count was kept as a range:
#: stores made from them must still resume.
FROZEN_HASHES = {
    "kng_linear": "b46dae1c56dc9bdf2c1f8f68bd534dedcfa474570c433aae635d06996e873048",
    "kng_linear_eps": "b8e4e840a9acdd4a76c2040fb3a929ff415a9200577c84a2fbbce85d4f508825",
    "smoke": "cb48a39235ec236ee1161132dc9e0b60ced823453a85e8c1626e0ca8125bf93e",
}


@pytest.mark.parametrize("name", sorted(FROZEN_HASHES))
def test_workflow_hashes_are_frozen(name):
    assert load_spec(ROOT / "workflows" / f"{name}.toml").hash == FROZEN_HASHES[name]


@pytest.mark.parametrize("replicates", [4, 70_000, [5, 1, 3]])
def test_streamed_hash_is_the_hash_of_the_canonical_json(replicates):
    spec = parse_spec(tiny_spec(replicates=replicates))
    blob = json.dumps(spec.canonical(), sort_keys=True, separators=(",", ":"))
    assert spec.hash == hashlib.sha256(blob.encode()).hexdigest()
    # allow_extreme changes no result, so not the hash either
    assert parse_spec(tiny_spec(replicates=replicates).replace("[grid]", "[grid]\nallow_extreme = true")).hash == spec.hash


def test_a_huge_replicate_count_is_refused_without_memory_or_time():
    t0 = time.perf_counter()
    with pytest.raises(SpecError, match=r"^grid\.replicates: 1000000000 replicates is beyond the limit 1e\+08; set allow_extreme"):
        parse_spec(tiny_spec(replicates=10**9))
    assert time.perf_counter() - t0 < 5  # materialising 10^9 replicates takes minutes and 40 GB
    spec = parse_spec(tiny_spec(replicates=10**9, extra="").replace("[grid]", "[grid]\nallow_extreme = true"))
    assert isinstance(spec.replicates, range) and len(spec.replicates) == 10**9


def _extreme(text):
    return text.replace("[grid]", "[grid]\nallow_extreme = true")


LIMITS = [
    # (spec text, field regex): refused as is, accepted with allow_extreme = true
    (tiny_spec(n=(20, 10**9 + 1)), r"^grid\.n\[1\]: n = 1000000001 is beyond the limit 1e\+09; set allow_extreme = true"),
    (tiny_spec(n=(10**12,)), r"^grid\.n\[0\]: n = 1000000000000 is beyond the limit"),
    (tiny_spec(replicates=10**8 + 1), r"^grid\.replicates: 100000001 replicates is beyond the limit 1e\+08"),
    (tiny_spec(epsilon=(0.5, 1e20)), r"^grid\.epsilon\[1\]: epsilon = 1e\+20 is outside \[1e-06, 1e\+06\]; set allow"),
    (tiny_spec(epsilon=(9e-7,)), r"^grid\.epsilon\[0\]: epsilon = 9e-07 is outside \[1e-06, 1e\+06\]"),
]


@pytest.mark.parametrize("text,match", LIMITS, ids=[m.split(":")[0] for _, m in LIMITS])
def test_extreme_grid_values_need_allow_extreme(text, match):
    with pytest.raises(SpecError, match=match):
        parse_spec(text)
    parse_spec(_extreme(text))


def test_grid_limits_are_inclusive():
    parse_spec(tiny_spec(n=(20, 10**9), epsilon=(1e-6, 1e6), replicates=10**8))


def test_allow_extreme_must_be_a_boolean():
    with pytest.raises(SpecError, match=r"^grid\.allow_extreme: must be true or false, got 1"):
        parse_spec(tiny_spec().replace("[grid]", "[grid]\nallow_extreme = 1"))


def test_non_utf8_spec_file_is_refused(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes(tiny_spec().replace('"tiny"', '"caf\u00e9"').encode("latin-1"))
    with pytest.raises(SpecError, match=r"^spec: '.*latin1\.toml' is not UTF-8 text \(byte 0xe9 at offset \d+\)"):
        load_spec(path)
    path.write_bytes(tiny_spec().replace('"tiny"', '"caf\u00e9"').encode("utf-8"))
    assert load_spec(path).name == "caf\u00e9"


def _replace(old, new, **kw):
    text = tiny_spec(**kw)
    assert old in text
    return text.replace(old, new, 1)


BAD = [
    # (spec text, field regex)
    (_replace('name = "tiny"', 'name = "tiny"\ncolour = "red"'), r"^colour: unknown field"),
    (_replace("[grid]", "[grid]\nsize = 3"), r"^grid\.size: unknown field"),
    (_replace('kind = "kng"', 'kind = "kgn"'), r"^mechanisms\[1\]\.kind: unknown mechanism kind 'kgn'.*allowed.*'kng'"),
    (_replace('kind = "kng"', ""), r"^mechanisms\[1\]\.kind: missing"),
    (tiny_spec(epsilon=(0.5, 0.0)), r"^grid\.epsilon\[1\]: must be a finite number > 0"),
    (tiny_spec(epsilon=(-1.0,)), r"^grid\.epsilon\[0\]"),
    (_replace("epsilon = [0.5, 2.0]", "epsilon = [inf]"), r"^grid\.epsilon\[0\]: must be a finite"),
    (_replace("epsilon = [0.5, 2.0]", "epsilon = [nan]"), r"^grid\.epsilon\[0\]: must be a finite"),
    (_replace("epsilon = [0.5, 2.0]", "epsilon = []"), r"^grid\.epsilon: must be a non-empty"),
    (_replace("n = [20, 50]", "n = []"), r"^grid\.n: must be a non-empty"),
    (tiny_spec(n=(2, 50)), r"^grid\.n\[0\]: n must be at least d=3"),
    (_replace("n = [20, 50]", "n = [20, 1e7]"), r"^grid\.n\[1\]: must be an integer"),
    (tiny_spec(n=(20, 20)), r"^grid\.n: values must be distinct"),
    (tiny_spec(replicates=0), r"^grid\.replicates: must be a count >= 1"),
    (_replace("replicates = 4", "replicates = []"), r"^grid\.replicates"),
    (tiny_spec(replicates=[0, -1]), r"^grid\.replicates\[1\]"),
    (_replace('label = "kng"', 'label = "nonprivate"'), r"^mechanisms\[1\]\.label: duplicate label 'nonprivate'"),
    (_replace('label = "kng"', 'label = ""'), r"^mechanisms\[1\]\.label"),
    (_replace('norm = "linf"', 'norm = "l7"'), r"^mechanisms\[1\]\.norm: .*'linf'"),
    (_replace('norm = "linf"', 'norm = "linf"\ncolour = 1'), r"^mechanisms\[1\]\.colour: unknown option"),
    (_replace("bound = 1.0", "bound = -1.0"), r"^mechanisms\[1\]\.bound"),
    (_replace("steps = 200", "steps = 0"), r"^mechanisms\[1\]\.steps"),
    (_replace("steps = 200", "steps = 200\nwarp = 9"), r"^sampler\.warp: no mechanism"),
    (_replace("seed = 7", ""), r"^seed: missing"),
    (tiny_spec(seed=-3), r"^seed: must be an integer >= 0"),
    (_replace('name = "linear"', 'name = "circular"'), r"^problem\.name: unknown problem 'circular'.*'linear'"),
    (_replace('protocol = "paper"', 'protocol = "magic"'), r"^problem\.protocol: .*paper"),
    (_replace('protocol = "paper"', 'protocol = "paper"\nflavour = 2'), r"^problem\.flavour: unknown option"),
    (_replace("[grid]", "[grid\n"), r"^spec: not valid TOML"),
]


@pytest.mark.parametrize("text,match", BAD, ids=[m for _, m in BAD])
def test_bad_specs_name_the_field(text, match):
    with pytest.raises(SpecError, match=match):
        parse_spec(text)


def test_missing_mechanisms_and_grid():
    text = tiny_spec()
    head = text.split("[[mechanisms]]")[0]
    with pytest.raises(SpecError, match=r"^mechanisms: missing"):
        parse_spec(head)
    with pytest.raises(SpecError, match=r"^grid: missing"):
        parse_spec(text.replace("[grid]", "[sampler_]").replace("[sampler]", "").replace("[sampler_]", "[sampler]"))


def test_load_spec_missing_file(tmp_path):
    with pytest.raises(SpecError, match=r"^spec: cannot read"):
        load_spec(tmp_path / "nope.toml")


# ----------------------------------------------------------------------------- seeds
def test_stable_keys_are_crc32_and_float_bits():
    import zlib

    assert seeds.stable_key("kng") == zlib.crc32(b"kng")
    assert seeds.float_bits(1.0) == 0x3FF0000000000000
    assert seeds.cell_key("linear", 100, 3) == (zlib.crc32(b"linear"), 100, 3)


def test_streams_depend_only_on_their_values():
    a = seeds.release_rng(5, "linear", 100, 3, "kng", 1.0).random(4)
    b = seeds.release_rng(5, "linear", 100, 3, "kng", 1.0).random(4)
    assert np.array_equal(a, b)
    others = [
        seeds.release_rng(6, "linear", 100, 3, "kng", 1.0),
        seeds.release_rng(5, "quantile", 100, 3, "kng", 1.0),
        seeds.release_rng(5, "linear", 101, 3, "kng", 1.0),
        seeds.release_rng(5, "linear", 100, 4, "kng", 1.0),
        seeds.release_rng(5, "linear", 100, 3, "kng2", 1.0),
        seeds.release_rng(5, "linear", 100, 3, "kng", np.nextafter(1.0, 2.0)),
        seeds.data_rng(5, "linear", 100, 3),
    ]
    for rng in others:
        assert not np.array_equal(rng.random(4), a)


def test_seed_scheme_is_frozen():
    """Regression value: changing the seed scheme silently changes every stored study."""
    state = seeds.release_seed(20191208, "linear", 100, 0, "kng", 1.0).generate_state(2)
    data = seeds.data_seed(20191208, "linear", 100, 0).generate_state(2)
    assert state.tolist() == FROZEN_RELEASE and data.tolist() == FROZEN_DATA


FROZEN_RELEASE = [2581399401, 1308254101]
FROZEN_DATA = [1949837223, 2865338703]
