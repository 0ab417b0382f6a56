"""``kngflow audit``: the real command prints the bound, the pair and a verdict."""

import pytest

from testkit import kngflow_cli

LEAK_PAIR = "14*(1,-0.5,-1) + (1,-1,1) -> (1,1,-1)"


def test_audit_passes_and_prints_bound_pair_verdict():
    # unhardened: the exact sampler, whose tries are the side channel checked below
    out = kngflow_cli("audit", "kng", "--problem", "linear", "--option", 'norm="linf"', "--option", "hardened=false",
                      "--draws", "2000", "--pair", LEAK_PAIR,
                      "--side-channel", "--no-progress")
    assert out.returncode == 0, out.stderr
    assert "exact audit of KNG(norm='linf'" in out.stdout
    assert "black-box audit" in out.stdout and "privacy loss lower bound" in out.stdout
    assert f"pair: {LEAK_PAIR}" in out.stdout
    assert "field steps: lower bound" in out.stdout and "DATA-DEPENDENT" in out.stdout
    assert out.stdout.strip().endswith("verdict: PASS (declared epsilon=1)")


@pytest.mark.slow
def test_audit_flags_negative_control_and_nonprivate():
    out = kngflow_cli("audit", "exponential", "--problem", "linear", "--run-epsilon", "2", "--draws", "200", "--no-progress",
                      "--pair", "5*(-1,1,1) + 10*(1,-1,-1) + (1,-1,1) -> (1,-1,-1)")
    assert out.returncode == 1 and "verdict: FLAGGED by exact audit" in out.stdout
    out = kngflow_cli("audit", "nonprivate", "--problem", "linear", "--draws", "500", "--no-progress", "--pair", LEAK_PAIR)
    assert out.returncode == 1 and "FLAGGED by black-box audit" in out.stdout


def test_audit_objective_uses_the_closed_form_noise_audit():
    out = kngflow_cli("audit", "objective_ext", "--problem", "linear", "--option", "norm=l2", "--option", "q=0.25",
                      "--draws", "300",
                      "--no-progress", "--pair", LEAK_PAIR)
    assert out.returncode == 0 and "knorm audit of ExtendedObjectivePerturbation(norm='l2', q=0.25" in out.stdout


@pytest.mark.parametrize("args, message", [
    (["kng", "--problem", "linear", "--epsilon", "0"], "--epsilon must be > 0"),
    (["kng", "--problem", "linear", "--epsilon", "abc"], "--epsilon must be a number"),
    (["kng", "--problem", "linear", "--draws", "10"], "--draws must be >= 100"),
    (["kng", "--problem", "linear", "--option", "norm=l7"], "norm must be one of"),
    (["laplace", "--problem", "linear"], "mechanism kind must be one of"),
    (["kng", "--problem", "poisson"], "problem must be one of"),
    (["kng", "--problem", "linear", "--problem-option", "protocol=secret"], "protocol must be one of"),
    (["kng", "--problem", "linear", "--pair", "(1,2) -> (1,2,3)"], "must hold 3 finite numbers"),
    (["objective_ext", "--problem", "linear", "--option", "q=2"], "q must lie in the open interval"),
])
def test_audit_bad_input_one_line_exit_2(args, message):
    out = kngflow_cli("audit", *args)
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith("kngflow audit: error:")


def test_audit_needs_a_problem_and_takes_its_options_generically():
    out = kngflow_cli("audit", "kng", "--draws", "200", "--no-progress")
    assert out.returncode == 2 and "the following arguments are required: --problem" in out.stderr
    for flag in (["--norm", "linf"], ["--d", "3"], ["--protocol", "paper"], ["--q", "0.5"]):
        out = kngflow_cli("audit", "kng", "--problem", "linear", *flag)
        assert out.returncode == 2 and "unrecognized arguments" in out.stderr, flag
    # the problem's audit defaults (linear: d=2, public_bound, y_bound=1) under --problem-option
    out = kngflow_cli("audit", "ss", "--problem", "linear", "--problem-option", "d=3", "--option", "norm=kt",
                      "--draws", "200", "--no-progress", "--pair", "3*(1,0,0,0) + (1,1,1,1) -> (1,-1,-1,-1)")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "statistic audit (K-norm noise, closed form) of SufficientStatistics(norm='kt'" in out.stdout


CAL = ("kngflow.audit.calibration:LaplaceMean", "--problem", "kngflow.audit.calibration:Interval", "--option",
       "factor=0.7")


def test_default_draws_fit_the_time_budget_and_given_draws_are_kept():
    # no time left: the default draws fall to the fewest, and the audit says so
    out = kngflow_cli("audit", *CAL, "--time-budget", "0", "--no-progress")
    assert out.returncode in (0, 1), out.stderr
    assert out.stdout.startswith("draws: 1000 releases per data set, not 50000"), out.stdout
    assert "--time-budget" in out.stdout.splitlines()[0]
    # --draws is drawn as given, whatever the budget
    out = kngflow_cli("audit", *CAL, "--draws", "2000", "--time-budget", "0", "--no-progress")
    assert out.returncode in (0, 1), out.stderr
    assert not out.stdout.startswith("draws:") and "with these draws" in out.stdout
    out = kngflow_cli("audit", *CAL, "--time-budget", "-1")
    assert out.returncode == 2 and "--time-budget must be >= 0" in out.stderr


def test_progress_off_a_terminal_has_no_carriage_returns():
    # stderr is a pipe here, as in a batch job's log: no tqdm bar, no "\r"
    out = kngflow_cli("audit", *CAL, "--draws", "2000")
    assert out.returncode in (0, 1), out.stderr
    assert "\r" not in out.stderr and "\r" not in out.stdout


def test_plain_progress_lines(capsys):
    from kngflow.audit.command import _Lines

    with _Lines(200, "release", interval=0.0) as bar:
        bar.update(50)
        bar.update(150)
    err = capsys.readouterr().err
    assert "\r" not in err and err.splitlines()[-1].startswith("audit: 200/200 releases (100%)")


@pytest.mark.slow
def test_the_side_channel_step_runs_at_the_run_epsilon(capsys):
    """``--run-epsilon 2`` reaches the side-channel step (it audits the black-box step's pair
    at the run epsilon and the claim's delta): its record test flags the 2 epsilon control;
    at the declared epsilon it passes (the control)."""
    from kngflow.cli import main

    args = ["audit", "kng", "--problem", "mean", "--option", "norm=linf", "--side-channel", "--draws", "5000",
            "--no-progress"]
    assert main([*args, "--run-epsilon", "2"]) == 1
    out = capsys.readouterr().out
    side = out[out.index("side-channel audit of"):]
    assert "run at epsilon=2" in side.splitlines()[0] and "FLAGGED" in side.splitlines()[1], side
    assert "side-channel" in out.strip().splitlines()[-1]
    assert main(args) == 0
    out = capsys.readouterr().out
    side = out[out.index("side-channel audit of"):]
    assert "PASS" in side.splitlines()[1] and out.strip().endswith("verdict: PASS (declared epsilon=1)"), side
