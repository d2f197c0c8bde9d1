"""The interview walkthrough: every formula against simulation or exact computation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from specviz import verify
from specviz.app import interview as iv
from specviz.app import links
from specviz.app.position import draw_iid
from specviz.app.speed import measure_tokens
from specviz.proof import simulate, theory
from specviz.proof.bugs import BUGS
from specviz.proof.markov import Drafter, make_chain

P, Q = np.array(iv.REFERENCE_P), np.array(iv.UNIFORM_Q)
CRIT = 0.001  # level of every chi-square below


def chi2_passes(counts: np.ndarray, law: np.ndarray) -> bool:
    """Pearson chi-square at level CRIT over cells with expectation >= 5 (the rest pooled)."""
    n = counts.sum()
    e, o = n * law.ravel(), counts.ravel().astype(float)
    small = e < 5
    e = np.append(e[~small], e[small].sum())
    o = np.append(o[~small], o[small].sum())
    keep = e > 0
    stat = ((o[keep] - e[keep]) ** 2 / e[keep]).sum()
    return stat < sps.chi2.isf(CRIT, keep.sum() - 1)


def test_every_answer_is_computed_and_checked():
    qs = {q.key: q for q in iv.questions()}
    assert qs["acceptance"].answer == pytest.approx(0.7, abs=1e-12)
    assert qs["tokens"].answer == pytest.approx((1 - 0.7**4) / 0.3, abs=1e-12)
    assert qs["speedup"].answer == pytest.approx(((1 - 0.7**4) / 0.3) / 1.3, abs=1e-12)
    for q in qs.values():
        assert iv.check(q, q.answer)
        assert not iv.check(q, None)
        if q.kind == "number":
            assert not iv.check(q, float(q.answer) + 2 * q.tolerance + 0.01)
            assert not iv.check(q, "abc")
        else:
            assert q.answer in q.choices
            assert not iv.check(q, next(c for c in q.choices if c != q.answer))


def test_acceptance_and_tokens_per_pass_against_the_verifier():
    """Measured mean over 200,000 rows within 4 standard errors of each closed form."""
    a = theory.acceptance_rate(P, Q)
    m = measure_tokens(P, Q, [1, 3], 200_000, seed=1)
    for K, mean, se in zip(m.K, m.mean, m.se, strict=True):
        assert abs(mean - theory.expected_tokens(a, int(K))) < 4 * se
        assert abs((mean - 1) - iv.accepted_drafts(a, int(K))) < 4 * se
    # Negative control for the off-by-one: accepted drafts are not the tokens per pass.
    assert abs(m.mean[1] - iv.accepted_drafts(a, 3)) > 20 * m.se[1]


def test_speedup_exists_at_k1_iff_a_exceeds_c_and_best_k_is_the_argmax():
    for a in np.linspace(0, 0.95, 20):
        for c in np.linspace(0, 1, 21):
            s = iv.speedup(a, 1, c)
            assert s == pytest.approx((1 + a) / (1 + c), abs=1e-12)
            if abs(a - c) > 1e-9:
                assert (s > 1) == (a > c)
    for a, c in [(0.8, 0.05), (0.5, 0.2), (0.95, 0.01), (0.3, 0.5)]:
        brute = max(range(1, 17), key=lambda K: (iv.speedup(a, K, c), -K))
        assert iv.best_K(a, c) == brute


def test_verify_cost_is_the_roofline_ratio():
    ridge = iv.EXAMPLE_PEAK_FLOPS / iv.EXAMPLE_BANDWIDTH
    for B, K in [(1, 4), (8, 4), (64, 3), (256, 4), (1024, 7)]:
        r = iv.roofline(7e9, [B * (K + 1), B])
        assert iv.verify_cost(B, K) == pytest.approx(r.seconds[0] / r.seconds[1], rel=1e-12)
        assert (iv.verify_cost(B, K) == 1.0) == (B * (K + 1) <= ridge)


def test_typical_acceptance_law_against_simulation_with_a_negative_control():
    rng = np.random.default_rng(2)
    n = 200_000
    x = draw_iid(Q, rng.random(n))
    h = -(P * np.log(P)).sum()
    accept = P[x] > min(0.3, 0.6 * np.exp(-h))
    out = np.where(accept, x, draw_iid(P, rng.random(n)))
    counts = np.bincount(out, minlength=4)
    law = iv.typical_acceptance_law(P, Q, 0.3, 0.6)
    assert chi2_passes(counts, law)
    assert not chi2_passes(counts, P)  # lossy: the target's law is rejected


def test_shared_coin_two_token_law_against_the_real_bug():
    rng = np.random.default_rng(4)
    target, draft = make_chain(np.tile(P, (5, 1))), make_chain(np.tile(Q, (5, 1)))
    sim = simulate.generate(BUGS["shared_uniform"].verifier, target, Drafter(draft), n=200_000, L=2, K=2, rng=rng)
    counts = np.bincount(sim.sequences[:, 0] * 4 + sim.sequences[:, 1], minlength=16)
    law = iv.shared_coin_two_token_law(P, Q)
    assert abs(law.sum() - 1) < 1e-12
    assert chi2_passes(counts, law)
    assert not chi2_passes(counts, np.outer(P, P))  # negative control: the bug is not lossless
    good = simulate.generate(verify, target, Drafter(draft), n=200_000, L=2, K=2, rng=rng)
    assert chi2_passes(np.bincount(good.sequences[:, 0] * 4 + good.sequences[:, 1], minlength=16), np.outer(P, P))


def test_sample_and_match_acceptance_is_sum_p_q():
    rng = np.random.default_rng(6)
    n = 400_000
    x, y = draw_iid(Q, rng.random(n)), draw_iid(P, rng.random(n))
    rate = (x == y).mean()
    assert abs(rate - P @ Q) < 4 * np.sqrt(P @ Q * (1 - P @ Q) / n)
    assert P @ Q < theory.acceptance_rate(P, Q)


def test_cheat_sheet_titles_end_once():
    """Issue 29: "Is typical acceptance lossless?." in the cheat sheet."""
    sheet = iv.cheat_sheet()
    assert "?." not in sheet and "**Is typical acceptance lossless?**" in sheet
    assert "**Acceptance rate.**" in sheet  # control: a title without its own stop gets one


def test_cheat_sheet_carries_every_formula_and_the_score():
    qs = iv.questions()
    sheet = iv.cheat_sheet({q.key: i % 2 == 0 for i, q in enumerate(qs)})
    for q in qs:
        assert q.title in sheet
    for name in BUGS:
        assert name in sheet
    assert f"{(len(qs) + 1) // 2} of {len(qs)} right" in sheet


def test_reveals_write_math_in_unicode_with_computed_numbers():
    import re

    qs = {q.key: q for q in iv.questions()}
    ascii_math = re.compile(r"sum_|\^|\(p - q\)\+|1 - a\b| x p\b")
    for q in qs.values():
        for part in (q.prompt, q.reveal, *q.choices):
            assert not ascii_math.search(part), (q.key, part)
    # Control: the pattern does catch the ASCII forms the reveals used to have.
    assert all(ascii_math.search(t) for t in ("sum_x min(p, q)", "a^(K+1)", "(p - q)+ normalized", "1 - a", "p x p"))
    a = theory.acceptance_rate(iv.REFERENCE_P, iv.UNIFORM_Q)
    assert f"Σₓ min(p(x), q(x)) = {a:.3f}" in qs["acceptance"].reveal
    assert f"(1 − aᴷ⁺¹) / (1 − a) = {theory.expected_tokens(a, 3):.3f}" in qs["tokens"].reveal
    assert f"B·(K+1) = {256 * 5} tokens" in qs["roofline"].reveal and f"{iv.verify_cost(256, 4):.2f}" in qs[
        "roofline"].reveal  # fmt: skip


def test_answers_round_trip_through_the_link_text():
    qs = iv.questions()
    right = {q.key: q.answer for q in qs}
    text = iv.encode_answers(right)
    assert iv.decode_answers(text) == right
    assert iv.results(right) == {q.key: True for q in qs}
    some = {qs[0].key: 0.1, qs[1].key: qs[1].choices[0]}
    assert iv.encode_answers(some) == "0.1,0"  # unanswered questions at the end leave nothing
    assert iv.results(iv.decode_answers("0.1,0")) == {qs[0].key: False, qs[1].key: False}
    assert iv.decode_answers("") == {} and iv.encode_answers({}) == ""
    gap = iv.decode_answers(",1")
    assert list(gap) == [qs[1].key]


@pytest.mark.parametrize("text", ["x", "0.7,9", "0.7,1.5", "nan", "," * 20])
def test_malformed_answer_text_is_an_input_error(text):
    with pytest.raises(ValueError, match="^answers"):
        iv.decode_answers(text)


def test_verify_cost_does_not_depend_on_the_model_size():
    """The Interview page's roofline caption: the cost ratio does not depend on the size."""
    for params in (1e6, 7e9, 4e11):
        for B, K in [(8, 4), (256, 4), (4096, 16)]:
            r = iv.roofline(params, [B * (K + 1), B])
            assert r.seconds[0] / r.seconds[1] == pytest.approx(iv.verify_cost(B, K), rel=1e-12)


