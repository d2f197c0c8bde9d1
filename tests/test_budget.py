"""``prove --budget``: N and the time limit sized to the verifier's measured cost (specviz.proof.budget),
and ``prove --vocab``'s ERROR line for a verifier that raises."""

from __future__ import annotations

import contextlib
import io
import json
import math
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from specviz import InputError, verify
from specviz.cli import EXIT_FAIL, EXIT_OK, EXIT_USAGE, main
from specviz.proof import budget as B
from specviz.proof.blackbox import blackbox_tests
from specviz.proof.prove import DEFAULT_N
from specviz.proof.scenarios import SCENARIOS, scenario_chains
from specviz.proof.stats import detectable_at
from tests.budget_verifiers import row_loop

pytestmark = pytest.mark.heavy  # prove runs through the CLI: left out of the quick subset

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["prove", *args])
    return code, out.getvalue(), err.getvalue()


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize(("text", "seconds"), [("120s", 120.0), ("2m", 120.0), ("1.5h", 5400.0), ("90", 90.0),
                                               ("0", 0.0), ("none", 0.0), (" 30 s", 30.0)])  # fmt: skip
def test_parse_budget(text, seconds):
    assert B.parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["fast", "-5s", "2 days", ""])
def test_parse_budget_refuses_nonsense_naming_the_flag(text):
    with pytest.raises(InputError, match="--budget"):
        B.parse_budget(text)


def test_on_grid_rounds_down_to_1_2_5():
    assert [B.on_grid(x) for x in (0.3, 1, 7, 19, 20, 49_999, 100_000, 299_999)] == [1, 1, 5, 10, 20, 20_000,
                                                                                       100_000, 200_000]  # fmt: skip


def test_a_row_loop_gets_an_n_that_fits_and_the_tv_it_can_see():
    names = ["reference", "bonus"]
    b = B.size_to_budget(row_loop, names, budget=6.0, n_max=DEFAULT_N, seed=0, timeout=60.0)
    assert b.error is None and set(b.per_sequence) == set(names)
    # A Python loop over rows costs well over a microsecond a sequence: N is cut, on the grid.
    assert B.MIN_N <= b.n < DEFAULT_N and b.n == B.on_grid(b.n)
    assert b.estimate <= B.SAFETY * (6.0 - b.pilot_seconds) + 1e-9
    # ... but not by more than one grid step: the next N up would not fit.
    up = next(g * 10**e for e in range(8) for g in B.GRID if g * 10**e > b.n)
    assert up * sum(b.per_sequence.values()) > B.SAFETY * (6.0 - b.pilot_seconds) or b.n == B.MIN_N
    for s in names:  # the detectable TV printed is the joint test's at that N
        law = scenario_chains(SCENARIOS[s])[0].joint_law(SCENARIOS[s].L)
        assert b.detectable[s] == pytest.approx(detectable_at(law, b.n))
    assert b.timeout is not None and b.timeout >= 60.0
    text = flat("\n".join(b.lines()))
    assert f"N = {b.n:,} sequences per case (cut from {DEFAULT_N:,} to fit)" in text
    assert f"{b.detectable_tv:.3g}" in text and f"--n {b.n} reproduces" in text


def test_the_package_verifier_keeps_the_default_n():
    # Negative control: a vectorized verifier fits 300,000 sequences a case in 120 s of CPU.
    b = B.size_to_budget(verify, ["reference", "bonus"], budget=B.DEFAULT_BUDGET, n_max=DEFAULT_N)
    assert b.n == DEFAULT_N and "cut from" not in flat("\n".join(b.lines()))


def test_a_verifier_that_raises_in_the_pilot_keeps_n_and_the_case_reports_it():
    from tests.budget_verifiers import raises

    b = B.size_to_budget(raises, ["reference"], budget=10.0, n_max=5000)
    assert b.n == 5000 and b.error and "out of cheese" in b.error


