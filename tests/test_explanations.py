"""Every number and inequality the texts state, computed: bug explanations, caught-by lines, captions, docs.

Each test names the sentence it checks (``assert PHRASE in text``: a reworded text fails here
until its claim is checked again), then computes the claim independently: exact laws by
enumerating the real verifiers over their explicit uniforms (:mod:`specviz.proof.exact`, or the
coin grid below), closed forms from :mod:`specviz.proof.theory`, and the proof suite's own checks
with fixed seeds, where the correct verifier on the same scenario and seed is the control
that must pass.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pytest

from specviz.app import flow, position, why_exact
from specviz.proof import prove, scenarios, theory
from specviz.proof.bugs import BUGS
from specviz.proof.exact import verifier_law
from specviz.proof.markov import Drafter, make_chain
from specviz.verifiers.verify import Uniforms, verify

ROOT = Path(__file__).resolve().parents[1]
TOL = 1e-12
P_REF, Q_REF, K_REF = np.array(theory.REFERENCE_P), np.array(theory.REFERENCE_Q), theory.REFERENCE_K
NUMBER = r"[0-9]+(?:\.[0-9]+)?"


def explanation(bug: str, phrase: str) -> str:
    text = BUGS[bug].explanation
    assert phrase in text, f"{bug}: the explanation no longer says {phrase!r}; re-check its claim here"
    return text


def caught_by(bug: str, phrase: str) -> str:
    text = BUGS[bug].caught_by
    assert phrase in text, f"{bug}: caught_by no longer says {phrase!r}; re-check its claim here"
    return text


def grab(pattern: str, text: str) -> tuple[str, ...]:
    m = re.search(pattern, text)
    assert m, f"{pattern!r} not found in {text[:300]!r}..."
    return m.groups()


def context_free(p, q):
    V = len(p)
    return make_chain(np.tile(p, (V + 1, 1))), make_chain(np.tile(q, (V + 1, 1)))


def enumerate_law(verifier, target, drafter, **kw) -> np.ndarray:
    """:func:`specviz.proof.exact.verifier_law` as a plain array, checked to be fully resolved."""
    res = verifier_law(verifier, target, drafter, **kw)
    if hasattr(res, "law"):  # an ExactLaw: the law with the mass it could not resolve
        assert res.unresolved < TOL, res.unresolved
        res = res.law
    return np.asarray(res)


def exact_law(bug: str | None, p, q, *, K: int = 1, L: int = 1, num_draft: int | None = None) -> np.ndarray:
    """Exact law (V,) * L of a verifier (the rule or a bug) on context-free p and q, by enumeration."""
    b = BUGS[bug] if bug else None
    target, draft = context_free(np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64))
    drafter = Drafter(draft, b.drafter_mode if b and b.drafter_mode else "sample")
    return enumerate_law(b.verifier if b else verify, target, drafter, L=L,
                         num_draft=K if num_draft is None else num_draft, K=K)  # fmt: skip


def replacement_law(bug: str | None, p, q) -> np.ndarray:
    """The law of the token drawn after a rejection (one draft): (law - min(p, q)) / (1 - a)."""
    d = theory.decompose(p, q)
    return (exact_law(bug, p, q) - d.accepted) / d.total_variation


def coin_grid(thresholds, slots: int) -> tuple[np.ndarray, np.ndarray]:
    """Midpoints (C, slots) and volumes (C,) of the boxes cut by the thresholds in every coin."""
    edges = np.unique(np.concatenate([[0.0, 1.0], [t for t in thresholds if 0 < t < 1]]))
    mid, width = (edges[:-1] + edges[1:]) / 2, np.diff(edges)
    idx = np.array(list(itertools.product(range(len(mid)), repeat=slots)), dtype=np.int64).reshape(-1, slots)
    return mid[idx], np.prod(width[idx], axis=1)


def tokens_law(bug: str | None, p, q, K: int, *, drafts: list[int] | None = None) -> np.ndarray:
    """P(tokens = n), n = 0..K+1, of one context-free verification: every draft sequence and coin box.

    The coins' decisions are thresholds p(x)/q(x), so on each box of the grid they cut the
    number of tokens is constant: the weighted counts are exact, and independent of theory.
    """
    fn = BUGS[bug].verifier if bug else verify
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    V = len(p)
    if drafts is None:
        seqs = [s for s in itertools.product(range(V), repeat=K) if np.prod(q[list(s)]) > 0]
        w_seq = np.array([np.prod(q[list(s)]) for s in seqs])
    else:
        seqs, w_seq = [tuple(drafts)], np.ones(1)
    coins, w_coin = coin_grid(p[q > 0] / q[q > 0], K)
    S, C = len(seqs), len(w_coin)
    tokens = np.repeat(np.array(seqs, dtype=np.int64).reshape(S, K), C, axis=0)  # (S*C, K)
    accept = np.tile(coins, (S, 1))  # (S*C, K)
    B = S * C
    res = fn(np.broadcast_to(p, (B, K + 1, V)), np.broadcast_to(q, (B, K, V)), tokens, np.full(B, K),
             uniforms=Uniforms(accept, np.full(B, 0.5)), validate=False)  # fmt: skip
    weights = np.repeat(w_seq, C) * np.tile(w_coin, S)
    assert abs(weights.sum() - 1) < TOL
    return np.bincount(np.asarray(res.num_tokens), weights=weights, minlength=K + 2)


def exact_tokens_per_step(bug: str | None, p, q, K: int, *, drafts: list[int] | None = None) -> float:
    """E[tokens] of one context-free verification, exactly (see :func:`tokens_law`)."""
    law = tokens_law(bug, p, q, K, drafts=drafts)
    return float(np.arange(len(law)) @ law)


def random_pairs(n: int, V: int, seed: int):
    """Pairs (p, q) with zeros in the supports and both orders of over- and under-proposed tokens."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        p, q = rng.dirichlet(np.full(V, 0.7)), rng.dirichlet(np.full(V, 0.7))
        p[rng.random(V) < 0.2] = 0
        q[rng.random(V) < 0.2] = 0
        if p.sum() == 0 or q.sum() == 0:
            continue
        yield p / p.sum(), q / q.sum()


