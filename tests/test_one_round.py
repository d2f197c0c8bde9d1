"""The lesson "One round, step by step": its coins, its traces, its histogram, and the page."""

from __future__ import annotations

import re

import numpy as np
import pytest
from apptest import link, metric, open_page, rerun
from scipy import stats as sps

from specviz.app import one_round as rd
from specviz.app.position import draw_iid
from specviz.proof import stats, theory

TEXTBOOK = rd.PRESETS[0]  # p = [0.5, 0.3, 0.15, 0.05] against uniform q
ALPHA = 0.001  # level of every chi-square below; critical value chi2.isf(ALPHA, V - 1) (16.27 at V = 4)


def run(preset: str, K: int, rounds: int, seed: int, mistake: str | None = None):
    p, q = rd.pair(preset, seed)
    c = rd.coins(q, K, rounds, seed)
    return p, q, c, rd.play(p, q, c, mistake)


def test_round_i_reads_the_same_coins_whatever_the_round_count():
    _, q = rd.pair(TEXTBOOK)
    short, long = rd.coins(q, 3, 50, 7), rd.coins(q, 3, 400, 7)
    for a, b in zip(short, long, strict=True):
        np.testing.assert_array_equal(a, b[:50])
    assert not np.array_equal(rd.coins(q, 3, 50, 8).accept, short.accept)  # control: the seed matters


@pytest.mark.parametrize("preset", [TEXTBOOK, "random", "one-hot q", "disjoint supports"])
def test_trace_is_the_rule_step_by_step(preset):
    """Each kept draft's coin is below min(1, p/q), the rejected one's is not, and the last token is the
    inverse-CDF draw of the coin from the residual (after a rejection) or p (the bonus), as the trace says."""
    p, q, c, res = run(preset, 4, 300, 3)
    kinds = set()
    for i in range(300):
        tr = rd.trace(p, q, c, res, i)
        for s in tr.steps:
            assert s.draft == c.drafts[i, s.position]
            if s.state == "accepted":
                assert s.u * s.q < s.p
            elif s.state == "rejected":
                assert not s.u * s.q < s.p
        assert tr.tokens == [s.draft for s in tr.steps if s.state == "accepted"] + [tr.last]
        assert tr.last == int(draw_iid(tr.dist, np.array([tr.u]))[0])
        kinds.add(tr.kind)
        if tr.kind == "replacement" and theory.total_variation(p, q) > 0:
            np.testing.assert_allclose(tr.dist, np.maximum(p - q, 0) / np.maximum(p - q, 0).sum(), atol=1e-12)
    if preset == TEXTBOOK:
        assert kinds == {"bonus", "replacement"}
    if preset == "disjoint supports":
        assert kinds == {"replacement"}  # a = 0: every first draft is rejected


@pytest.mark.parametrize("preset, K", [(TEXTBOOK, 3), ("random", 5)])
def test_histogram_of_many_rounds_converges_to_p_and_the_mistake_does_not(preset, K):
    """All tokens of 20,000 rounds against p: the rule passes at ALPHA, resample_from_p on the same coins fails."""
    p, q, c, res = run(preset, K, rd.MAX_ROUNDS, 0)
    t = rd.tally(p, q, res, rd.MAX_ROUNDS)
    assert t.test.critical_value == pytest.approx(sps.chi2.isf(ALPHA, t.test.dof))
    assert t.test.passed and t.test.p_value > ALPHA
    bad = rd.tally(p, q, rd.play(p, q, c, "resample_from_p"), rd.MAX_ROUNDS)
    assert not bad.test.passed and bad.test.p_value < ALPHA  # negative control
    # Tokens per step within 4 standard errors of (1 - a^(K+1)) / (1 - a).
    n = np.asarray(res.num_tokens, dtype=float)
    assert abs(t.tokens_per_step - t.expected_tokens_per_step) < 4 * n.std() / np.sqrt(n.size)
    assert t.tokens == int(n.sum())


def test_the_mistake_runs_on_the_same_coins_and_parts_where_it_should():
    p, q, c, rule = run(TEXTBOOK, 3, 2000, 0)
    bad = rd.play(p, q, c, "count_after_rejection")
    part = rd.parting(rule, bad, 2000)
    a, b = np.asarray(rule.tokens), np.asarray(bad.tokens)
    assert part.round is not None and (a[: part.round] == b[: part.round]).all()
    assert a[part.round, part.position] != b[part.round, part.position]
    assert (a[part.round, : part.position] == b[part.round, : part.position]).all()
    assert part.rounds_differing == int((a != b).any(axis=1).sum())
    # The rule against itself never parts; the mistake's accepted coins are the rule's coins.
    assert rd.parting(rule, rd.play(p, q, c), 2000) == rd.Parting(None, None, 0)
    for i in range(50):  # the mistake's trace gives each coin's own verdict, whatever the mistake did with it
        for s in rd.trace(p, q, c, bad, i, rule=False).steps:
            assert s.state == ("passes" if s.u * s.q < s.p else "fails")
    used = np.asarray(bad.accept_uniforms)
    assert (np.isnan(used) | (used == c.accept)).all()


