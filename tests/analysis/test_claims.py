"""Paper claims as executable checks (kngflow.analysis.claims, ``kngflow report --claims``).

Stores with known error laws (tests/synthetic.py, fixed seeds) decide each claim type both
ways: a true claim comes out ``agrees`` and its contradiction (the negative control)
``disagrees``.  The CLI tests run the real ``kngflow report`` on small zarr stores.
"""

from __future__ import annotations

import re
from pathlib import Path

import math
import tomllib

import numpy as np
import pytest
import xarray as xr
from testkit import WORKFLOWS, kngflow_cli
from synthetic import SyntheticMechanism as SM
from synthetic import synthetic_dataset, write_store

import kngflow.analysis  # noqa: F401  (ds.kng)
from kngflow.analysis.claims import (
    CLAIM_TYPES,
    STATISTICS,
    ClaimsError,
    cell_statistic,
    default_claims_path,
    evaluate_claims,
    parse_claims,
    verdict_table,
)

MECHS = [
    SM("np", "nonprivate"),
    SM("good", "kng", lambda n, e: 1 / math.sqrt(n)),
    SM("twin", "kng", lambda n, e: 1 / math.sqrt(n)),
    SM("bad", "kng", lambda n, e: 3 / math.sqrt(n)),
    SM("fast", "kng", lambda n, e: 1.0 / n),
    SM("half", "kng", lambda n, e: 1 / (e * math.sqrt(n))),
    SM("full", "kng", lambda n, e: 2 / (e * math.sqrt(n))),
]


@pytest.fixture(scope="module")
def ds():
    raw = synthetic_dataset(MECHS, n=[100, 1000, 10_000, 100_000], epsilon=[0.5, 1.0, 2.0], replicates=400,
                            d=3, seed=11)
    raw.attrs["title"] = "demo"
    return raw


def claim(**fields) -> str:
    base = {"id": "c", "source": "test", "statement": "s", "statistic": "mean_error"}
    base.update(fields)
    lines = ["[[claims]]"]
    for k, v in base.items():
        lines.append(f"{k} = {v!r}".replace("'", '"') if not isinstance(v, list) else
                     f"{k} = [{', '.join(repr(x).replace(chr(39), chr(34)) for x in v)}]")
    return "\n".join(lines) + "\n"


def verdict(ds, **fields) -> str:
    study, claims = parse_claims(claim(**fields))
    (v,) = evaluate_claims(ds, claims, study=study)
    assert v.verdict in ("agrees", "disagrees", "inconclusive")
    return v.verdict


# -- each claim type, true and contradicted ------------------------------------------------
@pytest.mark.parametrize("fields, expected", [
    ({"type": "ordering", "mechanisms": ["good", "bad"]}, "agrees"),
    ({"type": "ordering", "mechanisms": ["bad", "good"]}, "disagrees"),  # negative control
    ({"type": "ordering", "mechanisms": ["np", "good", "bad"], "statistic": "median_error"}, "agrees"),
    ({"type": "ordering", "mechanisms": ["np", "bad", "good"], "statistic": "rmse"}, "disagrees"),
    ({"type": "ordering", "mechanisms": ["good", "twin"], "n": [1000]}, "inconclusive"),  # equal laws
    # error ratio bad/good = sqrt((1 + 9)/(1 + 1)) = 2.24 for the chi-like errors of d = 3
    ({"type": "ratio", "numerator": "bad", "denominator": "good", "min": 1.9, "max": 2.6}, "agrees"),
    ({"type": "ratio", "numerator": "bad", "denominator": "good", "min": 1.0, "max": 1.5}, "disagrees"),
    ({"type": "reaches", "mechanism": "fast", "n": [10_000, 100_000]}, "agrees"),
    ({"type": "reaches", "mechanism": "bad", "n": [10_000, 100_000]}, "disagrees"),
    # half at epsilon has the noise of full at 2 epsilon
    ({"type": "epsilon_factor", "mechanism": "half", "target": "full", "factor": 2.0, "tolerance": 0.25}, "agrees"),
    ({"type": "epsilon_factor", "mechanism": "full", "target": "half", "factor": 2.0, "tolerance": 0.25},
     "disagrees"),
    ({"type": "slope", "mechanism": "np", "min": -0.55, "max": -0.45}, "agrees"),
    ({"type": "slope", "mechanism": "np", "min": -1.05, "max": -0.95}, "disagrees"),
    # naive coverage of the non-private CI: noise sd equal to the OLS SE covers more than 3x it
    ({"type": "ordering", "mechanisms": ["good", "bad"], "statistic": "coverage"}, "agrees"),
    ({"type": "ordering", "mechanisms": ["bad", "good"], "statistic": "coverage"}, "disagrees"),
])
def test_claim_types_decide_both_ways(ds, fields, expected):
    assert verdict(ds, **fields) == expected