# --- the contract's figures (docs/design.md, DESIGN) --------------------------------------------


def test_reference_example_figures_by_enumeration():
    a = theory.acceptance_rate(P_REF, Q_REF)
    assert abs(a - 0.70) < TOL
    with_bonus = exact_tokens_per_step(None, P_REF, Q_REF, K_REF)
    without = exact_tokens_per_step("no_bonus", P_REF, Q_REF, K_REF)
    assert abs(with_bonus - 2.533) < TOL and abs(without - 2.19) < TOL
    assert abs(theory.expected_tokens(a, K_REF) - with_bonus) < TOL
    assert abs(theory.expected_tokens(a, K_REF, bonus=False) - without) < TOL
    assert abs((1 - a ** (K_REF + 1)) / (1 - a) - with_bonus) < TOL  # the closed form the texts write


def test_the_reference_example_is_the_same_everywhere():
    assert tuple(position.REFERENCE_P) == theory.REFERENCE_P
    assert position.preset("textbook") == (list(theory.REFERENCE_P), list(theory.REFERENCE_Q))
    assert tuple(scenarios.REFERENCE_P) == theory.REFERENCE_P


def test_design_document_states_the_computed_figures():
    text = (ROOT / "docs" / "design.md").read_text()
    a, tokens, without = grab(rf"a = ({NUMBER}), ({NUMBER}) tokens per verification \(({NUMBER}) without", text)
    rate = theory.acceptance_rate(P_REF, Q_REF)
    assert a == f"{rate:.2f}"
    assert tokens == f"{exact_tokens_per_step(None, P_REF, Q_REF, K_REF):.3f}"
    assert without == f"{exact_tokens_per_step('no_bonus', P_REF, Q_REF, K_REF):.2f}"
    assert str(list(theory.REFERENCE_P)) in text and f"K = {K_REF}" in text


# --- resample_from_p ----------------------------------------------------------------------------


def test_resample_from_p_reference_figures():
    text = explanation("resample_from_p", "and still comes out at")
    x, px, qx, out = grab(rf"token (\d+) has p = ({NUMBER}) > q = ({NUMBER}) and still comes out at ({NUMBER})", text)
    x = int(x)
    law = exact_law("resample_from_p", P_REF, Q_REF)
    assert px == f"{P_REF[x]:.2f}" and qx == f"{Q_REF[x]:.2f}" and P_REF[x] > Q_REF[x]
    assert out == f"{law[x]:.2f}" and law[x] > P_REF[x]
    (tv,) = grab(
        rf"TV = \(1 - a\) \* TV\(p, r\): ({NUMBER}) in the textbook example", BUGS["resample_from_p"].caught_by
    )
    assert tv == f"{theory.total_variation(law, P_REF):.3f}" == "0.100"
    assert "a = 0.7)" in text


def test_resample_from_p_general_claims():
    explanation("resample_from_p", "The output is min(p, q) + (1 - a) p, whose excess over p is min(p, q) - a p")
    explanation(
        "resample_from_p", "too often exactly when min(p(x), q(x)) > a p(x), that is every token with q >= p > 0"
    )
    explanation("resample_from_p", "too rarely where q(x) < a p(x). The error is TV = (1 - a) TV(p, r), at most 1 - a")
    seen_mild = False
    for p, q in random_pairs(25, 5, seed=1):
        d = theory.decompose(p, q)
        a, law = d.acceptance_rate, exact_law("resample_from_p", p, q)
        np.testing.assert_allclose(law, d.accepted + (1 - a) * p, atol=TOL, rtol=0)
        too_often, too_rarely = law > p + TOL, law < p - TOL
        np.testing.assert_array_equal(too_often, d.accepted > a * p + TOL)
        np.testing.assert_array_equal(too_rarely, q < a * p - TOL)
        if a < 1:
            assert too_often[(q >= p) & (p > 0)].all()
        seen_mild |= bool((too_often & (q < p)).any())
        tv = theory.total_variation(law, p)
        assert abs(tv - (1 - a) * theory.total_variation(p, d.residual)) < TOL
        assert tv <= 1 - a + TOL and abs((1 - a) - theory.total_variation(p, q)) < TOL
    assert seen_mild  # the cases above include tokens q under-proposes that still come out too often


