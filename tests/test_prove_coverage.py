"""The proof suite sees every token a verifier emits (issue 7, item 1).

With L = K a round that accepts all K drafts emits its bonus as token K + 1, outside the
window, so a verifier wrong only in that bonus used to pass every scenario. The mutants of
``tests/user_verifiers.py`` are an independent implementation of the rule with exactly one
step wrong; each must FAIL where it differs from the rule, at the suite's default N and seed,
and the correct variants must pass. Verdicts are the suite's own (joint chi-square at level
0.001 and the tokens z-test, with the power rule); the full CLI run per mutant is the slow test
at the end.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specviz.proof.bugs import Bug, row_before
from specviz.proof.prove import DEFAULT_N, plan, run_case
from specviz.proof.scenarios import HOME, SCENARIOS, bonus_shapes, default_home
from specviz.verifiers import reference
from tests import user_verifiers as uv

pytestmark = pytest.mark.heavy  # the mutants through whole prove runs: left out of the quick subset

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = {m.name: m for m in uv.MUTANTS}


def _rounds_seen(K: int, L: int, ragged: bool) -> tuple[set[int], set[int]]:
    """Brute force over every history of rounds: which bonus shapes (draft counts j) and which
    replacement positions land inside the first L tokens."""
    bonus, replaced = set(), set()

    def walk(length: int) -> None:
        if length >= L:
            return
        for j in range(K + 1) if ragged else (K,):
            for accepted in range(j + 1):
                if accepted == j:  # every draft survived: token j + 1 of the round is the bonus
                    if length + j + 1 <= L:
                        bonus.add(j)
                elif length + accepted + 1 <= L:  # the replacement at the first rejected position
                    replaced.add(accepted)
                walk(length + accepted + 1)

    walk(0)
    return bonus, replaced


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_each_scenario_states_what_it_covers_and_the_statement_is_true(name):
    sc = SCENARIOS[name]
    bonus, replaced = _rounds_seen(sc.K, sc.L, sc.ragged)
    assert set(bonus_shapes(sc)) == bonus
    assert replaced == set(range(min(sc.K, sc.L)))  # every replacement position is judged
    if sc.K in bonus:
        assert "NOT the bonus" not in sc.covers
    else:
        assert "NOT the bonus of full rows" in sc.covers


def test_the_suite_sees_the_bonus_of_every_row_shape():
    full = {sc.K for sc in SCENARIOS.values() if not sc.ragged and sc.K in bonus_shapes(sc)}
    assert full >= {1, 3}  # full rows with one draft and with three
    modes = {sc.drafter_mode for sc in SCENARIOS.values() if sc.K in bonus_shapes(sc)}
    assert modes == {"sample", "argmax"}  # with q given and with draft_probs=None
    assert any(sc.ragged and set(bonus_shapes(sc)) == set(range(sc.K + 1)) for sc in SCENARIOS.values())
    # Negative control: the original six scenarios (L = K = 3) never see the bonus of a full row.
    old = ["reference", "textbook", "ragged", "deterministic", "zeros", "greedy"]
    assert all(3 not in bonus_shapes(SCENARIOS[s]) for s in old)


BLIND_SPOT = [m.name for m in uv.MUTANTS if m.bonus_only and m.shapes == "all" and "without_q" not in m.name]


@pytest.mark.parametrize("name", BLIND_SPOT)
def test_a_verifier_wrong_only_in_the_bonus_of_full_rows_fails(name):
    fn = getattr(uv, name)
    # The blind spot was real: an L = K scenario with full rows passes it.
    assert run_case("reference", fn, name=name).verdict == "pass"
    for sc in ("bonus", "one_draft"):
        res = run_case(sc, fn, name=name)
        assert res.verdict == "FAIL", (sc, res.joint)
        assert not res.joint.passed and res.joint.conclusive


def test_the_bonus_of_a_deterministic_drafter_is_judged_too():
    # Wrong only in the bonus and only on the draft_probs=None path: every sampled-q scenario and
    # the L = K deterministic one pass it; the deterministic scenario with L = K + 1 fails it.
    name = "bonus_row_before_without_q"
    fn = getattr(uv, name)
    assert run_case("bonus", fn, name=name).verdict == "pass"
    assert run_case("deterministic", fn, name=name).verdict == "pass"
    assert run_case("deterministic_bonus", fn, name=name).verdict == "FAIL"


# Where each mutant is checked in the default run: a scenario where its step is exercised.
WHERE = {
    "bonus_row_k_minus_1": "bonus", "bonus_from_q": "one_draft", "bonus_reuses_last_coin": "bonus",
    "bonus_row_before_without_q": "deterministic_bonus",
    "residual_unclamped": "reference", "residual_from_p": "one_draft", "residual_keeps_draft": "deterministic",
    "coin_reused": "bonus", "coin_atom_at_zero": "zeros", "shared_coin": "reference",
    "keep_after_rejection": "ragged_bonus", "bonus_last_padded_row": "ragged_bonus", "reads_padding": "ragged",
    "short_row_bonus_off_by_one": "ragged_bonus", "empty_row_bonus_from_last": "ragged",
}  # fmt: skip


def test_every_mutant_has_a_checked_scenario():
    assert set(WHERE) == set(MUTANTS)
    cases = {c.scenario for c in plan(bugs=[])}
    assert set(WHERE.values()) <= cases  # all are scenarios the default suite runs


@pytest.mark.parametrize("name", list(WHERE))
def test_every_single_step_mutant_fails_the_suite(name):
    res = run_case(WHERE[name], getattr(uv, name), name=name, n=DEFAULT_N, seed=0)
    assert res.verdict == "FAIL", (name, res.joint, res.tokens)
    if MUTANTS[name].shapes == "ragged":
        # Wrong only on rows with fewer than K drafts: the same verifier passes with full rows.
        assert run_case("bonus", getattr(uv, name), name=name).verdict == "pass"


# Correct variants where their difference could matter: <= meets p = 0 (zeros, greedy: one-hot
# target) and q one-hot (deterministic); a rescaled coin meets every decision, bonuses included.
VARIANT_SCENARIOS = {
    "own_correct": ["ragged_bonus", "deterministic"],
    "correct_leq": ["zeros", "greedy", "deterministic"],
    "correct_one_minus_u": ["bonus", "ragged_bonus"],
    "correct_doubled_u": ["bonus", "one_draft"],
}


@pytest.mark.parametrize("name", list(VARIANT_SCENARIOS))
def test_correct_variants_pass(name):
    for sc in VARIANT_SCENARIOS[name]:
        res = run_case(sc, getattr(uv, name), name=name)
        assert res.verdict == "pass", (name, sc, res.joint, res.tokens)


def prove(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specviz", "prove", "--quiet", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("name", [m.name for m in uv.MUTANTS] + list(uv.VARIANTS))
def test_prove_cli_fails_every_mutant_and_passes_every_variant(name):
    r = prove("--verifier", f"tests.user_verifiers:{name}", "--bugs", "none")
    if name in uv.VARIANTS:
        # The law is right: the law verdict is OK. The support probes fail the run where the variant
        # emits a token with p = 0 at a boundary coin (correct_leq's coin 0), and only there; a
        # policy finding (own_rule returns a token for a NaN row) is a warning (specviz.proof.verdicts).
        assert "\nlaw OK: " in r.stdout, r.stdout[-3000:]
        support_failed = "\nsupport FAIL: " in r.stdout
        assert r.returncode == (1 if support_failed else 0), r.stdout[-3000:]
    else:
        assert r.returncode == 1 and "FAIL " in r.stdout, r.stdout[-3000:]


def test_a_bonus_only_bug_has_a_home_where_it_shows_and_is_caught_there():
    # The negative control for the L > K scenarios: the verifier with its bonus from row
    # num_draft - 1 (the reference with its last_draw step swapped), as a bug of specviz.proof.bugs would be.
    fn = reference.with_step(reference.verify, "bonus_row_before", last_draw=row_before)
    bug = Bug("bonus_row_before", "", fn, ("last_draw", "row_before"), None, "", "", True, False)
    assert default_home(bug) == ("bonus", "one_draft")
    assert all(HOME[name] for name in HOME)  # every bug of bugs.py has a home
    for sc in default_home(bug):
        assert run_case(sc, bug=bug).verdict == "caught"
    assert run_case("reference", bug=bug).verdict == "missed"  # where L = K it cannot show
