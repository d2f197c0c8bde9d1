"""Sample-and-match: exact law by enumeration, acceptance sum p*q (never above the chain), parity.

# B rows, K drafts (padded width), V vocabulary

The enumeration is the one in test_block.py: every draft sequence (weighted by the drafter)
times every box of uniforms between the CDF points of the target rows, evaluated at the box's
centre and probed just inside both edges.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from test_block import (
    CASES,
    DET_CASES,
    TOL,
    Case,
    by_V,
    cdf_points,
    chain_expected_accepted,
    drafts_of,
    enumerate_law,
    extend,
    random_batch,
    target_law,
    tv,
)

from specviz import InputError, Uniforms
from specviz.proof.exact import verifier_law
from specviz.proof.markov import Drafter, random_chain
from specviz.proof.simulate import generate
from specviz.proof.stats import ALPHA, joint_test
from specviz.verifiers.sample_match import verify_sample_match


def match_points(tree, xs):
    """The draw at the i-th draft compares its uniform with p_{i-1}'s CDF; the bonus with p_j's."""
    accept = [cdf_points(tree[xs[:i]][0]) for i in range(len(xs))]
    return accept, cdf_points(tree[xs][0])


def ref_match_law(tree, V: int, j: int, path=None) -> dict[tuple[int, ...], float]:
    """From the definition: y_i ~ p_{i-1}; keep while y_i = x_i; emit the mismatching y."""
    law: dict[tuple[int, ...], float] = {}
    for xs, qx in drafts_of(tree, V, j, path):
        reach = qx  # probability of drafting xs and matching the first i drafts
        for i in range(j + 1):
            p = tree[xs[:i]][0]
            for y in range(V):
                if i < j and y == xs[i]:
                    continue
                law[xs[:i] + (y,)] = law.get(xs[:i] + (y,), 0.0) + reach * p[y]
            if i < j:
                reach *= p[xs[i]]
    return law


def match_expected_accepted(tree, V: int, j: int, path=None) -> float:
    """sum_i E_q[prod_{k<i} p_k(x_{k+1})]: each draft survives with the target's probability of it."""
    total = 0.0
    for i in range(1, j + 1):
        for xs, qx in drafts_of(tree, V, i, path):
            total += qx * float(np.prod([tree[xs[:k]][0][xs[k]] for k in range(i)]))
    return total


@pytest.fixture(scope="module")
def match_laws():
    out = []
    for group in by_V(CASES) + by_V(DET_CASES):
        laws, kept = enumerate_law(verify_sample_match, group, match_points)
        out += list(zip(group, laws, kept, strict=True))
    return out


def test_law_is_the_target(match_laws):
    for case, law, _ in match_laws:
        n = case.j + 1
        got, want = extend(case.tree, case.V, n, law), target_law(case.tree, case.V, n)
        assert max(abs(got[z] - want[z]) for z in want) < TOL, case
        assert tv(law, ref_match_law(case.tree, case.V, case.j, case.path)) < TOL, case


def test_keeps_sum_p_q_and_never_more_than_the_chain(match_laws):
    losses = []
    for case, _, kept in match_laws:
        assert abs(kept - match_expected_accepted(case.tree, case.V, case.j, case.path)) < TOL, case
        chain = chain_expected_accepted(case.tree, case.V, case.j, case.path)
        assert kept <= chain + TOL, (case, kept, chain)
        losses.append(chain - kept)
    assert max(losses) > 0.1  # lossless is not the same as efficient


def test_torch_enumeration_gives_the_same_law():
    group = by_V(CASES)[1]
    a, _ = enumerate_law(verify_sample_match, group, match_points)
    b, _ = enumerate_law(verify_sample_match, group, match_points, lib="torch")
    for case, la, lb in zip(group, a, b, strict=True):
        assert la == lb, case


def test_identical_drafter_and_target_uniform():
    # p = q = uniform over V = 4, one draft: the chain keeps it always, sample-and-match 1/4 of the time.
    V = 4
    case = Case(V, 1, 0)
    case.tree = {
        pre: (np.full(V, 1 / V), np.full(V, 1 / V)) for n in range(4) for pre in itertools.product(range(V), repeat=n)
    }
    (_,), (kept,) = enumerate_law(verify_sample_match, [case], match_points)
    assert abs(kept - 1 / V) < TOL
    assert abs(chain_expected_accepted(case.tree, V, 1) - 1) < TOL


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_numpy_and_torch_give_identical_tokens(dtype):
    rng = np.random.default_rng(8)
    for B, K, V in ((99, 5, 111), (7, 3, 3), (1, 1, 2)):
        T, Q, x, j = random_batch(rng, B, K, V)
        T = T.astype(dtype)
        # Drafts that sometimes match: each draft is the target's own likeliest token half the time.
        x = np.where((rng.random((B, K)) < 0.5) & (x >= 0), T[:, :K].argmax(-1), x)
        u = Uniforms(rng.random((B, K)), rng.random(B))
        a = verify_sample_match(T, Q, x, j, uniforms=u)
        Tt, xt, jt = (torch.from_numpy(a_) for a_ in (T, x, j))
        b = verify_sample_match(Tt, None, xt, jt, uniforms=Uniforms(*map(torch.from_numpy, u)))
        for field in ("tokens", "num_tokens", "num_accepted", "bonus"):
            assert np.array_equal(getattr(a, field), getattr(b, field).numpy()), field
        assert np.array_equal(a.ratios, b.ratios.numpy(), equal_nan=True)
        if B > 50:
            assert 0 < a.num_accepted.mean() and 0 < a.bonus.mean() < 1


