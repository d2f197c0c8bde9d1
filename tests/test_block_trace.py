"""specviz.proof.block_trace: the step-by-step block, its exact tokens per step and its mistakes.

The variant engine is checked against verify_block on the same uniforms before its mistakes are
trusted as negative controls; each mistake's exact TV (the court) must be far from 0 while the
engine without a mistake is lossless to 1e-12.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from specviz import InputError
from specviz.proof import court, scenarios
from specviz.proof.block_trace import (
    MISTAKES,
    block_expected_tokens,
    block_trace,
    seeded_block_trace,
    trace_rows,
    verify_block_variant,
)
from specviz.proof.markov import Drafter
from specviz.verifiers.block import block_thresholds, verify_block
from specviz.verifiers.verify import Uniforms

TOY_P, TOY_Q = [1 / 3, 2 / 3], [2 / 3, 1 / 3]


@pytest.mark.parametrize("deterministic", [False, True])
def test_variant_without_mistake_is_verify_block_token_for_token(deterministic):
    rng = np.random.default_rng(7)
    B, K, V = 99, 3, 5
    T = rng.dirichlet(np.full(V, 0.4), (B, K + 1))
    Q = None if deterministic else rng.dirichlet(np.full(V, 0.4), (B, K))
    x = rng.integers(0, V, (B, K))
    j = rng.integers(0, K + 1, B)  # ragged
    u = Uniforms(rng.random((B, K)), rng.random(B))
    want, got = verify_block(T, Q, x, j, uniforms=u), verify_block_variant(T, Q, x, j, uniforms=u)
    assert (want.tokens == got.tokens).all() and (want.num_tokens == got.num_tokens).all()
    assert (want.bonus == got.bonus).all()
    assert np.allclose(want.ratios, got.ratios, equal_nan=True)


@pytest.mark.parametrize("mistake", MISTAKES)
def test_each_mistake_is_lossy_by_the_court_and_the_rule_is_not(mistake):
    fn = functools.partial(verify_block_variant, mistake=mistake)
    fn.__name__ = mistake
    assert court.judge(fn, "reference").tv_from_target > 0.1  # exact: 0.21 and 0.55
    rule = functools.partial(verify_block_variant, mistake=None)
    rule.__name__ = "rule"
    assert court.judge(rule, "reference").tv_from_target < 1e-12


def test_unknown_mistake_is_named():
    with pytest.raises(InputError, match="mistake"):
        verify_block_variant(np.full((1, 2, 2), 0.5), None, np.zeros((1, 1), int), [1], mistake="nope")


@pytest.mark.parametrize("scenario", ["reference", "deterministic", "zeros", "ragged"])
def test_expected_tokens_equal_the_courts_enumeration(scenario):
    sc = scenarios.SCENARIOS[scenario]
    target, draft = scenarios.scenario_chains(sc)
    got = block_expected_tokens(target, Drafter(draft, sc.drafter_mode), sc.K)
    want = court.judge("block", scenario).expected_table
    met = ~np.isnan(want)
    assert met.sum() >= 4 and np.abs(got[met] - want[met]).max() < 1e-12


def test_expected_tokens_on_the_toy_example():
    pb = court.toy_problem()
    got = block_expected_tokens(pb.target, pb.drafter, 2)
    assert abs(got[0, 2] - (1 + 11 / 9)) < 1e-12  # the paper's 11/9 accepted drafts, plus one token
    chain = court.judge("chain", pb).expected_tokens_per_step
    assert abs(chain - (1 + 10 / 9)) < 1e-12 and got[0, 2] > chain  # block keeps more than the chain


def test_trace_by_hand_on_the_toy_pair():
    # x = (1, 0): w_1 = min(1, (2/3) / (1/3)) = 1, w_2 = min(1, 1 * (1/3) / (2/3)) = 1/2;
    # m_1 = (2/3 - 1/3) = 1/3, h_1 = (1/3) / (1/3 + 0) = 1, h_2 = w_2 = 1/2.
    t = block_trace(np.array([TOY_P] * 3), np.array([TOY_Q] * 2), np.array([1, 0]), Uniforms([0.9, 0.7], 0.3))
    assert np.allclose(t.weights, [1, 1, 0.5]) and np.allclose(t.thresholds, [1, 0.5])
    assert t.passed.tolist() == [True, False] and t.tau == 1 and not t.bonus
    assert np.allclose(t.source_row, [0, 1])  # (w_1 p - q)+ = (0, 1/3), normalized
    assert t.token == 1 and t.tokens == [1, 1]
    # eta_1 fails, eta_2 passes: the later pass keeps both drafts, the token is the bonus from p.
    t = block_trace(np.array([TOY_P] * 3), np.array([TOY_Q] * 2), np.array([1, 0]), Uniforms([0.999, 0.2], 0.1))
    assert t.tau == 2 and t.bonus and np.allclose(t.source_row, TOY_P) and t.tokens == [1, 0, 0]


def test_seeded_trace_is_the_packages_numbers_and_moves_with_the_seed():
    seen = set()
    for seed in range(6):
        t = seeded_block_trace(TOY_P, TOY_Q, 2, seed)
        thr = block_thresholds(np.array([[TOY_P] * 3]), np.array([[TOY_Q] * 2]), t.draft_tokens[None], [2])
        assert np.array_equal(t.thresholds, thr.thresholds[0]) and np.array_equal(t.weights, thr.weights[0])
        rows = trace_rows(t)
        assert [r["threshold h_i"] for r in rows] == thr.thresholds[0].tolist()
        seen.add((tuple(t.draft_tokens), tuple(t.uniforms)))
    assert len(seen) == 6


def test_bad_pair_is_named():
    with pytest.raises(InputError, match="draft_probs"):
        seeded_block_trace([0.5, 0.5], [1.0], 2, 0)


def test_the_drawing_holds_the_traces_numbers():
    from specviz.app import figures

    t = seeded_block_trace(TOY_P, TOY_Q, 2, 3)
    fig = figures.block_steps(t)
    assert list(fig.data[0].y) == t.thresholds.tolist() and list(fig.data[1].y) == t.uniforms.tolist()
    assert list(fig.data[2].y) == t.source_row.tolist() and str(t.tau) in fig.layout.title.text
