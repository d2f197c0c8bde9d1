"""End to end: repeated draft-and-verify rounds on Markov chains, judged by a joint chi-square.

Target and drafter are random Markov chains over V = 4 tokens with a start state. 300,000
sequences of 3 tokens are compared with the exact product of the target's transitions on all
64 cells (small cells pooled) at level 0.001; the critical value comes from scipy (103.4 for
63 degrees of freedom). Every scenario has a negative control that must fail.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from specviz import verify
from specviz.proof.bugs import BUGS
from specviz.proof.markov import START, Drafter, MarkovChain, random_chain
from specviz.proof.simulate import generate
from specviz.proof.stats import ALPHA, joint_test
from specviz.proof.theory import chain_expected_tokens

N, L, K, V = 300_000, 3, 3, 4


@pytest.fixture(scope="module")
def chains():
    rng = np.random.default_rng(2026)
    return random_chain(V, rng), random_chain(V, rng)


def run(verifier, chains, seed, *, ragged=False, mode="sample"):
    target, draft = chains
    sim = generate(
        verifier, target, Drafter(draft, mode), n=N, L=L, K=K, rng=np.random.default_rng(seed), ragged=ragged
    )
    return sim, joint_test(sim.sequences, target.joint_law(L), alpha=ALPHA)


def test_critical_value_is_scipys():
    assert abs(sps.chi2.isf(0.001, 63) - 103.44) < 0.01


@pytest.mark.parametrize("ragged", [False, True])
def test_correct_verifier_passes_joint_test(chains, ragged):
    sim, res = run(verify, chains, 11, ragged=ragged)
    assert res.passed, res
    assert res.dof >= 40  # most of the 64 cells are tested, not pooled away
    assert res.detectable_tv < 0.02  # a pass that means something
    assert 1 < sim.tokens_per_round <= K + 1


@pytest.mark.parametrize("ragged", [False, True])
def test_negative_control_resample_from_p_fails(chains, ragged):
    _, res = run(BUGS["resample_from_p"].verifier, chains, 11, ragged=ragged)
    assert not res.passed, res
    assert res.statistic > 10 * res.critical_value


def test_reading_past_the_draft_count_fails_with_ragged_rows(chains):
    # A verifier that ignores num_draft and verifies all K padded drafts reads the garbage rows.
    def reads_padding(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None):
        full = np.full_like(num_draft, draft_tokens.shape[1])
        return verify(target_probs, draft_probs, draft_tokens, full, rng=rng, uniforms=uniforms)

    _, res = run(reads_padding, chains, 12, ragged=True)
    assert not res.passed, res
    _, same = run(reads_padding, chains, 12, ragged=False)  # harmless when nothing is padded
    assert same.passed, same


def test_deterministic_drafter_is_lossless(chains):
    _, res = run(verify, chains, 13, mode="argmax")
    assert res.passed, res
    _, bad = run(verify, chains, 13, mode="argmax_reports_softmax")
    assert not bad.passed, bad


def greedy_path(chain: MarkovChain, L: int) -> np.ndarray:
    """Plain greedy decoding: argmax at each step, ties to the lowest id. Shape (L,)."""
    out, prev = [], START
    for _ in range(L):
        prev = int(np.argmax(chain.probs(prev)))
        out.append(prev)
    return np.array(out, dtype=np.int64)


def test_greedy_equals_plain_greedy_decoding():
    rng = np.random.default_rng(5)
    for _ in range(5):
        target, draft = random_chain(V, rng, concentration=0.5), random_chain(V, rng)
        sim = generate(None, target, Drafter(draft), n=2_000, L=8, K=3, rng=rng, ragged=True, greedy=True)
        assert (sim.sequences == greedy_path(target, 8)).all()
    # Negative control: sampling at temperature 1 leaves the greedy path.
    sampled = generate(verify, target, Drafter(draft), n=2_000, L=8, K=3, rng=rng)
    assert not (sampled.sequences == greedy_path(target, 8)).all(axis=1).all()


def test_tokens_per_round_match_the_exact_expectation(chains):
    target, draft = chains
    expected = chain_expected_tokens(target, Drafter(draft), K)
    sim = generate(verify, target, Drafter(draft), n=N, L=L, K=K, rng=np.random.default_rng(14), expected=expected)
    assert sim.num_verifications >= N and sim.mean_num_draft == K
    assert abs(sim.tokens_per_round - sim.expected_tokens_per_round) < 4 * sim.tokens_per_round_se
    # Later positions are tested only after earlier acceptances.
    assert (np.diff(sim.tested_by_position) <= 0).all()
    # Negative control: dropping the bonus moves the mean far outside the band.
    bad = generate(BUGS["no_bonus"].verifier, target, Drafter(draft), n=N, L=L, K=K, rng=np.random.default_rng(14),
                   expected=expected)  # fmt: skip
    assert bad.expected_tokens_per_round - bad.tokens_per_round > 20 * bad.tokens_per_round_se