def test_result_fields():
    rng = np.random.default_rng(9)
    T, Q, x, j = random_batch(rng, 300, 4, 3)
    u = Uniforms(rng.random((300, 4)), rng.random(300))
    res = verify_sample_match(T, Q, x, j, uniforms=u)
    n = res.num_accepted
    pos = np.arange(4)[None, :]
    tested = (pos <= n[:, None]) & (pos < j[:, None])
    ar = np.arange(300)
    assert np.array_equal(np.isnan(res.ratios), ~tested)
    px = np.take_along_axis(T[:, :4], np.maximum(x, 0)[..., None], -1)[..., 0]  # (B, K) p(x)
    assert np.array_equal(res.ratios[tested], px[tested])
    assert np.array_equal(res.bonus, n == j)
    assert np.array_equal(np.isnan(res.sample_uniforms), ~res.bonus)
    # At a mismatch the emitted token differs from the draft it replaces.
    mism = ~res.bonus
    assert (res.tokens[ar[mism], n[mism]] != x[ar[mism], n[mism]]).all()
    assert (res.tokens[:, :4][pos < n[:, None]] == x[pos < n[:, None]]).all()


def test_exact_court_over_several_rounds():
    # specviz.proof.exact over repeated rounds of Markov chains, ragged draft counts 0..3 in a padded
    # width of 3, sampling and deterministic drafters: the law of 3 tokens is the target's.
    rng = np.random.default_rng(12)
    target, draft = random_chain(3, rng, zero_fraction=0.34), random_chain(3, rng, zero_fraction=0.34)
    for mode in ("sample", "argmax"):
        res = verifier_law(verify_sample_match, target, Drafter(draft, mode), L=3, num_draft=range(4), K=3)
        assert res.unresolved == 0 and np.abs(res.law - target.joint_law(3)).max() < TOL, mode


# ---------------------------------------------------------------- end to end


N, L, V = 200_000, 3, 4


@pytest.fixture(scope="module")
def chains():
    rng = np.random.default_rng(2027)
    # A peaked target and drafter, so drafts match often enough for every position to be tested.
    return random_chain(V, rng, concentration=0.3), random_chain(V, rng, concentration=0.3)


def redraw_at_mismatch(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None):
    """Negative control: at a mismatch, emit a fresh draw from p instead of the mismatching y.
    (Removing the draft token from p and renormalizing would be no bug: that is exactly the law
    of y given that it did not match.)"""
    res = verify_sample_match(target_probs, draft_probs, draft_tokens, num_draft, rng=rng, uniforms=uniforms)
    ar = np.arange(len(num_draft))
    n = res.num_accepted
    cdf = np.cumsum(target_probs[ar, n], 1)  # (B, V)
    u = rng.random(len(n))
    y = np.minimum((cdf <= (u * cdf[:, -1])[:, None]).sum(1), cdf.shape[1] - 1)
    tokens = res.tokens.copy()
    tokens[ar, n] = np.where(res.bonus, tokens[ar, n], y)
    return res._replace(tokens=tokens)


@pytest.mark.parametrize("ragged", [False, True])
def test_passes_the_joint_chi_square(chains, ragged):
    target, draft = chains
    sim = generate(
        verify_sample_match, target, Drafter(draft), n=N, L=L, K=3, rng=np.random.default_rng(31), ragged=ragged
    )
    res = joint_test(sim.sequences, target.joint_law(L), alpha=ALPHA)  # level 0.001; critical value ~103 at 63 dof
    assert res.passed, res
    assert res.detectable_tv < 0.02
    assert sim.tokens_per_round > 1.2  # drafts do get kept


def test_negative_control_redraw_at_mismatch_fails(chains):
    target, draft = chains
    sim = generate(
        redraw_at_mismatch, target, Drafter(draft), n=N, L=L, K=3, rng=np.random.default_rng(31), ragged=True
    )
    res = joint_test(sim.sequences, target.joint_law(L), alpha=ALPHA)
    assert not res.passed, res
    assert res.statistic > 10 * res.critical_value


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda T, Q, x, j: (T[:, :2], Q, x, j), r"target_probs: expected shape \(B, K\+1, V\)"),
        (lambda T, Q, x, j: (T, Q[:, :, :2], x, j), r"draft_probs: expected shape \(B, K, V\)"),
        (lambda T, Q, x, j: (T, Q * 3, x, j), "draft_probs: expected rows summing to 1"),
        (lambda T, Q, x, j: (T, Q, x, j - 1), r"num_draft: expected draft counts in \[0, 2\]"),
        (lambda T, Q, x, j: (T, Q, x + 10, j), r"draft_tokens: expected token ids"),
        (lambda T, Q, x, j: (T + 1, Q, x, j), "target_probs: expected rows summing to 1"),
    ],
)
def test_bad_input_names_the_argument(change, match):
    T, Q, x, j = random_batch(np.random.default_rng(10), 4, 2, 3)
    j, x = np.full(4, 2), np.maximum(x, 0)
    j[0] = 0
    with pytest.raises(InputError, match=match):
        verify_sample_match(*change(T, Q, x, j), rng=np.random.default_rng(0))
    with pytest.raises(InputError, match=r"uniforms.accept: expected uniforms in \[0, 1\)"):
        verify_sample_match(T, Q, x, j, uniforms=Uniforms(np.full((4, 2), 1.5), np.zeros(4)))