def test_tokens_per_pass_tend_to_one_over_one_minus_a():
    """The Interview page's tokens widget: the limit as K grows is 1 / (1 - a), approached from below."""
    for a in (0.3, 0.7, 0.95):
        values = [theory.expected_tokens(a, K) for K in (1, 4, 16, 1000)]
        assert values == sorted(values) and values[2] < 1 / (1 - a)
        assert values[-1] == pytest.approx(1 / (1 - a), rel=1e-9)


def test_greedy_reveal_against_the_verifier():
    """Temperature 0: with the processed (one-hot) target, a draft is accepted iff it is the argmax,
    whatever the coin; the replacement is the argmax; the same tokens as verify_greedy."""
    from specviz import verify_greedy
    from specviz.verifiers.processing import Settings, process_logits

    q = next(x for x in iv.questions() if x.key == "greedy")
    assert iv.check(q, "iff x is the target's argmax") and not iv.check(q, "with probability p(x)")
    P1 = process_logits(np.log(P), Settings(temperature=0))
    best, other = int(np.argmax(P1)), int(np.argsort(-P, kind="stable")[1])
    assert f"the argmax of p is token {best}: a draft of token {other} is rejected" in q.reveal
    u = np.linspace(0, 1, 257)[:-1]  # coins over [0, 1)
    n = u.size
    for x in range(4):
        res = verify(np.tile(P1, (n, 2, 1)), np.tile(Q, (n, 1, 1)), np.full((n, 1), x), np.ones(n, int),
                     uniforms=(u[:, None], u))  # fmt: skip
        toks = np.asarray(res.tokens)
        assert (np.asarray(res.num_accepted) == (x == best)).all()
        assert (toks[:, 0] == best).all() and (toks[:, 1] == (best if x == best else -1)).all()
        g = verify_greedy(np.tile(P1, (n, 2, 1)), np.full((n, 1), x), np.ones(n, int))
        np.testing.assert_array_equal(np.asarray(g.tokens), toks)