def test_verdict_numbers_and_markdown_table(ds):
    _, claims = parse_claims(claim(type="ratio", numerator="bad", denominator="good", min=1.9, max=2.6,
                                       n=[1000], epsilon=[1.0]))
    (v,) = evaluate_claims(ds, claims)
    (row,) = v.numbers
    assert row["a"] / row["b"] == pytest.approx(row["value"])
    assert row["lo"] < row["value"] < row["hi"] and row["holds"] is True
    assert row["value"] == pytest.approx(math.sqrt(5), rel=0.1)
    table = verdict_table([v]).splitlines()
    assert table[0].startswith("| claim | verdict | statement |") and len(table) == 3
    assert "**agrees**" in table[2] and "bad vs good, n=10^3, ε=1" in table[2]


def test_mcse_of_the_statistics_matches_the_diagnosands(ds):
    """The influence-value SE of the mean error is sd/sqrt(k); the RMSE's equals diagnose()'s
    delta-method SE on a one-coefficient store."""
    x = ds.error.sel(mechanism="bad", n=1000, epsilon=1.0).values
    v, psi = cell_statistic(x, "mean_error")
    assert v == pytest.approx(x.mean()) and np.std(psi, ddof=1) == pytest.approx(np.std(x, ddof=1))
    one = synthetic_dataset([SM("np", "nonprivate"), SM("k", "kng", lambda n, e: 1.0)], n=[100], replicates=300,
                            d=1, seed=3)
    d = one.kng.diagnose().sel(mechanism="k", n=100, epsilon=1.0, coef=0)
    r, psi = cell_statistic(one.error.sel(mechanism="k", n=100, epsilon=1.0).values, "rmse")
    assert r == pytest.approx(float(d.rmse)) and np.std(psi, ddof=1) / math.sqrt(300) == pytest.approx(
        float(d.rmse_se), rel=1e-6)


# -- bad claims: one line naming what is wrong and what is allowed ----------------------------
@pytest.mark.parametrize("text, match", [
    (claim(type="beats", mechanisms=["a", "b"]), r"claim 'c': unknown claim type 'beats'; allowed: ordering, ratio"),
    (claim(type="ordering", mechanisms=["a", "b"], margin=0.1), r"unknown field 'margin' for type 'ordering'; allowed:"),
    (claim(type="ordering", mechanisms=["a", "b"], statistic="mode"), r"unknown statistic 'mode'; allowed: mean_error"),
    (claim(type="ratio", numerator="a"), r"missing field 'denominator'"),
    (claim(type="ratio", numerator="a", denominator="b"), r"needs min, max or both"),
    (claim(type="ordering", mechanisms=["a"]), r"at least two labels"),
    (claim(type="ordering", mechanisms=["a", "b"]) + claim(type="ordering", mechanisms=["a", "b"]), r"duplicate id"),
    ("colour = 1\n" + claim(type="ordering", mechanisms=["a", "b"]), r"unknown top-level field 'colour'"),
    ("study = 'x'\n", r"no \[\[claims\]\] tables"),
])
def test_bad_claims_files_fail_in_one_line(text, match):
    with pytest.raises(ClaimsError, match=match) as info:
        parse_claims(text, source="f.toml")
    assert "\n" not in str(info.value)


