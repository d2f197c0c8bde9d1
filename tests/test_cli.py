"""`python -m specviz prove`: the exit status tells the truth, and a user's verifier can be tested."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from specviz.cli import main
from specviz.proof import scenarios
from specviz.proof.bugs import BUGS
from specviz.proof.scenarios import SCENARIOS

pytestmark = pytest.mark.heavy  # prove runs through the CLI: left out of the quick subset

ROOT = Path(__file__).resolve().parents[1]


def flat(text: str) -> str:
    """The output with its wrapping undone (the CLI wraps prose at 100 columns): one space between words."""
    return " ".join(text.split())


def prove_process(*args: str) -> subprocess.CompletedProcess:
    """The real entry point, ``python -m specviz prove``, in a fresh interpreter."""
    return subprocess.run([sys.executable, "-m", "specviz", "prove", "--quiet", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def prove(*args: str) -> subprocess.CompletedProcess:
    """The same command in this process (no interpreter start-up): ``cli.main`` with its output captured."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["prove", "--quiet", *args])
    return subprocess.CompletedProcess(["prove", *args], code, out.getvalue(), err.getvalue())


def test_json_output_and_exit_zero_for_the_correct_verifier():
    r = prove_process("--n", "50000", "--scenarios", "reference,ragged", "--bugs", "resample_from_p,wrong_bonus_row",
                      "--json")  # fmt: skip
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
    assert r.stdout.splitlines()[1].split() == ["scenario", "verifier", "p-value", "TV", "detect", "tokens", "exact",
                                                "1st-tok", "verdict"]  # fmt: skip
    assert "its statistic, dof and critical value are in --json" in flat(r.stdout)
    assert "no_bonus" in r.stdout and "caught" in r.stdout and "law OK: 1 case passes" in r.stdout
    assert "each of the 1 bugs run as negative controls was caught" in flat(r.stdout)


def test_user_verifier_correct_passes_with_negative_controls_beside_it():
    r = prove("--n", "50000", "--verifier", "tests.user_verifiers:correct", "--scenarios", "reference,zeros")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "tests.user_verifiers:correct" in r.stdout
    # The bugs ran on these very scenarios, and the output says which ran and what they showed.
    shown = [
        b for b in BUGS.values() if any(scenarios.can_show(b, scenarios.SCENARIOS[s]) for s in ("reference", "zeros"))
    ]
    assert f"Negative controls: {len(shown)} of {len(shown)} bugs run on these scenarios were caught" in flat(r.stdout)
    # wrong_bonus_row needs ragged rows and bonus_row_before L > K: neither was chosen.
    assert "not run: wrong_bonus_row, bonus_row_before" in flat(r.stdout)
    for b in ("resample_from_p", "shared_uniform", "no_bonus"):
        assert any(line.split()[:2] == ["reference", b] for line in r.stdout.splitlines())


def test_no_controls_is_said_plainly_and_never_called_caught():
    r = prove("--n", "50000", "--verifier", "tests.user_verifiers:correct", "--scenarios", "reference",
              "--bugs", "none", "--json")  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["negative_controls"]["run"] == [] and "NOT RUN" in out["negative_controls"]["note"]
    assert "caught" not in out["summary"] and all(not c["is_bug"] for c in out["cases"])
    t = prove("--n", "50000", "--scenarios", "reference", "--bugs", "none")
    assert t.returncode == 0 and "Negative controls: NOT RUN (--bugs none)" in flat(t.stdout)
    assert "caught" not in t.stdout.split("Negative controls")[1]


@pytest.mark.parametrize("name", ["broken", "crashes", "wrong_shape"])
def test_user_verifier_broken_exits_nonzero(name):
    r = prove("--n", "20000", "--verifier", f"tests.user_verifiers:{name}", "--scenarios", "reference",
              "--bugs", "none")  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("law FAIL: " if name == "broken" else "law ERROR: ") in r.stdout
    if name != "broken":
        assert "support not probed (the verifier raised in the suite)" in flat(r.stdout)