# --- the later topics: each answer recomputed another way ------------------------------------------


def test_first_rejection_count_after_rejection_law_against_the_real_bug():
    from specviz.app import interview_topics as topics
    from specviz.app.position import sample_position

    a = theory.acceptance_rate(P, Q)
    d = theory.decompose(P, Q)
    for K in (1, 3, 5):
        closed = (1 - (1 - a) ** K) * d.accepted / a + (1 - a) ** K * d.residual
        law = theory.position_law(P, Q, "count_after_rejection", K=K)
        np.testing.assert_allclose(law, closed, atol=1e-12)
        assert topics.count_after_rejection_tv(K) == pytest.approx(theory.total_variation(closed, P), abs=1e-12)
    draws = sample_position(P, Q, 200_000, 3, "count_after_rejection", 8)
    counts = np.bincount(draws.first_tokens, minlength=4)
    assert chi2_passes(counts, theory.position_law(P, Q, "count_after_rejection", K=3))
    assert not chi2_passes(counts, P)  # negative control: the mistake is not lossless
    q = next(x for x in iv.questions() if x.key == "first_rejection")
    assert f"at TV {topics.count_after_rejection_tv(3):.3f} from p" in q.reveal and "TV 0.130" in q.reveal


def test_kv_rollback_against_a_paged_cache_simulation():
    from specviz.app import interview_topics as topics

    def simulate_cache(L: int, K: int, j: int, page: int) -> tuple[int, int, int]:
        pages: list[list[int]] = []
        for pos in range(L + K):  # the pass: L - 1 cached context positions, then last token + K drafts
            if not pages or len(pages[-1]) == page:
                pages.append([])
            pages[-1].append(pos)
        held = len(pages)
        keep = L + j
        pages = [[x for x in pg if x < keep] for pg in pages]
        pages = [pg for pg in pages if pg]  # a page with no kept position goes back to the pool
        return held, len(pages), sum(len(pg) for pg in pages)

    for L in (1, 15, 16, 17, 60, 100):
        for K in (1, 4, 8):
            for j in range(K + 1):
                for page in (1, 7, 16):
                    r = topics.kv_rollback(L, K, j, page)
                    held, kept, positions = simulate_cache(L, K, j, page)
                    assert (r.pages_held, r.pages_kept, r.target_kept) == (held, kept, positions)
                    assert r.pages_freed == held - kept and r.target_dropped == K - j
                    assert r.next_drafter_feed == (2 if j == K else 1)
    q = next(x for x in iv.questions() if x.key == "kv_rollback")
    assert q.answer == topics.kv_rollback(*iv.KV_EXAMPLE).pages_freed == 1
    with pytest.raises(ValueError, match="^accepted"):
        topics.kv_rollback(10, 3, 4, 16)