def test_resample_from_p_is_harmless_only_when_the_residual_is_p():
    explanation("resample_from_p", "zero only when r happens to equal p")
    p, q = np.array([0.6, 0.4, 0.0]), np.array([0.3, 0.2, 0.5])  # q = a p on p's support: r = p
    assert np.allclose(theory.decompose(p, q).residual, p)
    assert theory.total_variation(exact_law("resample_from_p", p, q), p) < TOL
    for p, q in random_pairs(10, 4, seed=2):
        r = theory.decompose(p, q).residual
        if theory.total_variation(p, r) > 1e-6:
            assert theory.total_variation(exact_law("resample_from_p", p, q), p) > 1e-9


# --- unclamped_residual -------------------------------------------------------------------------


def dip_before_excess(p, q) -> bool:
    """A token with q > p before a token with p > q other than the last."""
    over, under = np.flatnonzero(q > p), np.flatnonzero(p > q)
    under = under[under < len(p) - 1]
    return bool(len(over) and len(under) and over.min() < under.max())


def test_unclamped_residual_claims():
    explanation("unclamped_residual", "so the draw is pushed toward later tokens (the chance of a token at or")
    explanation("unclamped_residual", "The law changes exactly when a token with q > p comes before a token with p > q")
    explanation("unclamped_residual", "p > q other than the last one, so the textbook example")
    caught_by("unclamped_residual", "when a token with q > p comes before one with p > q other than the last (not in")
    outcomes = set()
    for p, q in random_pairs(30, 5, seed=3):
        if theory.acceptance_rate(p, q) > 1 - 1e-9:
            continue
        drawn, r = replacement_law("unclamped_residual", p, q), theory.decompose(p, q).residual
        assert (np.cumsum(drawn) <= np.cumsum(r) + 1e-9).all()  # pushed toward later tokens
        changed = theory.total_variation(exact_law("unclamped_residual", p, q), p) > 1e-9
        assert changed == dip_before_excess(p, q), (p, q)
        outcomes.add(changed)
    assert outcomes == {True, False}
    assert not dip_before_excess(P_REF, Q_REF)
    assert theory.total_variation(exact_law("unclamped_residual", P_REF, Q_REF), P_REF) < TOL


def test_unclamped_residual_falls_through_to_a_token_the_residual_never_gives():
    explanation("unclamped_residual", "the draw falls through to the last token, which the residual may give no mass")
    p, q = np.array([0.1, 0.5, 0.4]), np.array([0.3, 0.2, 0.5])  # running sum of p - q: -0.2, 0.1, 0.0
    r = theory.decompose(p, q).residual
    assert r[-1] == 0 and replacement_law("unclamped_residual", p, q)[-1] > 0.5


# --- shared_uniform -----------------------------------------------------------------------------


def accept_second_given_first(bug: str | None, r0: float, r1: float) -> float:
    """P(x_1 accepted | x_0 accepted), exactly, for drafts with ratios r0 and r1 (V = 2, token 0 drafted)."""

    def pq(r):  # p(0)/q(0) = r with q(0) = 0.4 (r <= 2.5)
        return [0.4 * r, 1 - 0.4 * r], [0.4, 0.6]

    (p0, q0), (p1, q1) = pq(r0), pq(r1)
    coins, w = coin_grid([r0, r1], 2)
    B = len(w)
    target = np.broadcast_to(np.array([p0, p1, [0.5, 0.5]]), (B, 3, 2))
    draft = np.broadcast_to(np.array([q0, q1]), (B, 2, 2))
    fn = BUGS[bug].verifier if bug else verify
    res = fn(target, draft, np.zeros((B, 2), dtype=np.int64), np.full(B, 2), uniforms=Uniforms(coins, np.full(B, 0.5)))
    n = np.asarray(res.num_accepted)
    both = float(w @ (n >= 2))
    if bug == "shared_uniform":  # a run is as likely as its least likely step
        assert abs(both - min(1, r0, r1)) < TOL
    else:
        assert abs(both - min(1, r0) * min(1, r1)) < TOL
    return both / float(w @ (n >= 1))


@pytest.mark.parametrize("r0, r1", [(0.5, 0.4), (0.4, 0.5), (2.0, 0.4), (0.5, 1.5), (0.3, 0.3)])
def test_shared_uniform_acceptance_after_an_acceptance(r0, r1):
    explanation("shared_uniform", "so x_1 is accepted with probability min(1, r_1 / min(1, r_0)), never less")
    explanation("shared_uniform", "than the min(1, r_1) of a fresh coin and more when both ratios are below 1")
    shared = accept_second_given_first("shared_uniform", r0, r1)
    fresh = accept_second_given_first(None, r0, r1)
    assert abs(shared - min(1, r1 / min(1, r0))) < TOL
    assert abs(fresh - min(1, r1)) < TOL
    assert shared >= fresh - TOL
    assert (shared > fresh + 1e-9) == (r0 < 1 and r1 < 1)


