"""Real data sets (statsmodels' randhie and fair): preprocessing, the problems' dataset
option, spec errors, and reduced runs of workflows/knorm_randhie.toml and
workflows/logistic_fair.toml through the real CLI."""


import numpy as np
import pytest
import statsmodels.api as sm

from testkit import WORKFLOWS, kngflow_cli, reduced_workflow, run_and_report
from kngflow.api import DATASETS, get_mechanism, get_problem, load_dataset
from kngflow.problems.datasets import truncate_and_scale
from kngflow.models.linear.problem import dataset_stats
from kngflow.models.logistic.problem import dataset_data
from kngflow.sweep import SpecError, load_spec, parse_spec


RANDHIE_COVARIATES = ["lncoins", "idp", "lpi", "fmde", "physlm", "disea", "hlthg", "hlthf", "hlthp"]
FAIR_RANGES = {"rate_marriage": (1, 5), "age": (17.5, 42), "yrs_married": (0.5, 23), "religious": (1, 4),
               "educ": (9, 20)}


def _scaled(v, lo, hi):
    return 2 * (np.clip(v, lo, hi) - lo) / (hi - lo) - 1


# ----------------------------------------------------------------------------- preprocessing
def test_randhie_preprocessing_is_section_6_3():
    """log(1 + mdvis) on 9 covariates plus the intercept; every variable truncated at its
    0.0001/0.9999 quantiles and mapped onto [-1, 1] (recomputed here from the raw table)."""
    from statsmodels.datasets import randhie

    df = randhie.load_pandas().data
    data = load_dataset("randhie")
    assert data.problem == "linear" and DATASETS["randhie"] == "linear"
    assert data.X.shape == (20_190, 10) and data.y.shape == (20_190,)
    assert data.columns == ("const", *RANDHIE_COVARIATES)
    np.testing.assert_array_equal(data.X[:, 0], 1.0)
    assert data.X.min() >= -1.0 and data.X.max() <= 1.0
    assert data.y.min() == -1.0 and data.y.max() == 1.0  # in [-y_bound, y_bound], y_bound = 1
    for j, c in enumerate(RANDHIE_COVARIATES, start=1):
        v = df[c].to_numpy(float)
        lo, hi = np.quantile(v, [0.0001, 0.9999])
        assert data.ranges[c] == (lo, hi)
        np.testing.assert_allclose(data.X[:, j], _scaled(v, lo, hi), atol=1e-14)
        assert data.X[:, j].min() == -1.0 and data.X[:, j].max() == 1.0
    r = np.log1p(df["mdvis"].to_numpy(float))
    lo, hi = np.quantile(r, [0.0001, 0.9999])
    assert hi < r.max()  # the truncation bites: the largest counts are clipped
    np.testing.assert_allclose(data.y, _scaled(r, lo, hi), atol=1e-14)
    assert not data.private_preprocessing and "WITHOUT privacy" in data.caveat


def test_fair_preprocessing_uses_public_code_ranges():
    from statsmodels.datasets import fair

    df = fair.load_pandas().data
    data = load_dataset("fair")
    assert data.problem == "logistic" and data.X.shape == (6366, 6)
    assert data.columns == ("const", *FAIR_RANGES)
    X = np.column_stack([np.ones(len(df))] + [_scaled(df[c].to_numpy(float), lo, hi) for c, (lo, hi) in FAIR_RANGES.items()])
    np.testing.assert_allclose(data.X, X, atol=1e-14)
    assert data.X.min() >= -1.0 and data.X.max() <= 1.0
    np.testing.assert_array_equal(data.y, (df["affairs"] > 0).astype(float))
    assert data.private_preprocessing and "no preprocessing step reads the data" in data.caveat


def test_truncate_and_scale():
    v = np.arange(10_001, dtype=float)  # quantiles 1 and 9999
    s, (lo, hi) = truncate_and_scale(v)
    assert (lo, hi) == (1.0, 9999.0) and s[0] == s[1] == -1.0 and s[-1] == s[-2] == 1.0
    with pytest.raises(ValueError, match="quantiles coincide"):
        truncate_and_scale(np.zeros(100))


def test_data_are_cached_read_only_and_never_copied():
    a = load_dataset("randhie")
    assert load_dataset("randhie") is a
    for arr in (a.X, a.y, load_dataset("fair").X, load_dataset("fair").y):
        assert not arr.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            arr[0] = 0.0
    lin = get_problem("linear", dataset="randhie")
    s1 = lin.simulate(20_190, np.random.default_rng(1))
    assert s1 is lin.simulate(20_190, np.random.default_rng(2)) is dataset_stats("randhie")
    assert not s1.G.flags.writeable and not s1.c.flags.writeable
    logit = get_problem("logistic", dataset="fair")
    d1 = logit.simulate(6366, np.random.default_rng(1))
    assert d1 is logit.simulate(6366, np.random.default_rng(2)) is dataset_data("fair")
    assert d1.X is load_dataset("fair").X  # no copy