def test_play_speeds_up_and_stops_at_the_cap():
    seen = [1]
    while seen[-1] < rd.MAX_ROUNDS:
        seen.append(rd.next_rounds(seen[-1]))
    assert seen[:6] == [1, 2, 3, 4, 5, 6] and all(b > a for a, b in zip(seen, seen[1:], strict=False))
    assert seen[-1] == rd.MAX_ROUNDS and rd.next_rounds(rd.MAX_ROUNDS) == rd.MAX_ROUNDS
    assert len(seen) < 60  # a minute of one-second ticks reaches the cap


def test_bad_sizes_are_input_errors():
    _, q = rd.pair(TEXTBOOK)
    with pytest.raises(ValueError, match="^K"):
        rd.coins(q, rd.MAX_K + 1, 10, 0)
    with pytest.raises(ValueError, match="^rounds"):
        rd.coins(q, 3, rd.MAX_ROUNDS + 1, 0)


# --- the page --------------------------------------------------------------------------------------


def test_page_steps_and_keeps_its_state_in_the_link():
    at = open_page("app_pages/one_round.py")
    assert metric(at, "round") == "1"
    p, q, c, res = run(TEXTBOOK, 3, 2, 0)
    at.button(key="round.step").click()
    rerun(at)
    assert metric(at, "round") == "2"
    assert metric(at, "tokens emitted") == f"{int(np.asarray(res.num_tokens).sum()):,}"
    assert link(at)["rounds"] == "2"
    expected = metric(at, "expected: (1 − aᴷ⁺¹)/(1 − a)")
    at.slider(key="round.K").set_value(5)
    rerun(at)
    assert metric(at, "expected: (1 − aᴷ⁺¹)/(1 − a)") == f"{theory.expected_tokens(0.7, 5):.3f}" != expected
    at.button(key="round.reset").click()
    rerun(at)
    assert metric(at, "round") == "1"


def test_page_from_a_link_shows_the_mistake_side_by_side():
    at = open_page("app_pages/one_round.py", {"rounds": "3000", "compare": "1", "mistake": "count_after_rejection",
                                              "K": "4", "seed": "5"})  # fmt: skip
    p, q, c, rule = run(TEXTBOOK, 4, 3000, 5)
    bad = rd.play(p, q, c, "count_after_rejection")
    part = rd.parting(rule, bad, 3000)
    assert [w.value for w in at.warning] == [
        f"The two first part in round {part.round + 1}, at emitted token {part.position + 1}; "
        f"{part.rounds_differing:,} of 3,000 rounds differ."
    ]
    t_rule, t_bad = rd.tally(p, q, rule, 3000), rd.tally(p, q, bad, 3000)
    captions = " ".join(c.value for c in at.caption)
    assert f"p-value {t_rule.test.p_value:.3g}" in captions and f"p-value {t_bad.test.p_value:.3g}" in captions
    assert not re.search(r"p-value 0(?![.\d])", captions)  # never a bare 0
    assert t_bad.test.p_value < stats.ALPHA < t_rule.test.p_value  # the mistake is seen at 3,000 rounds
    assert link(at)["mistake"] == "count_after_rejection" and link(at)["compare"] == "1"


def test_play_advances_rounds_on_each_run_and_pause_stops():
    at = open_page("app_pages/one_round.py", {"rounds": "10"})
    at.button(key="round.play").click()
    rerun(at)
    assert metric(at, "round") == str(rd.next_rounds(10))
    assert at.button(key="round.play").label == "Pause"
    at.button(key="round.play").click()
    rerun(at)
    assert metric(at, "round") == str(rd.next_rounds(10)) and at.button(key="round.play").label == "Play"


def test_residual_is_what_acceptance_leaves_missing():
    for preset in rd.PRESETS:
        p, q = rd.pair(preset, 1)
        r = rd.residual(p, q)
        d = theory.decompose(p, q)
        assert r.mass == pytest.approx(theory.total_variation(p, q), abs=1e-12)
        np.testing.assert_allclose(np.minimum(p, q) + r.mass * r.law, p, atol=1e-12)  # the rule's output is p
        if r.mass > 0:
            np.testing.assert_allclose(r.law, d.residual, atol=1e-12)
        else:  # p == q: the branch is unreachable and falls back to p
            np.testing.assert_allclose(r.law, p, atol=0)