def test_shared_uniform_first_token_exact_second_not():
    explanation(
        "shared_uniform", "The first token's law is exactly p; the second token's is not, and neither is the joint"
    )
    caught_by("shared_uniform", "a first-token-only test passes, since the first token's law is exactly p")
    for K in (2, 3):
        law = exact_law("shared_uniform", P_REF, Q_REF, K=K, L=2)
        np.testing.assert_allclose(law.sum(1), P_REF, atol=TOL, rtol=0)
        assert theory.total_variation(law.sum(0), P_REF) > 0.01
        assert theory.total_variation(law, np.outer(P_REF, P_REF)) > 0.01


def test_shared_uniform_runs_are_longer():
    explanation("shared_uniform", "A run of acceptances is as likely as its least likely step (min(1, r_0, r_1, ...)")
    explanation("shared_uniform", "so runs reach every length at least as often as the rule's, and more often once two")
    caught_by("shared_uniform", "tokens per verification (more than theory)")
    for p, q in [(P_REF, Q_REF), *random_pairs(6, 4, seed=6)]:
        for K in (1, 2, 3):
            bug, ok = tokens_law("shared_uniform", p, q, K), tokens_law(None, p, q, K)
            reach_bug, reach_ok = bug[::-1].cumsum()[::-1], ok[::-1].cumsum()[::-1]  # P(tokens >= n)
            assert (reach_bug >= reach_ok - TOL).all()
            between = ((q > p) & (p > 0)).any()  # a draft can have 0 < p/q < 1
            assert (np.abs(reach_bug - reach_ok).max() > 1e-9) == (K >= 2 and between), (p, q, K)
    assert exact_tokens_per_step("shared_uniform", P_REF, Q_REF, K_REF) > theory.expected_tokens(0.7, K_REF) + 0.01
    p, q = np.array([0.5, 0.5, 0.0]), np.array([0.3, 0.3, 0.4])  # ratios 5/3, 5/3 and 0: no coin is in doubt
    assert np.abs(exact_law("shared_uniform", p, q, K=2, L=2) - np.outer(p, p)).max() < TOL