# ----------------------------------------------------------------------------- problems
def test_linear_dataset_problem_reference_is_statsmodels_ols():
    prob = get_problem("linear", dataset="randhie")
    data = load_dataset("randhie")
    assert prob.d == 10 and prob.protocol == "public_bound" and prob.y_bound == 1.0
    np.testing.assert_allclose(prob.theta_star, sm.OLS(data.y, data.X).fit().params, rtol=0, atol=1e-10)
    stats = prob.simulate(20_190, np.random.default_rng(0))
    assert stats.n == 20_190 and stats.scale == 1.0
    rng = np.random.default_rng(3)
    assert prob.error(get_mechanism("linear", "nonprivate", hardened=False).release(stats, 1.0, rng).estimate) == 0.0
    # every norm and estimator of the study releases on the read-only statistics
    for norm in ("l1", "linf", "kt"):
        for est in ("pinv", "ridge"):
            rel = get_mechanism("linear", "ss", hardened=False, norm=norm, estimator=est).release(stats, 4.0, rng)
            assert np.isfinite(prob.error(rel.estimate))
    assert "WITHOUT privacy" in prob.caveats and "non-private OLS estimate" in prob.caveats


def test_logistic_dataset_problem_reference_is_statsmodels_logit():
    prob = get_problem("logistic", dataset="fair")
    data = load_dataset("fair")
    assert prob.d == 6
    np.testing.assert_allclose(prob.theta_star, sm.Logit(data.y, data.X).fit(disp=0).params, atol=1e-6)
    d = prob.simulate(6366, np.random.default_rng(0))
    rng = np.random.default_rng(4)
    assert prob.error(get_mechanism("logistic", "nonprivate", hardened=False).release(d, 1.0, rng).estimate) == 0.0
    # the study's mechanisms never write the (read-only) data
    for kind, opts in [("objective_ext", {"norm": "linf", "q": 0.85}), ("objective", {}), ("output", {}),
                       ("objective_chaudhuri", {}), ("noisy_gd", {"noise": "gamma"}),
                       ("noisy_gd", {"noise": "gaussian", "delta": 1e-5}), ("dpsgd", {"delta": 1e-5})]:
        rel = get_mechanism("logistic", kind, hardened=False, **opts).release(d, 1.0, rng)
        assert np.isfinite(prob.error(rel.estimate)), kind
    assert "public code ranges" in prob.caveats


@pytest.mark.parametrize("problem, options, match", [
    ("linear", {"dataset": "housing"}, r"^dataset must be one of \['randhie'\] for problem 'linear', got 'housing'$"),
    ("linear", {"dataset": "fair"}, r"^dataset must be one of \['randhie'\] for problem 'linear', got 'fair'$"),
    ("logistic", {"dataset": "randhie"}, r"^dataset must be one of \['fair'\] for problem 'logistic', got 'randhie'$"),
    ("linear", {"dataset": "randhie", "d": 3}, r"^d must be omitted or 10 with dataset 'randhie', got 3$"),
    ("linear", {"dataset": "randhie", "theta_star": [0.0] * 10}, r"^theta_star must be omitted with dataset"),
    ("linear", {"dataset": "randhie", "protocol": "paper"}, r"^protocol must be 'public_bound' \(or omitted\)"),
    ("linear", {"dataset": "randhie", "y_bound": 2.0}, r"^y_bound must be 1 \(or omitted\) with dataset 'randhie'"),
    ("logistic", {"dataset": "fair", "beta": [1.0] * 6}, r"^beta must be omitted with dataset 'fair'"),
])
def test_dataset_option_errors(problem, options, match):
    with pytest.raises(ValueError, match=match):
        get_problem(problem, **options)


def test_simulated_defaults_unchanged():
    prob = get_problem("linear")
    assert prob.d == 12 and prob.protocol == "paper" and prob.dataset is None
    assert get_problem("logistic").d == 7


# ----------------------------------------------------------------------------- specs
def _spec(problem="linear", dataset="randhie", n=20_190) -> str:
    mech = "ss" if problem == "linear" else "objective_ext"
    return (f'seed = 1\n[problem]\nname = "{problem}"\ndataset = "{dataset}"\n'
            f'[grid]\nn = [{n}]\nepsilon = [1.0]\nreplicates = 2\n'
            f'[[mechanisms]]\nlabel = "m"\nkind = "{mech}"\n')


