"""Closed forms against exact enumeration of the real verifiers."""

from __future__ import annotations

import numpy as np
import pytest

from specviz.errors import InputError
from specviz.proof.bugs import BUGS
from specviz.proof.exact import verifier_law
from specviz.proof.markov import Drafter, make_chain, random_chain
from specviz.proof.simulate import generate
from specviz.proof.theory import (
    acceptance_rate,
    chain_expected_tokens,
    decompose,
    expected_tokens,
    position_law,
    total_variation,
)
from specviz.verifiers.verify import verify

TOL = 1e-12
P_REF, Q_UNIFORM = [0.5, 0.3, 0.15, 0.05], [0.25] * 4


def test_reference_example_figures():
    assert abs(acceptance_rate(P_REF, Q_UNIFORM) - 0.7) < TOL
    assert abs(expected_tokens(0.7, 3) - 2.533) < TOL
    assert abs(expected_tokens(0.7, 3, bonus=False) - 2.19) < TOL
    assert expected_tokens(1.0, 4) == 5 and expected_tokens(0.0, 4) == 1
    assert expected_tokens(0.5, 0, bonus=False) == 0


def test_decomposition_builds_p_exactly():
    rng = np.random.default_rng(0)
    for _ in range(50):
        p, q = rng.dirichlet(np.full(7, 0.3)), rng.dirichlet(np.full(7, 0.3))
        d = decompose(p, q)
        assert d.max_abs_error < 1e-15
        assert abs(d.total_variation - total_variation(p, q)) < 1e-15
        assert np.allclose(d.accepted + d.replaced, p, atol=1e-15, rtol=0)
    d = decompose(P_REF, P_REF)
    assert d.acceptance_rate == 1 and (d.accept_prob == 1).all()


def context_free(p, q):
    V = len(p)
    return make_chain(np.tile(p, (V + 1, 1))), make_chain(np.tile(q, (V + 1, 1)))


CASES = [(None, 1), ("resample_from_p", 1), ("unclamped_residual", 1), ("shared_uniform", 2),
         ("count_after_rejection", 2), ("reused_coin", 1), ("no_bonus", 1), ("greedy_draft_sampled_q", 1)]  # fmt: skip


@pytest.mark.parametrize("bug, K", CASES)
def test_position_law_matches_enumeration_of_the_real_verifier(bug, K):
    # q > p on token 0 before p > q tokens: the order that makes the unclamped running sum dip.
    p, q = np.array([0.1, 0.5, 0.4]), np.array([0.6, 0.1, 0.3])
    target, draft = context_free(p, q)
    b = BUGS[bug] if bug else None
    fn = b.verifier if b else verify
    drafter = Drafter(draft, b.drafter_mode if b and b.drafter_mode else "sample")
    law = verifier_law(fn, target, drafter, L=1, num_draft=K)
    if hasattr(law, "law"):  # an ExactLaw: the law and the mass it could not resolve
        assert law.unresolved < TOL
        law = law.law
    np.testing.assert_allclose(law, position_law(p, q, bug, K=K), atol=TOL, rtol=0)


def test_position_law_separates_the_lessons():
    p, q = np.array([0.1, 0.5, 0.4]), np.array([0.6, 0.1, 0.3])
    assert total_variation(position_law(p, q, "resample_from_p"), p) > 0.1
    assert total_variation(position_law(p, q, "unclamped_residual"), p) > 0.05
    assert total_variation(position_law(p, q, "shared_uniform"), p) < TOL  # the joint test's job
    assert position_law(p, q, "wrong_bonus_row") is None
    with pytest.raises(InputError, match="bug: expected one of"):
        position_law(p, q, "nope")


def test_chain_expected_tokens_matches_simulation_and_closed_form():
    target, draft = context_free(P_REF, Q_UNIFORM)
    E = chain_expected_tokens(target, Drafter(draft), 3)
    np.testing.assert_allclose(E[:, 3], 2.533, atol=TOL)
    np.testing.assert_allclose(chain_expected_tokens(target, Drafter(draft), 3, bonus=False)[:, 3], 2.19, atol=TOL)
    rng = np.random.default_rng(4)
    t, d = random_chain(4, rng), random_chain(4, rng)
    sim = generate(verify, t, Drafter(t), n=50_000, L=4, K=3, rng=rng, expected=chain_expected_tokens(t, Drafter(t), 3))
    assert sim.tokens_per_round == 4 == sim.expected_tokens_per_round  # q == p: everything accepted
    sim = generate(verify, t, Drafter(d), n=200_000, L=3, K=3, rng=rng, ragged=True,
                   expected=chain_expected_tokens(t, Drafter(d), 3))  # fmt: skip
    assert abs(sim.tokens_per_round - sim.expected_tokens_per_round) < 4 * sim.tokens_per_round_se


def test_bad_distributions_are_named():
    with pytest.raises(InputError, match="target_probs: expected probabilities summing to 1"):
        decompose([0.5, 0.6], [0.5, 0.5])
    with pytest.raises(InputError, match=r"draft_probs: expected shape \(V,\)"):
        decompose([0.5, 0.5], [1.0, 0.0, 0.0])
    with pytest.raises(InputError, match="draft_probs: expected non-negative"):
        acceptance_rate([0.5, 0.5], [1.5, -0.5])
    with pytest.raises(InputError, match="acceptance: expected a rate in"):
        expected_tokens(1.2, 3)