def test_claims_that_do_not_fit_the_store(ds):
    with pytest.raises(ClaimsError, match=r"unknown mechanism label 'Linf'; the store's labels are np, good, twin, "
                                          r"bad, fast, half, full"):
        verdict(ds, type="ordering", mechanisms=["good", "Linf"])


@pytest.mark.parametrize("fields, match", [
    ({"type": "reaches", "mechanism": "good", "n": [123]}, r"n = 123 not in this store \(its n: 10\^2, 10\^3, "),
    ({"type": "reaches", "mechanism": "good", "epsilon": [3.0]}, r"ε = 3 not in this store \(its ε: "),
    ({"type": "epsilon_factor", "mechanism": "good", "target": "bad", "factor": 7.0}, r"no selected epsilon has 7"),
])
def test_claims_about_cells_a_reduced_store_lacks_are_inconclusive(ds, fields, match):
    (v,) = evaluate_claims(ds, parse_claims(claim(**fields))[1])
    assert v.verdict == "inconclusive" and re.search(match, v.summary), v.summary
    assert verdict(ds, type="reaches", mechanism="good") != "inconclusive"  # control: the cells it has


def test_claims_about_another_study(ds):
    study, claims = parse_claims('study = "other"\n' + claim(type="reaches", mechanism="good"))
    with pytest.raises(ClaimsError, match="about study 'other', the store holds study 'demo'"):
        evaluate_claims(ds, claims, study=study)


def test_default_claims_file_is_found_by_the_study_name(ds, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert default_claims_path(ds) is None
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "demo.claims.toml").write_text(claim(type="ordering", mechanisms=["good", "bad"]))
    assert default_claims_path(ds) == tmp_path / "workflows" / "demo.claims.toml"
    (v,) = ds.kng.check_claims()
    assert (v.id, v.verdict) == ("c", "agrees")
    with pytest.raises(ClaimsError, match="no claims file found for study 'nameless'"):
        ds.assign_attrs(title="nameless").kng.check_claims()


# -- the shipped claims fit their specs --------------------------------------------------
SHIPPED = sorted(WORKFLOWS.glob("*.claims.toml"))


def test_shipped_claims_exist():
    names = {p.name for p in SHIPPED}
    for study in ("kng_linear", "kng_quantile", "knorm_logistic", "knorm_linear_coverage", "knorm_randhie"):
        assert f"{study}.claims.toml" in names
    assert sum(len(parse_claims(p.read_text())[1]) for p in SHIPPED) >= 8


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_claims_name_their_specs_labels_and_grid(path):
    from kngflow.sweep import load_spec

    spec = load_spec(path.with_name(path.name.replace(".claims.toml", ".toml")))
    study, claims = parse_claims(path.read_text(), source=path.name)
    studies = (study,) if isinstance(study, str) else study
    assert studies[0] == spec.name  # the study first, then its variants (each a shipped spec)
    specs = [spec] + [load_spec(path.with_name(f"{name}.toml")) for name in studies[1:]]
    for c in claims:
        assert c.type in CLAIM_TYPES and c.statistic in STATISTICS and c.source and c.statement
        labels = list(c.fields.get("mechanisms", [])) + [c.fields[k] for k in
                                                          ("mechanism", "target", "numerator", "denominator")
                                                          if k in c.fields]
        for s in specs:
            assert set(labels) <= set(s.labels), (c.id, labels, s.name)
        assert set(c.n or ()) <= set(spec.n), c.id
        assert all(any(math.isclose(e, g) for g in spec.epsilon) for e in c.epsilon or ()), c.id