@pytest.mark.parametrize("text, match", [
    (_spec(n=1000), r"^grid\.n\[0\]: n must be 20190, the number of rows of dataset 'randhie', got n=1000$"),
    (_spec("logistic", "fair", 6000), r"^grid\.n\[0\]: n must be 6366, the number of rows of dataset 'fair', got n=6000$"),
    (_spec(dataset="housing"), r"^problem\.dataset: dataset must be one of \['randhie'\] for problem 'linear', got 'housing'$"),
])
def test_spec_errors_name_the_field(text, match):
    with pytest.raises(SpecError, match=match):
        parse_spec(text)


def test_valid_dataset_specs_parse():
    assert parse_spec(_spec()).problem().d == 10
    assert parse_spec(_spec("logistic", "fair", 6366)).problem().d == 6


@pytest.mark.parametrize("text, field", [(_spec(n=1000), "grid.n[0]"), (_spec(dataset="housing"), "problem.dataset")])
def test_cli_spec_error_is_one_line_exit_2(tmp_path, text, field):
    spec = tmp_path / "bad.toml"
    spec.write_text(text)
    proc = kngflow_cli("run", spec, "--store", tmp_path / "s.zarr", "--workers", 1, "--no-dashboard", process=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and f"{field}: " in proc.stderr, proc.stderr
    assert "20190" in proc.stderr or "['randhie']" in proc.stderr
    assert not (tmp_path / "s.zarr").exists()


# ----------------------------------------------------------------------------- workflows
def test_knorm_randhie_is_figure_4():
    spec = load_spec(WORKFLOWS / "knorm_randhie.toml")
    prob = spec.problem()
    assert prob.name == "linear" and prob.dataset == "randhie" and prob.d == 10
    assert list(spec.n) == [20_190] and len(spec.replicates) == 1000
    assert list(spec.epsilon) == [2.0**k for k in range(-4, 5)]
    mechs = spec.build_mechanisms()
    for label, norm in {"L1": "l1", "Linf": "linf", "K_T": "kt"}.items():
        assert mechs[label].kind == "ss" and mechs[label].norm == norm and mechs[label].estimator == "pinv"
        assert mechs[f"{label}_ridge"].norm == norm and mechs[f"{label}_ridge"].estimator == "ridge"
    assert mechs["nonprivate"].kind == "nonprivate"


def test_logistic_fair_spec():
    spec = load_spec(WORKFLOWS / "logistic_fair.toml")
    prob = spec.problem()
    assert prob.name == "logistic" and prob.dataset == "fair" and prob.d == 6
    assert list(spec.n) == [6366] and len(spec.replicates) == 200
    mechs = spec.build_mechanisms()
    assert {(mechs[m].norm, mechs[m].q) for m in ("L1", "L2", "Linf", "Linf_q085")} == {
        ("l1", 0.5), ("l2", 0.5), ("linf", 0.5), ("linf", 0.85)}


@pytest.mark.slow
def test_knorm_randhie_reduced_end_to_end(tmp_path, study_cluster):
    spec = reduced_workflow(tmp_path, "knorm_randhie", [
        ("epsilon = [0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]", "epsilon = [1.0, 8.0]"),
        ("replicates = 1000", "replicates = 30"),
    ])
    ds, out = run_and_report(tmp_path, spec, study_cluster)
    np.testing.assert_array_equal(ds["theta_star"].values, get_problem("linear", dataset="randhie").theta_star)
    assert float(abs(ds["error"].sel(mechanism="nonprivate")).max()) == 0.0
    med = ds["error"].median("replicate").sel(n=20_190)
    for m in ("L1", "Linf", "K_T"):
        assert float(med.sel(mechanism=m, epsilon=8.0)) < float(med.sel(mechanism=m, epsilon=1.0))
    assert "WITHOUT privacy" in ds.attrs["caveats"]
    assert ds.attrs["reference"] == "the non-private estimate"
    assert (out / "error_vs_epsilon.png").stat().st_size > 10_000
    report = (out / "report.md").read_text()
    assert "error_vs_epsilon.png" in report and "| K_T_ridge |" in report


@pytest.mark.slow
def test_logistic_fair_reduced_end_to_end(tmp_path, study_cluster):
    spec = reduced_workflow(tmp_path, "logistic_fair", [
        ("epsilon = [0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0]", "epsilon = [0.5, 4.0]"),
        ("replicates = 200", "replicates = 4"),
        ('[[mechanisms]]\nlabel = "dpsgd"\nkind = "dpsgd"\ndelta = 1e-5\n', ""),  # its accountant: ~10 s
    ])
    ds, out = run_and_report(tmp_path, spec, study_cluster)
    np.testing.assert_allclose(ds["theta_star"].values, get_problem("logistic", dataset="fair").theta_star)
    assert float(abs(ds["error"].sel(mechanism="nonprivate")).max()) == 0.0
    assert "public code ranges" in ds.attrs["caveats"]
    assert (out / "error_vs_epsilon.png").stat().st_size > 10_000
    assert "| noisy_gd_gauss (ε, δ=1e-05) |" in (out / "report.md").read_text()
