"""prove holds the verifier under test to account (issue 21, point 3): exits, hangs, float tokens,
prints and writes into its inputs are each that case's failure, with exit status 1, in --json too.

The misbehaving verifiers are in tests/user_verifiers.py. Each test below fails on the harness
before this change (SystemExit left prove with status 0, a hang never returned, float tokens
were truncated and passed, prints broke --json, a write into an input went unnoticed) and
passes after. Small N: these tests are about the harness, not about power.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from specviz import verify
from specviz.cli import EXIT_FAIL, EXIT_OK, main
from specviz.errors import InputError
from specviz.proof import harness, prove

pytestmark = pytest.mark.heavy  # verifiers that hang, run to their time limit: left out of the quick subset

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--quiet", "--n", "2000", "--scenarios", "reference", "--bugs", "none"]


def run(*args: str) -> tuple[int, str, str]:
    """``prove`` in this process, its stdout and stderr captured."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["prove", *FAST, *args])
    return code, out.getvalue(), err.getvalue()


def only_case(out: str) -> dict:
    (case,) = json.loads(out)["cases"]
    return case


def test_system_exit_is_a_failure_with_status_1_in_json_too():
    code, out, _ = run("--verifier", "tests.user_verifiers:exits_zero", "--json")
    assert code == EXIT_FAIL
    doc = json.loads(out)
    assert doc["ok"] is False and doc["verdict"] == "FAIL"
    assert only_case(out)["verdict"] == "ERROR" and only_case(out)["error"].startswith("SystemExit")
    code, out, _ = run("--verifier", "tests.user_verifiers:exits_zero")
    assert code == EXIT_FAIL and "ERROR reference / tests.user_verifiers:exits_zero: SystemExit" in out


def test_keyboard_interrupt_still_stops_the_run():
    def interrupted(*a, **k):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        prove.run_case("reference", interrupted, n=100)


@pytest.mark.parametrize("name", ["sleeps", "busy_loop"])
def test_a_hanging_verifier_is_stopped_at_the_time_limit_and_the_case_named(name):
    t0 = time.monotonic()
    code, out, _ = run("--verifier", f"tests.user_verifiers:{name}", "--timeout", "1", "--json")
    took = time.monotonic() - t0
    assert code == EXIT_FAIL
    case = only_case(out)
    assert case["verdict"] == "ERROR"
    assert f"CaseTimeout: the case reference / tests.user_verifiers:{name} ran past its time limit of 1 s" in (
        case["error"]
    )
    assert took < 30, took  # stopped, not waited out (the sleep is an hour)


def test_the_time_limit_holds_outside_the_main_thread_too():
    """The app runs pages in worker threads, where no signal can be caught: the timer thread's
    asynchronous exception stops a busy loop there."""
    from tests.user_verifiers import busy_loop

    box: dict = {}
    t = threading.Thread(target=lambda: box.update(r=prove.run_case("reference", busy_loop, n=100, timeout=0.5)))
    t.start()
    t.join(30)
    assert not t.is_alive()
    assert box["r"].verdict == "ERROR" and "ran past its time limit of 0.5 s" in box["r"].error


def test_no_limit_leaves_a_slow_honest_case_alone():
    def slow(*a, **k):
        time.sleep(0.3)
        return verify(*a, **k)

    r = prove.run_case("reference", slow, n=200, timeout=None)
    assert r.error is None
    r = prove.run_case("reference", slow, n=200, timeout=0.1)  # the control: the same case with a limit
    assert r.verdict == "ERROR" and "time limit" in r.error


def test_an_enclosing_alarm_survives_a_case():
    """A time limit set by the caller (SIGALRM) is put back after the case, less the time spent."""
    import signal

    fired = []
    old = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 5.0)
        prove.run_case("reference", n=200, timeout=2)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < left < 5.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert not fired


def test_float_tokens_are_a_failure_not_truncated():
    code, out, _ = run("--verifier", "tests.user_verifiers:float_tokens", "--json")
    assert code == EXIT_FAIL
    case = only_case(out)
    assert case["verdict"] == "ERROR" and "integer tokens (an integer dtype)" in case["error"]
    assert "float64" in case["error"]
    code, out, _ = run("--verifier", "tests.user_verifiers:correct", "--json", "--n", "20000")  # the control
    assert code == EXIT_OK and only_case(out)["verdict"] == "pass"


def test_a_verifier_that_writes_into_its_input_gets_a_clear_error_naming_it():
    code, out, _ = run("--verifier", "tests.user_verifiers:renormalizes_in_place", "--json")
    assert code == EXIT_FAIL
    case = only_case(out)
    assert case["verdict"] == "ERROR"
    assert "a write into draft_probs" in case["error"] and "read-only" in case["error"]


def test_guard_names_each_argument_written_and_leaves_the_callers_arrays_unchanged():
    def writes_target(target_probs, draft_probs, draft_tokens, num_draft, *, uniforms=None):
        target_probs[0, 0, 0] = 1.0

    def writes_uniforms(target_probs, draft_probs, draft_tokens, num_draft, *, uniforms=None):
        uniforms.accept[:] = 0.0

    def reads(target_probs, draft_probs, draft_tokens, num_draft, *, uniforms=None):
        return float(np.sum(target_probs)) + float(np.sum(uniforms.accept))

    from specviz.verifiers.verify import Uniforms

    T, D = np.full((2, 3, 4), 0.25), np.full((2, 2, 4), 0.25)
    x, j = np.zeros((2, 2), np.int64), np.array([2, 1])
    u = Uniforms(np.full((2, 2), 0.5), np.full(2, 0.5))
    with pytest.raises(InputError, match="a write into target_probs"):
        harness.guard(writes_target)(T, D, x, j, uniforms=u)
    with pytest.raises(InputError, match=r"a write into uniforms\.accept"):
        harness.guard(writes_uniforms)(T, D, x, j, uniforms=u)
    assert (T == 0.25).all() and (u.accept == 0.5).all()  # the harness's own buffers are untouched
    assert harness.guard(reads)(T, D, x, j, uniforms=u) == pytest.approx(8.0)  # reading is fine: 6 + 2


def test_json_holds_nothing_but_json_whatever_the_verifier_prints():
    """In a fresh interpreter, so the write to file descriptor 1 reaches the real stdout."""
    r = subprocess.run([sys.executable, "-m", "specviz", "prove", *FAST, "--verifier", "tests.user_verifiers:prints",
                        "--json", "--n", "20000"], cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == EXIT_OK, r.stdout[-2000:] + r.stderr[-2000:]
    doc = json.loads(r.stdout)  # would raise on "debug: ..." before the JSON
    assert doc["ok"] is True
    assert "debug: verifying" in r.stderr and "debug from fd 1" in r.stderr


def test_system_exit_in_a_fresh_interpreter_exits_1():
    r = subprocess.run([sys.executable, "-m", "specviz", "prove", *FAST, "--verifier",
                        "tests.user_verifiers:exits_zero", "--json"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert r.returncode == EXIT_FAIL
    assert json.loads(r.stdout)["cases"][0]["verdict"] == "ERROR"


def test_timeout_argument_is_checked():
    code, _, err = run("--timeout", "-1")
    assert code == 2 and "--timeout" in err