def test_a_crash_shows_the_verifiers_own_traceback():
    r = prove_process("--n", "1000", "--verifier", "tests.user_verifiers:crashes", "--scenarios", "reference",
                      "--bugs", "none")  # fmt: skip
    assert r.returncode == 1
    assert "Traceback (most recent call last)" in r.stdout and "in _inner_helper" in r.stdout
    assert 'raise RuntimeError("out of cheese")' in r.stdout
    j = prove("--n", "1000", "--verifier", "tests.user_verifiers:crashes", "--scenarios", "reference",
              "--bugs", "none", "--json")  # fmt: skip
    case = json.loads(j.stdout, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))["cases"][0]
    assert case["verdict"] == "ERROR" and "in _inner_helper" in case["traceback"]


def test_a_failure_explains_itself():
    r = prove("--verifier", "tests.user_verifiers:bonus_from_q", "--scenarios", "reference,bonus", "--bugs", "none")
    assert r.returncode == 1, r.stdout + r.stderr
    block = r.stdout.split("FAIL bonus / tests.user_verifiers:bonus_from_q:")[1]
    assert "judges drafts and replacements at positions 1..3, the bonus of full rows" in flat(block)
    assert "cells contributing most to chi-square" in block
    cell = block.split("cells contributing most to chi-square")[1].splitlines()[1]
    assert len(cell.split('"')[1].split()) == 4 and " vs " in cell  # "a b c d": observed vs expected
    assert "tokens per step: measured" in block and "vs exact" in block
    # No catalogue entry or family is a bonus drawn from q: the output says so rather than name the nearest.
    assert "no catalogue bug fits: the nearest, bonus_row_before" in flat(block)
    assert "no known family fits" in flat(block)
    assert "FAIL reference" not in r.stdout  # the reference scenario passes it: L = K hides the bonus


def test_bad_arguments_exit_2_with_a_message(capsys):
    for args, msg in [(["--verifier", "nomodule"], "--verifier: expected module:function"),
                      (["--verifier", "no_such_mod:f"], "--verifier: expected an importable module"),
                      (["--scenarios", "moon"], "--scenarios: expected one of reference"),
                      (["--bugs", "typo"], "--bugs: expected names from"),
                      (["--n", "0"], "--n: expected at least 1"),
                      (["--scenarios", "none"], "--scenarios: expected at least one case"),
                      (["--seed", "-1"], "--seed: expected a non-negative integer")]:  # fmt: skip
        code = main(["prove", "--quiet", *args])  # in-process: argument checks come before any run
        err = capsys.readouterr().err
        assert code == 2 and msg in err, (args, err)


def test_list_command_states_what_each_scenario_judges():
    r = subprocess.run([sys.executable, "-m", "specviz", "list"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and "shared_uniform" in r.stdout and "ragged" in r.stdout
    # Each entry is wrapped within 100 columns: its indented lines join the one above.
    lines = r.stdout.replace("\n ", " ").splitlines()
    judged = [" ".join(line.split()) for line in lines if "judges:" in line]
    assert len(judged) == len(SCENARIOS)
    assert sum("NOT the bonus of full rows" in line for line in judged) == 6
    assert any("the bonus of full rows (1 draft)" in line for line in judged)
    assert any("(all row shapes)" in line for line in judged)


def test_no_power_means_inconclusive_with_the_n_needed():
    # Three sequences cannot test a 64-cell law: even a broken verifier "passes", so inconclusive.
    r = prove("--n", "3", "--verifier", "tests.user_verifiers:broken", "--scenarios", "reference")
    assert r.returncode == 3, r.stdout
    assert "law inconclusive: N too small, need N >= " in flat(r.stdout) and "law OK" not in r.stdout
    need = int(r.stdout.split("need N >= ")[1].split()[0].replace(",", ""))
    assert "inconcl." in r.stdout and " pass " not in r.stdout  # the first-token column follows the rule too
    j = prove("--n", "3", "--verifier", "tests.user_verifiers:broken", "--scenarios", "reference", "--json")
    out = json.loads(j.stdout, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    assert out["verdict"] == "inconclusive" and out["needed_n"] == need > 3
    assert {c["verdict"] for c in out["cases"]} == {"inconclusive"}
    assert all(c["needed_n"] > 3 for c in out["cases"])
