"""The sweep's progress line (issue 18.6): steps done and time left on stderr, silent with --quiet, never in --json.

The sweep prints a line every PROGRESS_EVERY seconds (5 s, like the paired test's); here the
interval is set to 0 so that a short run prints one per step, and to 1e9 as the control that
prints none.
"""

from __future__ import annotations

import json
import re

import pytest

from specviz import cli
from specviz.proof import sweep
from tests import user_verifiers as uv

LINE = re.compile(r"^sweep over the uniforms: (\d+\.\d) of at most (\d+) steps, about (\d+) s left at most$")
ARGS = ["prove", "--verifier", "tests.user_verifiers:engine_one_minus_u", "--vocab", "1000", "--tv", "0.01"]


def test_the_sweep_reports_steps_done_and_time_left():
    lines: list[str] = []
    s = sweep.sweep(uv.engine_one_minus_u, V=1000, rows=2, seed=0, progress=lines.append, every=0.0)
    assert s.passed and lines
    done = []
    for line in lines:
        m = LINE.match(line)
        assert m, line
        assert int(m.group(2)) == 6  # 3 steps per row, 2 rows
        done.append(float(m.group(1)))
    assert done == sorted(done) and 0 < done[0] and done[-1] <= 6
    assert len(lines) > len(s.steps)  # the draw steps report inside themselves, cut by cut
    assert max(len(line) for line in lines) < 100


def test_no_line_before_the_interval_and_none_without_a_callback():
    # V = 1000, one row: a sweep of a second's CPU (V = 500's row measures five times as long) that
    # prints 11 lines at every=0.0, so the empty list below is the interval's doing.
    lines: list[str] = []
    sweep.sweep(uv.engine_one_minus_u, V=1000, rows=1, seed=0, progress=lines.append, every=1e9)
    assert lines == []
    assert sweep.sweep(uv.engine_one_minus_u, V=1000, rows=1, seed=0).passed  # progress=None: nothing to call


def prove(capsys: pytest.CaptureFixture, *extra: str) -> tuple[int, str, str]:
    rc = cli.main([*ARGS, *extra])
    out, err = capsys.readouterr()
    return rc, out, err


def test_prove_vocab_prints_it_on_stderr_not_in_json_and_not_with_quiet(monkeypatch, capsys):
    monkeypatch.setattr(sweep, "PROGRESS_EVERY", 0.0)
    # Where the lines go is the CLI's part: one swept row instead of prove's two (the sweep is most of
    # a run's CPU; its steps and lines are the two tests above).
    from specviz.proof import ship

    whole = ship.sweep
    monkeypatch.setattr(ship, "sweep", lambda *a, **k: whole(*a, **{**k, "rows": 1}))
    rc, out, err = prove(capsys, "--json")
    assert rc == 0
    record = json.loads(out)  # stdout is the JSON alone
    assert record["verdict"] == "PASS (law)" and record["sweep"]["passed"] and record["paired"]["mismatches"] > 0
    assert "sweep over the uniforms:" not in out
    assert [ln for ln in err.splitlines() if LINE.match(ln)], err
    rc, out, err = prove(capsys)  # the text report: the lines stay on stderr too
    assert rc == 0 and "PASS (law)" in out and "s left" not in out
    assert [ln for ln in err.splitlines() if LINE.match(ln)], err
    rc, out, err = prove(capsys, "--json", "--quiet")
    assert rc == 0 and json.loads(out)["verdict"] == "PASS (law)"
    assert "sweep over the uniforms:" not in err and "s left" not in err


def test_json_record_of_a_failing_verifier_says_where():
    from specviz.proof import ship

    r = ship.prove_shipped(uv.engine_bf16_q, V=2000, K=4, tv=0.01)
    rec = json.loads(json.dumps(ship.record(r), allow_nan=False))
    assert rec["verdict"] == "FAIL" and not rec["sweep"]["passed"]
    assert any(not s["passed"] and s["part"] == "accept" for s in rec["sweep"]["steps"])