def test_tree_shapes_against_verify_tree():
    """Measured accepted drafts of both shapes within 4 standard errors of the closed forms; the two differ."""
    from specviz.app import interview_topics as topics
    from specviz.verifiers import tree

    k, depth = iv.TREE_EXAMPLE
    sh = topics.tree_shapes(k, depth)
    rng = np.random.default_rng(12)
    n = 100_000
    batch = tree.context_free_trees(P, Q, tree.multi_draft_parents(k, depth), n, rng)
    acc = tree.verify_tree(*batch, rng=rng).num_accepted.astype(float)
    se = acc.std(ddof=1) / np.sqrt(n)
    assert abs(acc.mean() - sh.chains) < 4 * se
    assert abs(acc.mean() - sh.kary) > 20 * se  # negative control: the other shape's value is not this one's
    m = tree.measure_kary(P, Q, k, depth, n, 13)
    assert abs(m.mean - sh.kary) < 4 * m.se
    # The recursive residual: the second candidate is tested against (p - q)+ / (1 - a).
    a = theory.acceptance_rate(P, Q)
    r1 = theory.decompose(P, Q).residual
    a1 = np.minimum(r1, Q).sum()
    assert sh.node_acceptance == pytest.approx(1 - (1 - a) * (1 - a1), abs=1e-12)
    q = next(x for x in iv.questions() if x.key == "trees")
    assert f"= {sh.kary:.3f}" in q.reveal and f"= {sh.chains:.3f}" in q.reveal


def test_block_keeps_11_9_on_the_toy_is_lossless_and_never_keeps_less():
    from specviz.app import interview_topics as topics
    from specviz.proof import block_trace, court
    from specviz.proof.markov import random_chain

    toy = topics.block_toy()
    assert toy.token == pytest.approx(10 / 9, abs=1e-12) and toy.block == pytest.approx(11 / 9, abs=1e-12)
    block = court.judge("block", court.toy_problem())
    chain = court.judge("chain", court.toy_problem())
    assert block.lossless and chain.lossless
    assert block.expected_accepted_per_step == pytest.approx(11 / 9, abs=1e-9)
    assert chain.expected_accepted_per_step == pytest.approx(10 / 9, abs=1e-9)
    lossy = court.judge("block, lossy last threshold", court.toy_problem())  # control: keeping more is not enough
    assert not lossy.lossless and lossy.expected_accepted_per_step > block.expected_accepted_per_step
    for seed in range(6):  # block >= token for every context and draft count, on random chains
        rng = np.random.default_rng(seed)
        target, draft = random_chain(4, rng), random_chain(4, rng)
        b = block_trace.block_expected_tokens(target, Drafter(draft), 3)
        t = theory.chain_expected_tokens(target, Drafter(draft), 3)
        assert (b >= t - 1e-12).all()


