"""Every classic mistake is caught: exactly where enumeration is possible, statistically end to end."""

from __future__ import annotations

import numpy as np
import pytest

from specviz import verify
from specviz.errors import InputError
from specviz.proof.bugs import BUGS, get
from specviz.proof.exact import verifier_law
from specviz.proof.markov import Drafter, random_chain
from specviz.proof.prove import plan, run_case, run_suite
from specviz.proof.scenarios import SCENARIOS

TOL = 1e-12


@pytest.fixture(scope="module")
def chains():
    rng = np.random.default_rng(99)
    return random_chain(3, rng), random_chain(3, rng)


def exact_tv(bug_name, chains, num_draft=2, K=2):
    target, draft = chains
    bug = BUGS[bug_name]
    drafter = Drafter(draft, bug.drafter_mode or "sample")
    law = verifier_law(bug.verifier, target, drafter, L=3, num_draft=num_draft, K=K).law
    assert abs(law.sum() - 1) < TOL
    return 0.5 * np.abs(law - target.joint_law(3)).sum()


@pytest.mark.parametrize("name", [b.name for b in BUGS.values() if b.changes_law])
def test_every_distribution_changing_bug_fails_its_exact_check(chains, name):
    # Ragged (1 draft in a width-2 batch) for the bonus-row bug, full rows for the others.
    num_draft = 1 if BUGS[name].needs_ragged else 2
    assert exact_tv(name, chains, num_draft=num_draft) > 1e-3


def test_correct_verifier_and_no_bonus_are_exact(chains):
    target, draft = chains
    for fn in (verify, BUGS["no_bonus"].verifier):
        law = verifier_law(fn, target, Drafter(draft), L=3, num_draft=2).law
        assert np.abs(law - target.joint_law(3)).max() < TOL


def test_bonus_row_bug_is_invisible_without_ragged_rows(chains):
    assert exact_tv("wrong_bonus_row", chains, num_draft=2, K=2) < TOL


@pytest.fixture(scope="module")
def suite():
    return run_suite(plan(), n=100_000, seed=3)


def test_suite_correct_verifier_passes_everywhere(suite):
    mine = [r for r in suite.results if not r.is_bug]
    assert [r.scenario for r in mine] == list(SCENARIOS)
    for r in mine:
        assert r.verdict == "pass", (r.scenario, r.joint, r.tokens)


@pytest.mark.parametrize("name", list(BUGS))
def test_suite_catches_every_bug(suite, name):
    mine = [r for r in suite.results if r.verifier == name]
    assert mine and any(r.verdict == "caught" for r in mine), [(r.scenario, r.joint.statistic) for r in mine]
    if BUGS[name].changes_law:  # caught by the distribution test itself
        assert any(not r.joint.passed for r in mine)
    else:  # no_bonus: every distribution test passes, tokens per step does not
        assert all(r.joint.passed for r in mine)
        assert all(not r.tokens.passed and r.tokens.measured < r.tokens.expected for r in mine)
    assert suite.ok


def test_shared_uniform_passes_first_token_test_and_fails_joint():
    res = run_case("reference", bug=BUGS["shared_uniform"], n=300_000, seed=1)
    assert res.first_token.passed, res.first_token
    assert not res.joint.passed, res.joint
    # The per-position tests: position 0 is exact, later positions are not.
    assert res.positions[0].passed


def test_textbook_no_bonus_tokens_per_step():
    res = run_case("textbook", bug=BUGS["no_bonus"], n=100_000, seed=2)
    assert abs(res.tokens.measured - 2.19) < 4 * res.tokens.se
    ok = run_case("textbook", n=100_000, seed=2)
    assert abs(ok.tokens.measured - 2.533) < 4 * ok.tokens.se


def test_unknown_bug_name():
    with pytest.raises(InputError, match="bug: expected one of resample_from_p"):
        get("off_by_one")
    with pytest.raises(InputError, match="bugs: expected names from"):
        plan(bugs=["nope"])