def test_a_claims_file_may_name_the_studys_variants_and_the_default_lookup_finds_it(ds, tmp_path, monkeypatch):
    from kngflow.analysis.claims import default_claims_path

    text = 'study = ["demo", "demo_hardened"]\n' + claim(type="reaches", mechanism="good")
    study, claims = parse_claims(text)
    assert study == ("demo", "demo_hardened")
    assert evaluate_claims(ds, claims, study=study)
    with pytest.raises(ClaimsError, match=r"about study one of \['x', 'y'\], the store holds study 'demo'"):
        evaluate_claims(ds, parse_claims('study = ["x", "y"]\n' + claim(type="reaches", mechanism="good"))[1],
                        study=("x", "y"))
    with pytest.raises(ClaimsError, match="study must be a string or a list of strings"):
        parse_claims("study = 3\n" + claim(type="reaches", mechanism="good"))
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "demo.claims.toml").write_text(text)
    monkeypatch.chdir(tmp_path)
    variant = ds.assign_attrs(title="demo_hardened")
    assert default_claims_path(variant).name == "demo.claims.toml"
    assert default_claims_path(ds.assign_attrs(title="unrelated")) is None


# -- the real CLI ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("claims")
    raw = synthetic_dataset(MECHS[:4], n=[100, 1000, 10_000], epsilon=[1.0], replicates=100, d=3, seed=5)
    raw.attrs["title"] = "demo"
    write_store(raw, tmp / "demo.zarr")
    return tmp / "demo.zarr"


def test_report_prints_and_writes_the_verdicts(store, tmp_path):
    (tmp_path / "demo.claims.toml").write_text(
        claim(type="ordering", mechanisms=["good", "bad"]) + claim(id="rev", type="ordering", mechanisms=["bad", "good"]))
    proc = kngflow_cli("report", store, "--html", "--claims", tmp_path / "demo.claims.toml")
    assert proc.returncode == 0, proc.stderr
    out = Path(f"{store}-report")  # the default: STORE-report beside the store
    # one line per file written, then the verdict counts: not the report itself
    assert proc.stdout.splitlines() == [f"wrote {out / name}" for name in ("error_vs_n.png", "report.md", "report.html")] + [
        "claims: 2 evaluated: 1 agrees, 1 disagrees, 0 inconclusive"], proc.stdout
    assert proc.stderr == ""
    text = (out / "report.md").read_text()
    assert "## Paper claims" in text and "agrees 1, disagrees 1, inconclusive 0" in text
    assert "| c | **agrees** |" in text and "| rev | **disagrees** |" in text
    html = (out / "report.html").read_text()
    assert "Paper claims" in html and '<strong class="disagrees">disagrees</strong>' in html


