"""Verdicts that mean something (issue 7, items 3 and 9): no verdict without power, and a
failing verdict that explains itself (cells, tokens per step, nearest known bug, traceback)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specviz.proof import stats
from specviz.proof.bugs import BUGS
from specviz.proof.prove import plan, run_case, run_suite
from specviz.proof.report import case_record, top_cells
from specviz.proof.scenarios import SCENARIOS, cell_tokens
from tests import user_verifiers as uv

# --- no verdict without power ----------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 5, 30, 1000])
def test_small_n_is_inconclusive_never_pass_or_fail(n):
    res = run_case("reference", n=n, seed=0)
    assert res.verdict == "inconclusive", (res.joint, res.tokens)
    assert res.needed_n is not None and res.needed_n > n
    assert res.needed_n >= stats.needed_n(res.law)  # the joint test's own need is a lower bound
    bug = run_case("reference", bug=BUGS["resample_from_p"], n=n, seed=0)
    assert bug.verdict == "inconclusive"  # a bug is neither caught nor missed without power


def test_tokens_test_needs_rounds_before_it_speaks():
    # At N = 20 the tokens z-test has about 30 rounds: below MIN_ROUNDS it is inconclusive, even
    # where its z would "fail" (the old rule divided by a standard error floored to 1e-12).
    res = run_case("reference", n=20, seed=0)
    assert res.tokens.rounds < stats.MIN_ROUNDS and not res.tokens.conclusive


def test_needed_n_is_enough_and_half_of_it_is_not():
    small = run_case("reference", n=2000, seed=1)
    need = small.needed_n
    assert small.verdict == "inconclusive" and 5000 < need < 50_000
    assert run_case("reference", n=int(1.1 * need), seed=1).verdict == "pass"
    assert run_case("reference", n=need // 2, seed=1).verdict == "inconclusive"


def test_an_impossible_sample_is_a_certain_fail_at_any_n():
    # coin_atom_at_zero accepts, with probability 0.05, drafts the target gives probability 0.
    res = run_case("zeros", uv.coin_atom_at_zero, n=300, seed=0, name="atom")
    assert res.joint.detectable_tv > stats.MIN_TV  # no power to see a shift at this N ...
    assert res.joint.impossible > 0  # ... but it emitted tokens the target cannot produce
    assert res.verdict == "FAIL"
    ok = run_case("zeros", n=300, seed=0)  # negative control: the correct rule at the same N
    assert ok.joint.impossible == 0 and ok.verdict == "inconclusive"


def test_suite_is_inconclusive_with_the_n_it_needs():
    suite = run_suite(plan(["reference", "bonus"], ["resample_from_p"]), n=500, seed=0)
    assert suite.verdict == "inconclusive" and not suite.ok and not suite.failures
    assert suite.needed_n == max(r.needed_n for r in suite.results)
    big = run_suite(plan(["reference"], ["resample_from_p"]), n=100_000, seed=0)
    assert big.verdict == "ok" and big.needed_n is None


# --- a failing verdict explains itself ---------------------------------------------------------------


def test_cell_tokens_is_base_v_order():
    for code in range(64):
        assert cell_tokens(code, 4, 3) == " ".join(map(str, np.unravel_index(code, (4, 4, 4))))


def test_top_cells_are_the_largest_chi_square_terms():
    law = np.array([[0.5, 0.0], [0.25, 0.25]])
    obs = np.array([40, 3, 30, 27], dtype=float)  # 3 samples where the law is 0
    cells = top_cells(obs, law, k=3)
    assert cells[0].tokens == "0 1" and math.isinf(cells[0].contribution) and cells[0].observed == 3
    e = 100 * law.ravel()
    terms = (obs - e) ** 2 / np.where(e > 0, e, 1)
    assert cells[1].tokens == cell_tokens(int(np.argsort(-np.where(e > 0, terms, -1))[0]), 2, 2)
    assert cells[1].contribution == pytest.approx(max(terms[e > 0]))
    # Cells expected below 5 are pooled in the statistic, so they are listed as one.
    law, obs = np.array([0.9, 0.02, 0.02, 0.02, 0.04]), np.array([80.0, 10, 5, 0, 5])  # e = 90, 2, 2, 2, 4
    cells = top_cells(obs, law)
    assert [c.tokens for c in cells] == ["pooled (4 cells)", "0"]
    assert cells[0].observed == 20 and cells[0].contribution == pytest.approx((20 - 10) ** 2 / 10)
    total = stats.chi_square(obs, law).statistic
    assert total == pytest.approx(sum(c.contribution for c in cells))  # the listed terms are the statistic


# A mutant of the independent implementation against the known bug it re-implements.
SAME_MISTAKE = {
    "residual_from_p": "resample_from_p",
    "coin_reused": "reused_coin",
    "shared_coin": "shared_uniform",
    "keep_after_rejection": "count_after_rejection",
    "residual_unclamped": "unclamped_residual",
}


@pytest.mark.parametrize("mutant", list(SAME_MISTAKE))
def test_nearest_known_bug_is_the_same_mistake(mutant):
    suite = run_suite(plan(["reference"], []), getattr(uv, mutant), verifier_name=mutant, n=100_000, seed=0)
    (res,) = suite.results
    assert res.verdict == "FAIL"
    ex = res.explanation
    assert ex is not None and ex.scenario == "reference" and "NOT the bonus" in ex.covers
    assert ex.nearest[0].bug == SAME_MISTAKE[mutant], ex.nearest
    assert ex.nearest[0].tv < ex.tv_to_target / 2  # much nearer than the target's law
    assert [b.tv for b in ex.nearest] == sorted(b.tv for b in ex.nearest)
    assert ex.cells and ex.cells[0].contribution == max(c.contribution for c in ex.cells)
    assert all(len(c.tokens.split()) == 3 for c in ex.cells)
    text = "\n".join(ex.lines())
    assert SAME_MISTAKE[mutant] in text and f'"{ex.cells[0].tokens}"' in text


def test_explanation_in_the_record_and_tokens_figures():
    suite = run_suite(plan(["bonus"], []), uv.bonus_from_q, verifier_name="bonus_from_q", n=100_000, seed=0)
    rec = case_record(suite.results[0])
    assert rec["verdict"] == "FAIL" and rec["scenario"] == "bonus"
    ex = rec["explanation"]
    assert ex["cells"] and len(ex["cells"][0]["tokens"].split()) == 4  # L = 4 tokens
    assert ex["nearest_bugs"] and {"bug", "tv", "source"} <= set(ex["nearest_bugs"][0])
    assert rec["tokens_test"]["measured"] == pytest.approx(suite.results[0].tokens.measured)
    assert rec["needed_n"] == suite.results[0].needed_n


def test_a_tokens_only_failure_points_to_the_law_keeping_bug():
    # Tokens per step are judged only against a named rule (without one they are efficiency).
    suite = run_suite(plan(["textbook"], []), BUGS["no_bonus"].verifier, verifier_name="drops_bonus", n=100_000,
                      rule="residual")  # fmt: skip
    (res,) = suite.results
    assert res.verdict == "FAIL" and res.joint.passed and not res.tokens.passed
    assert "the output law holds" in suite.failures[0]
    assert "only tokens per step fail" in res.explanation.nearest_note and "no_bonus" in res.explanation.nearest_note
    law = run_suite(plan(["textbook"], []), uv.residual_from_p, verifier_name="residual_from_p", n=100_000)
    assert not law.results[0].joint.passed  # negative control: a law-changing mistake gets no such note
    assert "only tokens per step fail" not in law.results[0].explanation.nearest_note


def test_passing_cases_carry_no_explanation():
    res = run_case("reference", n=100_000, seed=0)
    assert res.verdict == "pass" and res.explanation is None


def test_the_verifiers_own_traceback_is_kept():
    res = run_case("reference", uv.crashes, n=1000, name="crashes")
    assert res.verdict == "ERROR" and res.error == "RuntimeError: out of cheese"
    assert "_inner_helper" in res.traceback and "user_verifiers.py" in res.traceback
    assert "prove.py" not in res.traceback and "simulate.py" not in res.traceback  # the harness's frames cut
    assert case_record(res)["traceback"] == res.traceback


def test_record_carries_counts_law_and_cells_in_the_same_order():
    res = run_case("one_draft", n=20_000, seed=0)
    rec = case_record(res)
    sc = SCENARIOS["one_draft"]
    assert len(rec["cells"]) == sc.V**sc.L == len(rec["counts"]) == len(rec["law"])
    assert sum(rec["counts"]) == 20_000 and abs(sum(rec["law"]) - 1) < 1e-12
    i = int(np.argmax(res.observed))
    cell = {"sequence": cell_tokens(i, sc.V, sc.L), "observed": rec["counts"][i],
            "exact_probability": rec["law"][i], "expected_count": 20_000 * rec["law"][i]}  # fmt: skip
    assert rec["cells"][i] == cell
    assert rec["covers"] == sc.covers and rec["joint"]["conclusive"] == res.joint.conclusive