def test_settings_reveal_numbers_and_a_zeroed_target_token_is_always_rejected():
    from specviz.app import interview_topics as topics
    from specviz.verifiers.processing import Settings, process_logits

    st_ = topics.settings_facts()
    assert st_.target_unprocessed_tv > 0.05 and st_.q_unprocessed_tv > 0.05
    q = next(x for x in iv.questions() if x.key == "settings")
    assert f"TV {st_.target_unprocessed_tv:.3f}" in q.reveal and f"TV {st_.q_unprocessed_tv:.3f}" in q.reveal
    p = np.asarray(process_logits(np.log(P), Settings(top_k=2)))
    assert p[3] == 0
    u = np.linspace(0, 1, 101)[:-1]
    n = u.size
    res = verify(np.tile(p, (n, 2, 1)), np.tile(Q, (n, 1, 1)), np.full((n, 1), 3), np.ones(n, int),
                 uniforms=(u[:, None], u))  # fmt: skip
    assert (np.asarray(res.num_accepted) == 0).all()  # whatever the coin


def test_unclamped_residual_shows_where_the_reveal_says_and_not_on_the_textbook():
    from specviz.app import interview_topics as topics
    from specviz.app.position import preset, sample_position

    un = topics.unclamped()
    p, q = (np.array(x) for x in preset(un.preset))
    draws = sample_position(p, q, 200_000, un.K, "unclamped_residual", 9)
    counts = np.bincount(draws.first_tokens, minlength=p.size)
    assert chi2_passes(counts, theory.position_law(p, q, "unclamped_residual", K=un.K))
    assert not chi2_passes(counts, p)  # the mistake shows here
    textbook = sample_position(P, Q, 200_000, 3, "unclamped_residual", 10)
    assert chi2_passes(np.bincount(textbook.first_tokens, minlength=4), P)  # and not here: order matters
    assert un.tv == pytest.approx(theory.total_variation(theory.position_law(p, q, "unclamped_residual", K=un.K), p))


def test_ragged_bonus_comes_from_the_rows_own_position():
    from specviz.app import interview_topics as topics

    for K in (1, 4, 6):
        for j in range(K + 1):
            rb = topics.ragged_bonus(j, K)
            assert rb.rule == j and rb.mistake == K
    q = next(x for x in iv.questions() if x.key == "ragged")
    nd, K = iv.RAGGED_EXAMPLE
    assert f"emits token {nd} as the bonus" in q.reveal and f"mistake emits token {K}" in q.reveal


def test_feedback_says_right_or_gives_the_answer_and_escapes_what_was_given():
    qs = {q.key: q for q in iv.questions()}
    number = next(q for q in qs.values() if q.kind == "number")
    right, said = iv.feedback(number, float(number.answer))
    assert right and said.startswith("Right: ")
    wrong, said = iv.feedback(number, float(number.answer) + 1000)
    assert not wrong and said.startswith("Not quite: you said ") and "the answer is" in said
    choice = next(q for q in qs.values() if q.kind == "choice")
    other = next(c for c in choice.choices if c != choice.answer)
    wrong, said = iv.feedback(choice, other)
    assert not wrong and links.plain(other) in said and links.plain(choice.answer) in said
    marks = iv.summary_marks({number.key: True, choice.key: False})
    assert len(marks) == len(qs)
    by_title = dict(marks)
    assert by_title[number.title] == "✅ right" and by_title[choice.title] == "❌ wrong"
    assert sum(m == "— not answered" for _, m in marks) == len(qs) - 2