def test_count_after_rejection_emits_more_tokens():
    explanation("count_after_rejection", "rows emit more tokens than the rule does (never fewer)")
    caught_by("count_after_rejection", "tokens per verification (more than theory)")
    bug = "count_after_rejection"
    assert exact_tokens_per_step(bug, P_REF, Q_REF, K_REF) > theory.expected_tokens(0.7, K_REF) + 0.01
    # never fewer: the same inputs and uniforms, row by row
    rng = np.random.default_rng(4)
    B, K, V = 20_000, 4, 5
    P, Q = rng.dirichlet(np.ones(V), (B, K + 1)), rng.dirichlet(np.ones(V), (B, K))
    x = np.array([[rng.choice(V, p=Q[b, i]) for i in range(K)] for b in range(200)])
    x = np.tile(x, (B // 200, 1))
    j = rng.integers(0, K + 1, B)
    u = Uniforms(rng.random((B, K)), rng.random(B))
    ok = np.asarray(verify(P, Q, x, j, uniforms=u).num_tokens)
    n = np.asarray(BUGS[bug].verifier(P, Q, x, j, uniforms=u).num_tokens)
    assert (n >= ok).all() and (n > ok).any()


# --- count_after_rejection ----------------------------------------------------------------------


def test_count_after_rejection_needs_two_drafts():
    explanation("count_after_rejection", "With one draft per round nothing follows a rejection and the law is exact")
    caught_by("count_after_rejection", "needs at least 2 drafts per round")
    joint = np.outer(P_REF, P_REF)
    assert np.abs(exact_law("count_after_rejection", P_REF, Q_REF, K=1, L=2) - joint).max() < TOL
    assert theory.total_variation(exact_law("count_after_rejection", P_REF, Q_REF, K=2, L=2), joint) > 0.01


# --- reused_coin --------------------------------------------------------------------------------


def test_reused_coin_reference_figure():
    text = explanation("reused_coin", "comes out at")
    x, out, should = grab(rf"token (\d+) comes out at ({NUMBER}) instead of ({NUMBER})", text)
    x = int(x)
    law = exact_law("reused_coin", P_REF, Q_REF)
    assert x == int(np.flatnonzero(theory.decompose(P_REF, Q_REF).residual > 0)[0])
    assert out == f"{law[x]:.3f}" and float(should) == P_REF[x] and law[x] < P_REF[x]


def test_reused_coin_starves_the_first_residual_token_unless_harmless():
    explanation("reused_coin", "the replacement is pushed toward later tokens (the chance of a token at or below any")
    explanation("reused_coin", "comes out too rarely, unless the residual has a single token or every draft that can")
    caught_by("reused_coin", "the exact law of one position and every chi-square test")
    outcomes = set()
    cases = list(random_pairs(25, 4, seed=5)) + [
        (np.array([0.5, 0.5, 0.0]), np.array([0.2, 0.3, 0.5])),  # only token 2 can be rejected, and p(2) = 0
        (np.array([0.7, 0.2, 0.1]), np.array([0.2, 0.4, 0.4])),  # a residual of one token
    ]
    for p, q in cases:
        d = theory.decompose(p, q)
        if d.acceptance_rate > 1 - 1e-9:
            continue
        drawn, r = replacement_law("reused_coin", p, q), d.residual
        assert (np.cumsum(drawn) <= np.cumsum(r) + 1e-9).all()
        first = int(np.flatnonzero(r > 0)[0])
        harmless = (r > 0).sum() == 1 or (p[q > p] == 0).all()
        assert (drawn[first] < r[first] - 1e-9) == (not harmless), (p, q)
        assert (theory.total_variation(exact_law("reused_coin", p, q), p) < 1e-9) == harmless
        outcomes.add(harmless)
    assert outcomes == {True, False}


# --- wrong_bonus_row, no_bonus, greedy_draft_sampled_q -----------------------------------------


def test_wrong_bonus_row_only_with_ragged_rows():
    explanation("wrong_bonus_row", "With equal draft counts the two are the same row and nothing shows")
    caught_by("wrong_bonus_row", "with ragged rows; invisible when every row has K drafts")
    joint = np.outer(P_REF, P_REF)
    assert np.abs(exact_law("wrong_bonus_row", P_REF, Q_REF, K=2, L=2) - joint).max() < TOL
    assert theory.total_variation(exact_law("wrong_bonus_row", P_REF, Q_REF, K=2, L=2, num_draft=1), joint) > 0.01


def test_no_bonus_figures_and_exactness():
    text = explanation("no_bonus", "The emitted tokens still follow the target exactly")
    without, with_bonus, K = grab(rf"; ({NUMBER}) instead of ({NUMBER}) with K = (\d+) in the textbook example", text)
    K = int(K)
    assert K == K_REF
    assert without == f"{exact_tokens_per_step('no_bonus', P_REF, Q_REF, K):.2f}"
    assert with_bonus == f"{exact_tokens_per_step(None, P_REF, Q_REF, K):.3f}"
    a = 0.7
    assert abs((1 - a ** (K + 1)) / (1 - a) - a**K - exact_tokens_per_step("no_bonus", P_REF, Q_REF, K)) < TOL
    assert "(1 - a^(K+1)) / (1 - a) - a^K instead of (1 - a^(K+1)) / (1 - a)" in text
    assert np.abs(exact_law("no_bonus", P_REF, Q_REF, K=2, L=3) - np.einsum("i,j,k", P_REF, P_REF, P_REF)).max() < TOL


def test_greedy_draft_sampled_q_figures():
    text = explanation("greedy_draft_sampled_q", "accepts it with min(1, p/q) instead of p(x)")
    x, x2, x3, ratio, x4, out, should = grab(
        rf"always proposes token (\d+), p\((\d+)\) / q\((\d+)\) = ({NUMBER}) >= 1 accepts it every time, and token "
        rf"(\d+) comes out with probability ({NUMBER}) instead of ({NUMBER})",
        text,
    )
    assert len({x, x2, x3, x4}) == 1
    x = int(x)
    assert x == int(np.argmax(Q_REF)) and float(ratio) == P_REF[x] / Q_REF[x] >= 1
    law = exact_law("greedy_draft_sampled_q", P_REF, Q_REF)
    assert float(out) == pytest.approx(law[x], abs=TOL) and float(should) == P_REF[x]


def test_a_deterministic_drafter_must_report_one_hot_q():
    explanation("greedy_draft_sampled_q", "A deterministic drafter must report a one-hot q (or draft_probs=None)")
    p, q = np.array([0.2, 0.5, 0.3]), np.array([0.5, 0.3, 0.2])  # argmax q = 0, with q(0) < 1
    x = int(np.argmax(q))
    for reported, rate in ((q, min(1, p[x] / q[x])), (np.eye(3)[x], p[x])):
        coins, w = coin_grid([p[x] / reported[x]], 1)
        B = len(w)
        res = verify(np.broadcast_to(p, (B, 2, 3)), np.broadcast_to(reported, (B, 1, 3)), np.full((B, 1), x),
                     np.ones(B, dtype=np.int64), uniforms=Uniforms(coins, np.full(B, 0.5)))  # fmt: skip
        assert abs(float(w @ np.asarray(res.num_accepted)) - rate) < TOL
    target, _ = context_free(p, q)
    one_hot = make_chain(np.tile(np.eye(3)[x], (4, 1)))  # the argmax drafter, reporting what it did
    law = enumerate_law(verify, target, Drafter(one_hot), L=2, num_draft=2)
    assert np.abs(law - np.outer(p, p)).max() < TOL
    assert theory.total_variation(exact_law("greedy_draft_sampled_q", p, q), p) > 0.01


# --- caught_by: what the proof suite's tests see -------------------------------------------------

N_CAUGHT, SEED_CAUGHT = 100_000, 5
CHECKS = {
    "every chi-square test": ("first_token", "positions", "joint"),
    "joint chi-square test": ("joint",),
    "tokens per verification": ("tokens",),
}


def outcome(res, check: str) -> bool:
    """True where the check passes."""
    if check == "positions":
        return all(t.passed for t in res.positions)
    if check == "tokens":
        return bool(res.tokens.passed)
    return bool(getattr(res, check).passed)


@pytest.fixture(scope="module")
def control():
    """The correct verifier on every scenario a bug is judged in, same N and seed: everything passes."""
    homes = {s for b in BUGS for s in scenarios.HOME.get(b, ("reference",))}
    out = {s: prove.run_case(s, n=N_CAUGHT, seed=SEED_CAUGHT) for s in homes}
    for s, res in out.items():
        for check in ("first_token", "positions", "joint", "tokens"):
            assert outcome(res, check), (s, check)
    return out


@pytest.mark.parametrize("name", list(BUGS))
def test_caught_by_names_the_checks_that_fail(control, name):
    bug = BUGS[name]
    text = bug.caught_by
    named = {c for phrase, checks in CHECKS.items() if phrase in text for c in checks}
    assert named or "exact law" in text, text
    for scenario in scenarios.HOME.get(name, ("reference",)):
        res = prove.run_case(scenario, bug=bug, n=N_CAUGHT, seed=SEED_CAUGHT)
        for check in named:
            assert not outcome(res, check), (scenario, check, "named in caught_by but passed")
        if "(more than theory)" in text:
            assert res.tokens.measured > res.tokens.expected
        if "a first-token-only test passes" in text:
            assert outcome(res, "first_token"), res.first_token
        if "every distribution test passes" in text:
            assert all(outcome(res, c) for c in ("first_token", "positions", "joint"))
            assert res.tokens.measured < res.tokens.expected
    if "exact law of one position" in text:
        p, q = (
            (P_REF, Q_REF)
            if "not in the textbook example" not in text
            else (np.array([0.1, 0.5, 0.4]), np.array([0.3, 0.2, 0.5]))
        )
        assert theory.total_variation(exact_law(name, p, q), p) > 0.01


# --- captions and scenario descriptions outside bugs.py -----------------------------------------


def test_preset_help_claims():
    help_ = position.PRESET_HELP
    ref_p = re.findall(NUMBER, grab(r"p = \[([^\]]*)\] against uniform q", help_["textbook"])[0])
    assert [float(v) for v in ref_p] == list(theory.REFERENCE_P)
    (a,) = grab(rf"a = ({NUMBER})", help_["textbook"])
    assert float(a) == round(theory.acceptance_rate(*position.preset("textbook")), 10)
    assert "every draft is accepted" in help_["p == q"]
    assert abs(tokens_law(None, *position.preset("p == q"), 2)[3] - 1) < TOL  # both drafts and the bonus, always
    assert "a = 0, every draft is rejected" in help_["disjoint supports"]
    p, q = position.preset("disjoint supports")
    assert theory.acceptance_rate(p, q) == 0 and abs(tokens_law(None, p, q, 2)[1] - 1) < TOL  # the replacement only
    (x,) = grab(r"always proposing token (\d+): accepted with probability p\(\1\)", help_["one-hot q"])
    p, q = position.preset("one-hot q")
    assert q == list(np.eye(len(q))[int(x)])
    assert abs(exact_tokens_per_step(None, p, q, 1) - 1 - p[int(x)]) < TOL  # accepted w.p. p(x), then 1 token
    (v,) = grab(r"over (\d+) tokens", help_["random"])
    assert all(len(d) == int(v) for d in position.preset("random", seed=3))


def scenario_number_checks(sc):
    """(pattern, check) for every kind of number a scenario's title and description state."""
    target, draft = scenarios.scenario_chains(sc)

    def context_free_rate():
        assert (target.table == target.table[0]).all() and (draft.table == draft.table[0]).all()
        return theory.acceptance_rate(target.table[0], draft.table[0])

    return [
        (r"over (\d+) tokens", lambda v: int(v) == sc.V),
        (r"(\d+) drafts? per round", lambda v: int(v) == sc.K),
        (r"drafts (\d+) to (\d+) tokens per round", lambda lo, hi: (int(lo), int(hi)) == (0, sc.K) and sc.ragged),
        (r"(\d+) tokens judged", lambda v: int(v) == sc.L),
        (r"L = K \+ (1)", lambda one: sc.L == sc.K + 1),
        (rf"a = ({NUMBER})", lambda v: float(v) == round(context_free_rate(), 10)),
        (rf"({NUMBER}) tokens per step", lambda v: v == f"{theory.expected_tokens(context_free_rate(), sc.K):.3f}"),
        (r"p = \[([0-9., ]+)\] vs uniform q",
         lambda v: np.allclose(target.table, [float(t) for t in v.split(",")]) and np.allclose(draft.table, 1 / sc.V)),
        (r"temperature (0)", lambda v: ((target.table == 0) | (target.table == 1)).all()),
        (r"Half of every row of both chains is exactly (0)",
         lambda zero: all(((t.table == 0).sum(1) == sc.V // 2).all() for t in (target, draft))),
    ]  # fmt: skip


@pytest.mark.parametrize("name", list(scenarios.SCENARIOS))
def test_every_number_in_a_scenario_description_is_checked(name):
    sc = scenarios.SCENARIOS[name]
    text = f"{sc.title}. {sc.description}"
    covered = []
    for pattern, check in scenario_number_checks(sc):
        for m in re.finditer(pattern, text):
            assert check(*m.groups()), (name, m.group(0))
            covered.append(m.span())
    left = [m.group(0) for m in re.finditer(NUMBER, text) if not any(a <= m.start() < b for a, b in covered)]
    assert not left, f"scenario {name!r} states {left} with no check in tests/test_explanations.py: add one"


# --- the README and the design document ---------------------------------------------------------

WORDS = {"three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11,
         "twelve": 12}


def test_readme_figures():
    import prose  # tests/ is on the path: README.md and docs/*.md

    from specviz import PAD_TOKEN
    from specviz.proof import stats

    text = prose.text()
    (n,) = grab(r"Each case generates N = ([0-9,]+) sequences", text)
    assert int(n.replace(",", "")) == prove.DEFAULT_N
    (alpha,) = grab(rf"chi-square at level ({NUMBER})", text)
    assert float(alpha) == stats.ALPHA
    (power,) = grab(r"catches with (\d+)%\s+probability", text)
    assert int(power) / 100 == stats.POWER
    (tol,) = grab(r"equals the target's law to (1e-\d+)", text)
    law = exact_law(None, P_REF, Q_REF, K=2, L=2)
    assert np.abs(law - np.outer(P_REF, P_REF)).max() < float(tol)
    (pages,) = grab(r"The app has (\w+) pages", text)
    assert WORDS[pages] == len(flow.LESSONS)
    (sizes,) = grab(r"sample ([0-9, /]+) times", text)
    assert [int(v.replace(",", "")) for v in sizes.split("/")] == list(why_exact.SAMPLE_SIZES)
    (py,) = grab(r"Quick start \(Python (3\.\d+)", text)
    assert f'requires-python = ">={py}"' in (ROOT / "pyproject.toml").read_text()
    assert "padded with -1" in text and PAD_TOKEN == -1
    assert "(docs/design.md)" in text and (ROOT / "docs" / "design.md").exists()


def test_design_document_names_what_exists_and_states_true_figures():
    from specviz.proof import stats

    text = (ROOT / "docs" / "design.md").read_text()
    named = set(re.findall(r"`((?:specviz|app_pages)/(?:[a-z_0-9]+/)?[a-z_0-9]+\.py)`", text))
    assert len(named) > 40
    missing = [f for f in sorted(named) if not (ROOT / f).exists()]
    assert not missing, f"docs/design.md names files that do not exist: {missing}"
    # Every module of the package is named, so the tables cannot fall behind the code.
    modules = {str(f.relative_to(ROOT)) for f in (ROOT / "specviz").rglob("*.py") if f.name != "__init__.py"}
    assert modules - {"specviz/__main__.py"} <= named, sorted(modules - named)
    import importlib

    for dotted in set(re.findall(r"`(specviz\.[A-Za-z_][A-Za-z_.]*[A-Za-z_])`", text)):
        head, obj = dotted, None
        while obj is None:  # the longest importable prefix, then attributes
            try:
                obj = importlib.import_module(head)
            except ModuleNotFoundError:
                head = head.rpartition(".")[0]
        for attr in dotted[len(head) :].split(".")[1:]:
            assert hasattr(obj, attr), f"docs/design.md names {dotted}, which does not exist"
            obj = getattr(obj, attr)
    (alpha,) = grab(rf"at level alpha \(({NUMBER}) by default\)", text)
    assert float(alpha) == stats.ALPHA
    (power,) = grab(rf"detects with probability\s+({NUMBER})", text)
    assert float(power) == stats.POWER
    (tol,) = grab(r"joint law\s+\(`MarkovChain.joint_law`\) to (1e-\d+)", text)
    assert np.abs(exact_law(None, P_REF, Q_REF, K=2, L=2, num_draft=1) - np.outer(P_REF, P_REF)).max() < float(tol)


def test_readme_counts_the_default_prove_run():
    import prose

    text = prose.one_line()
    scs, bug_cases = grab(r"The default run \((\d+) scenarios, (\d+) bug cases\)", text)
    cases = prove.plan()
    assert int(scs) == len(scenarios.SCENARIOS) == sum(c.bug is None for c in cases)
    assert int(bug_cases) == sum(c.bug is not None for c in cases)
    (listed,) = grab(r"the embedded suite: (\d+) scenarios", text)
    assert int(listed) == len(scenarios.SCENARIOS)


# --- the engine bugs (issue 11): every figure and claim of their texts ------------------------------


def test_q_unprocessed_claims():
    from specviz.proof import engine_bugs
    from specviz.verifiers.processing import output_law

    text = explanation("q_unprocessed", "A uniform q is the same at every temperature")
    (t,) = grab(rf"the drafter samples at temperature ({NUMBER})", text)
    assert float(t) == engine_bugs.DRAFTER.temperature
    # The reference example hides it: its q is uniform, its raw softmax the same.
    assert theory.total_variation(exact_law("q_unprocessed", P_REF, Q_REF), P_REF) < TOL
    p, q = np.array([0.1, 0.5, 0.4]), np.array([0.3, 0.2, 0.5])
    assert "with p = [0.1, 0.5, 0.4] and processed q = [0.3, 0.2, 0.5]" in text
    raw = re.findall(NUMBER, grab(r"raw r = \[([^\]]*)\]", text)[0])
    z = 0.5 * np.log(q)  # logits whose softmax at temperature 0.5 is q
    r = np.exp(z) / np.exp(z).sum()
    assert np.allclose([float(v) for v in raw], r, atol=5e-4)
    x, got, want = grab(rf"token ([0-9]+) comes out at ({NUMBER}) instead of ({NUMBER})", text)
    law = exact_law("q_unprocessed", p, q)  # enumeration of the real verifier
    assert abs(law - output_law(p, q, r)).max() < TOL  # "the output is q(x) min(1, p(x)/r(x)) plus ..."
    assert abs(law[int(x)] - float(got)) < 5e-4 and float(want) == p[int(x)]
    assert int(x) == int(np.argmax(law - p))


def test_target_unprocessed_claims():
    from specviz.proof import engine_bugs

    text = explanation("target_unprocessed", "the output follows the raw target")
    (t,) = grab(rf"The request asked for temperature ({NUMBER})", text)
    assert float(t) == engine_bugs.REQUEST.temperature
    raw = np.sqrt(P_REF) / np.sqrt(P_REF).sum()  # softmax(z) when P_REF = softmax(z / 0.5)
    for p, q in [(P_REF, Q_REF), *random_pairs(5, 4, seed=111)]:
        z = 0.5 * np.log(np.where(p > 0, p, 1e-300))
        r = np.where(p > 0, np.exp(z), 0.0)
        law = exact_law("target_unprocessed", p, q, K=2)
        assert abs(law - r / r.sum()).max() < 1e-9  # "the output follows the raw target"
    law = exact_law("target_unprocessed", P_REF, Q_REF)
    for tok in (0, 3):
        got, want = grab(rf"token {tok} comes out at ({NUMBER}) instead of ({NUMBER})", text)
        assert abs(law[tok] - float(got)) < 5e-4 and abs(raw[tok] - float(got)) < 5e-4 and float(want) == P_REF[tok]


def test_shared_noise_stream_claims():
    text = explanation("shared_noise_stream", "is never accepted and never replaced")
    for p, q in [(P_REF, Q_REF), *random_pairs(20, 5, seed=112)]:
        law = exact_law("shared_noise_stream", p, q)
        d = theory.decompose(p, q)
        F = np.cumsum(q) - q
        ratio = np.where(q > 0, p / np.where(q > 0, q, 1), 0)
        acc = np.where(q > 0, np.clip(ratio - F, 0, q), 0)  # "clip((p/q - F(x-1)) / q(x), 0, 1)" times q(x)
        assert abs(law - (acc + (1 - acc.sum()) * d.residual)).max() < 1e-9
        assert (acc[(q > 0) & (p >= q)] == q[(q > 0) & (p >= q)]).all()  # "still always passes"
        first, last = np.flatnonzero(q > 0)[[0, -1]]
        if first == 0:  # "the first token of the vocabulary's order ... at least as often"
            assert acc[0] >= d.accepted[0] - TOL
        if last == len(q) - 1:  # "... the last token ... at most as often"
            assert acc[-1] <= d.accepted[-1] + TOL
    x, r, lo, hi, want = grab(
        rf"token ([0-9]+) \(p/q = ({NUMBER}), u in \[({NUMBER}), ({NUMBER})\)\) is never accepted and never "
        rf"replaced, so it never comes out instead of ({NUMBER})", text)  # fmt: skip
    x = int(x)
    assert (
        float(r) == P_REF[x] / Q_REF[x] and float(lo) == x / 4 and float(hi) == (x + 1) / 4 and float(want) == P_REF[x]
    )
    assert exact_law("shared_noise_stream", P_REF, Q_REF)[x] == 0 and theory.decompose(P_REF, Q_REF).residual[x] == 0


def test_late_rejection_claims():
    explanation("late_rejection", "with one draft the replacement comes from p: the law is then resample_from_p's")
    for p, q in [(P_REF, Q_REF), *random_pairs(5, 4, seed=113)]:
        one = exact_law("late_rejection", p, q, K=1)
        assert abs(one - exact_law("resample_from_p", p, q, K=1)).max() < TOL
        # "only the last position's mistake shows": with 2 drafts the first token is exact.
        assert abs(exact_law("late_rejection", p, q, K=2) - p).max() < 1e-9
    caught_by("late_rejection", "with one draft (resample_from_p's)")


def test_reused_coin_keeps_one_name():
    explanation("reused_coin", "reused_accept_coin_for_residual; the catalogue keeps one name")
    assert "reused_accept_coin_for_residual" not in BUGS


def test_engine_bug_position_laws_match_enumeration():
    """theory.position_law's closed forms for the new bugs against the real verifiers, K = 1..2."""
    for name in ("q_unprocessed", "target_unprocessed", "shared_noise_stream", "late_rejection"):
        for p, q in [(P_REF, Q_REF), *random_pairs(4, 4, seed=114)]:
            for K in (1, 2):
                law = exact_law(name, p, q, K=K)
                assert abs(law - theory.position_law(p, q, name, K=K)).max() < 1e-9, (name, K)


def test_readme_lists_the_whole_bug_catalogue():
    import prose

    from specviz.proof import engine_bugs

    text = prose.one_line()
    start = text.index("**The bug catalogue**")
    section = text[start : text.index("**Other kinds of verifier.**")]
    for name in list(BUGS) + list(engine_bugs.FAULTS):
        assert f"`{name}`" in section, name
    assert "`no_bonus` (lossless but slower)" in section and not BUGS["no_bonus"].changes_law
    for name in engine_bugs.FAULTS:
        assert not engine_bugs.FAULTS[name].changes_law