@pytest.mark.slow
def test_report_finds_the_study_claims_file_and_can_skip_it(store, tmp_path):
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "demo.claims.toml").write_text(claim(type="ordering", mechanisms=["good", "bad"]))
    proc = kngflow_cli("report", store, "--out", tmp_path / "r", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "| c | **agrees** |" in (tmp_path / "r" / "report.md").read_text()
    proc = kngflow_cli("report", store, "--out", tmp_path / "r2", "--no-claims", cwd=tmp_path)
    assert proc.returncode == 0 and "Paper claims" not in (tmp_path / "r2" / "report.md").read_text()


@pytest.mark.parametrize("text, message", [
    (claim(type="ordering", mechanisms=["good", "Linf"]),
     "kngflow: error: claim 'c': unknown mechanism label 'Linf'; the store's labels are np, good, twin, bad"),
    (claim(type="beats", mechanisms=["good", "bad"]), "unknown claim type 'beats'; allowed: ordering, ratio, reaches"),
    (None, "does not exist"),
])
def test_report_with_bad_claims_exits_2_and_writes_nothing(store, tmp_path, text, message):
    path = tmp_path / "bad.claims.toml"
    if text is not None:
        path.write_text(text)
    proc = kngflow_cli("report", store, "--out", tmp_path / "out", "--claims", path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert not (tmp_path / "out").exists()


def test_report_on_a_store_without_estimates_exits_2_and_writes_nothing(tmp_path):
    raw = synthetic_dataset(MECHS[:2], n=[100, 1000], replicates=10, d=2, seed=1).drop_vars("estimate")
    write_store(raw, tmp_path / "noest.zarr")
    proc = kngflow_cli("report", tmp_path / "noest.zarr", "--out", tmp_path / "out")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "has no variable 'estimate': the report needs 'error', 'estimate', 'theta_star', " \
                                "'done'" in lines[0], proc.stderr
    assert not (tmp_path / "out").exists()


def test_shipped_claims_file_parses_as_toml():
    for p in SHIPPED:
        assert "claims" in tomllib.loads(p.read_text())


def test_store_data_are_only_read(store):
    before = xr.open_zarr(store, consolidated=False).error.values.copy()
    evaluate_claims(xr.open_zarr(store, consolidated=False), parse_claims(claim(type="ordering",
                                                                                 mechanisms=["good", "bad"]))[1])
    np.testing.assert_array_equal(before, xr.open_zarr(store, consolidated=False).error.values)


def test_too_few_replicates_never_decide():
    """With 3 replicates a z-interval is meaningless: every comparison stays undecided."""
    raw = synthetic_dataset(MECHS[:4], n=[100, 1000], replicates=3, d=3, seed=9)
    for fields in ({"type": "ordering", "mechanisms": ["good", "bad"]},
                   {"type": "ordering", "mechanisms": ["bad", "good"]},
                   {"type": "slope", "mechanism": "np", "min": -0.55, "max": -0.45}):
        assert verdict(raw, **fields) == "inconclusive"
        # the cell says why: the count and the rule, never an empty "— [—, —]"
        (v,) = evaluate_claims(raw, parse_claims(claim(**fields))[1])
        assert re.search(r"(no interval|no slope) \(3 replicates", v.summary) and "needs ≥ 10)" in v.summary, v.summary
        assert "[—, —]" not in v.summary


def test_a_cell_without_finished_replicates_says_so():
    """A partial store: the cells of n = 1000 are not finished; the claim's cell names that."""
    raw = synthetic_dataset(MECHS[:4], n=[100, 1000], replicates=20, d=3, seed=9,
                            done=lambda lab, n, e, r: n == 100)
    (v,) = evaluate_claims(raw, parse_claims(claim(type="ordering", mechanisms=["good", "bad"]))[1])
    assert v.verdict == "inconclusive" and "n=10^3" in v.summary
    assert "no ratio (no finished replicates; needs ≥ 10)" in v.summary, v.summary


def test_an_undecided_claim_says_how_many_replicates_would_decide_it():
    """The summary of an inconclusive claim names the replicates per cell at which its interval
    would clear the bound it straddles; a store with that many (twice, for the estimate's own
    noise) decides it.  Control: a decided claim names no count."""
    fields = {"type": "ratio", "numerator": "bad", "denominator": "good", "min": 2.0, "max": 2.6,
              "n": [1000], "epsilon": [1.0]}  # the ratio is 2.24
    small = synthetic_dataset(MECHS, n=[1000], epsilon=[1.0], replicates=20, d=3, seed=5)
    study, claims = parse_claims(claim(**fields))
    (v,) = evaluate_claims(small, claims, study=study)
    assert v.verdict == "inconclusive", v.summary
    m = re.search(r"about ([\d,]+) replicates per cell would decide it", v.summary)
    assert m, v.summary
    needed = int(m.group(1).replace(",", ""))
    assert needed == v.numbers[0]["needed"] > 20
    big = synthetic_dataset(MECHS, n=[1000], epsilon=[1.0], replicates=2 * needed, d=3, seed=6)
    (decided,) = evaluate_claims(big, claims, study=study)
    assert decided.verdict == "agrees" and "would decide" not in decided.summary, decided.summary
