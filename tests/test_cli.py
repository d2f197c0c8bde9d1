"""`python -m specviz prove`: the exit status tells the truth, and a user's verifier can be tested."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def prove(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specviz", "prove", "--quiet", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_json_output_and_exit_zero_for_the_correct_verifier():
    r = prove("--n", "50000", "--scenarios", "reference,ragged", "--bugs", "resample_from_p,wrong_bonus_row", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["ok"] is True
    verdicts = {(c["scenario"], c["verifier"]): c["verdict"] for c in out["cases"]}
    assert verdicts == {
        ("reference", "verify"): "pass",
        ("ragged", "verify"): "pass",
        ("reference", "resample_from_p"): "caught",
        ("ragged", "wrong_bonus_row"): "caught",
    }
    case = out["cases"][0]
    assert case["joint"]["dof"] > 40 and case["joint"]["critical_value"] > case["joint"]["statistic"]
    assert 0 < case["joint"]["detectable_tv"] < 0.05


def test_table_output_lists_every_column():
    r = prove("--n", "20000", "--scenarios", "textbook", "--bugs", "no_bonus")
    assert r.returncode == 0, r.stdout + r.stderr
    for col in ("chi2", "dof", "crit", "p-value", "TV", "detect TV", "tok/step", "theory", "verdict"):
        assert col in r.stdout
    assert "no_bonus" in r.stdout and "caught" in r.stdout and "OK:" in r.stdout


def test_user_verifier_correct_passes():
    r = prove("--n", "50000", "--verifier", "tests.user_verifiers:correct", "--scenarios", "reference,zeros")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "tests.user_verifiers:correct" in r.stdout


@pytest.mark.parametrize("name", ["broken", "crashes", "wrong_shape"])
def test_user_verifier_broken_exits_nonzero(name):
    r = prove("--n", "50000", "--verifier", f"tests.user_verifiers:{name}", "--scenarios", "reference")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "NOT OK" in r.stdout
    if name != "broken":
        assert "ERROR" in r.stdout


def test_bad_arguments_exit_2_with_a_message():
    for args, msg in [(["--verifier", "nomodule"], "--verifier: expected module:function"),
                      (["--verifier", "no_such_mod:f"], "--verifier: expected an importable module"),
                      (["--scenarios", "moon"], "scenario: expected one of reference"),
                      (["--bugs", "typo"], "bugs: expected names from"),
                      (["--n", "0"], "--n: expected at least 1"),
                      (["--scenarios", "none"], "--scenarios: expected at least one case"),
                      (["--seed", "-1"], "--seed: expected a non-negative integer")]:  # fmt: skip
        r = prove(*args)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)


def test_list_command():
    r = subprocess.run([sys.executable, "-m", "specviz", "list"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and "shared_uniform" in r.stdout and "ragged" in r.stdout


def test_a_pass_with_no_power_is_not_ok():
    # Three sequences cannot test a 64-cell law: even a broken verifier "passes", so not OK.
    r = prove("--n", "3", "--verifier", "tests.user_verifiers:broken", "--scenarios", "reference")
    assert r.returncode == 1 and "too small for the test to detect anything" in r.stdout, r.stdout