def test_prove_with_a_budget_prints_n_and_tv_and_gets_a_verdict():
    code, out, err = run("--verifier", "tests.budget_verifiers:row_loop", "--scenarios", "reference",
                         "--bugs", "none", "--budget", "4s")  # fmt: skip
    text = flat(out)
    assert "budget 4 s of CPU" in text and "smallest TV the joint test then detects" in text
    assert "ERROR" not in text and "CaseTimeout" not in text
    n = int(text.split("N = ")[1].split(" ")[0].replace(",", ""))
    assert n < DEFAULT_N and f"N = {n:,} sequences per case, seed 0" in text  # the table's N is the budget's
    assert code in (EXIT_OK, 3)  # a verdict: pass, or inconclusive with the N it needs


def test_an_explicit_n_is_kept_and_a_bad_budget_is_a_usage_error():
    code, out, _ = run("--verifier", "tests.budget_verifiers:row_loop", "--scenarios", "reference", "--bugs", "none",
                       "--n", "3000", "--budget", "1s")  # fmt: skip
    assert "of CPU: the pilot" not in out and "N = 3,000 sequences per case" in flat(out)
    code, _, err = run("--budget", "soon")
    assert code == EXIT_USAGE and "--budget" in err


def test_json_carries_the_budget():
    code, out, _ = run("--verifier", "tests.budget_verifiers:row_loop", "--scenarios", "reference", "--bugs", "none",
                       "--budget", "3s", "--json", "--quiet")  # fmt: skip
    rec = json.loads(out)
    assert rec["budget"]["n"] == rec["n"] and rec["budget"]["seconds"] == 3.0


def test_the_black_box_tests_stop_at_their_seconds():
    from specviz.proof.handover import CallSpec

    box = blackbox_tests(row_loop, V=500, K=2, n=10**6, seconds=1.0, spec=CallSpec("float64", "numpy"))
    assert 0 < box.rows < 10**6 and all(c.n <= box.rows for c in box.checks)


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_vocab_a_verifier_that_raises_is_an_error_line_not_a_traceback_dump(extra):
    r = subprocess.run([sys.executable, "-m", "specviz", "prove", "--quiet", "--verifier",
                        "tests.budget_verifiers:raises", "--vocab", "1000", *extra], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert r.returncode == EXIT_FAIL
    if extra:
        rec = json.loads(r.stdout)
        assert rec["verdict"] == "ERROR" and "out of cheese" in rec["reason"]
        return
    first = r.stdout.splitlines()[0]
    assert first.startswith("ERROR the black-box tests / tests.budget_verifiers:raises: RuntimeError: out of cheese")
    assert "budget_verifiers.py" in r.stdout and "blackbox.py" not in r.stdout  # the verifier's own frames
    assert "NOT OK" in r.stdout and r.stderr == ""


@pytest.mark.slow
def test_a_row_loop_at_the_default_budget_gets_a_verdict_within_five_minutes_of_cpu():
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([sys.executable, "-m", "specviz", "prove", "--quiet", "--verifier",
                        "tests.budget_verifiers:row_loop"], cwd=ROOT, capture_output=True, text=True,
                       timeout=1800)  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert r.returncode == EXIT_OK, r.stdout[-2000:]
    assert "ERROR" not in r.stdout and cpu < 300, cpu
    assert math.isfinite(float(flat(r.stdout).split("probability 0.99: ")[1].split(" ")[0]))


def test_row_loop_is_the_rule():
    # The fixture is correct: token for token the package's verifier on the same uniforms (its inverse CDF
    # counts the same way), so the budget tests time a correct verifier.
    from specviz import Uniforms

    rng = np.random.default_rng(3)
    Bn, K, V = 64, 3, 6
    P = rng.dirichlet(np.ones(V) * 0.5, size=(Bn, K + 1))
    Q = rng.dirichlet(np.ones(V) * 0.5, size=(Bn, K))
    X = np.array([[rng.choice(V, p=q) for q in row] for row in Q])
    J = rng.integers(0, K + 1, size=Bn)
    u = Uniforms(rng.random((Bn, K)), rng.random(Bn))
    mine, ref = row_loop(P, Q, X, J, uniforms=u), verify(P, Q, X, J, uniforms=u)
    assert (mine.num_tokens == ref.num_tokens).all()
    assert (mine.tokens == ref.tokens).mean() > 0.99  # an inverse CDF may round a boundary coin the other way
