"""The lesson "One round, step by step": its coins, its traces, its histogram, and the page."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from apptest import link, metric, open_page, plotly_array, rerun
from scipy import stats as sps

from specviz.app import links
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
        tr = rd.trace(p, q, c, i)
        assert tr.tokens == [int(t) for t in res.tokens[i] if t >= 0]  # the reference's round is the engine's
        for s in tr.steps:
            assert s.draft == c.drafts[i, s.position]
            if s.state == "accepted":
                assert s.u * s.q < s.p
            elif s.state == "rejected":
                assert not s.u * s.q < s.p
        d = tr.draw
        assert tr.tokens == [s.draft for s in tr.steps if s.state == "accepted"] + [d.token]
        assert d.token == int(draw_iid(d.law, np.array([d.u]))[0])
        kinds.add(d.kind)
        if d.kind == "replacement" and theory.total_variation(p, q) > 0:
            np.testing.assert_allclose(d.law, np.maximum(p - q, 0) / np.maximum(p - q, 0).sum(), atol=1e-12)
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
    # The rule against itself never parts.
    assert rd.parting(rule, rd.play(p, q, c), 2000) == rd.Parting(None, None, 0)


# --- each side's panel is what its verifier read and drew ----------------------------------------------------------


def emitted_by_panel(tr: rd.RoundTrace, c: rd.Coins, i: int) -> list[int]:
    """The tokens the panel says the round emitted, checked against the coins it says were read.

    Every tested coin shows the uniform it names (its own or another draft's), its verdict is u·q(x) < p(x) on the
    numbers shown, a kept draft passed and a rejected one did not; the draw's uniform is the one it names, and
    where the panel shows a law, the token is that law's inverse-CDF draw at that uniform.
    """
    for s in tr.steps:
        assert s.draft == c.drafts[i, s.position]
        assert s.u == c.accept[i, s.coin]
        assert s.passed == (s.u * s.q < s.p)
        if s.state == "accepted":
            assert s.passed
        elif s.state == "rejected":
            assert not s.passed
    d = tr.draw
    if d.kind == "none":
        return [s.draft for s in tr.steps if s.state == "accepted"]
    assert d.u == (c.sample[i] if d.coin == -1 else c.accept[i, d.coin])
    if d.law is not None:
        assert d.token == int(draw_iid(d.law, np.array([d.u]))[0])
    return [s.draft for s in tr.steps if s.state == "accepted"] + [d.token]


SETTINGS = [(TEXTBOOK, 3), ("random", 5), ("one-hot q", 2), (TEXTBOOK, 1), ("random", 6)]
SEEDS, ROUNDS = range(6), 60  # 6 seeds x 5 settings x 60 rounds = 1,800 rounds per verifier


@pytest.mark.parametrize("mistake", [None, *rd.MISTAKES])
def test_each_panel_is_consistent_with_the_tokens_its_verifier_emitted(mistake):
    """For the rule and EVERY mistake the page offers: the coins, verdicts and draw its panel shows give the
    tokens its verifier emitted in the batch, on 1,800 rounds. (On the code before the panel was traced, the
    mistake's panel drew the rule's fresh coins: shared_uniform's seed 0, round 4 showed draft 2's coin 0.38
    passing while the mistake emitted 0, 1; this test found such rounds for shared_uniform, count_after_rejection
    and no_bonus.)"""
    differ = 0
    for preset, K in SETTINGS:
        for seed in SEEDS:
            p, q, c, res = run(preset, K, ROUNDS, seed, mistake)
            rule = rd.play(p, q, c)
            for i in range(ROUNDS):
                tr = rd.trace(p, q, c, i, mistake)
                emitted = [int(t) for t in res.tokens[i] if t >= 0]
                assert tr.tokens == emitted == emitted_by_panel(tr, c, i), (preset, K, seed, i)
                differ += emitted != [int(t) for t in rule.tokens[i] if t >= 0]
    # Not vacuous: every mistake emits something else on some round, except bonus_row_before, whose row before holds
    # the same p here (one context-free pair at every position); the rule never does.
    assert (differ > 0) == (mistake not in (None, "bonus_row_before"))


def test_the_reported_round_shows_the_one_coin_shared_uniform_read():
    """The issue's case: seed 0, round 4, K = 3. The mistake read draft 1's coin 0.62 at draft 2 (p/q = 0.6) and
    rejected it; the rule read a fresh 0.38 there and kept it."""
    p, q, c, _ = run(TEXTBOOK, 3, 4, 0)
    rule, bad = rd.trace(p, q, c, 3), rd.trace(p, q, c, 3, "shared_uniform")
    assert rule.tokens == [0, 2, 1] and bad.tokens == [0, 1]
    s = bad.steps[1]
    assert (s.coin, round(s.u, 2), s.threshold, s.state) == (0, 0.62, pytest.approx(0.6), "rejected")
    assert (rule.steps[1].coin, round(rule.steps[1].u, 2), rule.steps[1].state) == (1, 0.38, "accepted")
    assert bad.draw.position == 1 and rule.draw.position == 2  # each replacement at its own rejected position
    assert any("read draft 1's coin again (u = 0.62)" in d for d in rd.differences(rule, bad))


def test_what_each_mistake_reads_is_shown_as_it_reads_it():
    """The panels show each mistake's own swapped step: one coin, a reused coin, p for the residual, no bonus, the
    residual one position late. Controls: the rule's panel shows none of these on the same rounds."""
    seen: dict[str, set] = {}
    for seed in range(4):
        p, q, c, _ = run(TEXTBOOK, 3, 100, seed)
        for i in range(100):
            rule = rd.trace(p, q, c, i)
            assert all(s.coin == s.position for s in rule.steps) and rule.draw.coin == -1
            assert rule.draw.step in ("replacement", "inverse_cdf")
            for m in rd.MISTAKES:
                tr = rd.trace(p, q, c, i, m)
                d, rej = tr.draw, [s.position for s in tr.steps if s.state == "rejected"]
                seen.setdefault(m, set()).add(d.kind)
                if m == "shared_uniform":
                    assert all(s.coin == 0 for s in tr.steps)
                if m == "reused_coin":
                    assert d.coin == (rej[0] if d.kind == "replacement" else -1)
                    assert d.kind == "bonus" or d.u == c.accept[i, rej[0]] != c.sample[i]
                if m == "resample_from_p" and d.kind == "replacement":
                    assert d.step == "replacement_from_p" and np.allclose(d.law, p, atol=1e-12)
                if m == "late_rejection" and d.kind == "replacement":
                    assert d.position == rej[0] + 1
                if m == "unclamped_residual" and d.kind == "replacement":
                    assert d.step == "replacement_unclamped" and d.law is None  # it draws by its own running sum
    assert seen["no_bonus"] == {"replacement", "none"} and "none" not in seen["resample_from_p"]


def test_a_pipeline_mistake_is_refused_with_its_name():
    p, q, c, _ = run(TEXTBOOK, 3, 2, 0)
    with pytest.raises(ValueError, match="^mistake.*shared_uniform.*got 'q_unprocessed'"):
        rd.trace(p, q, c, 0, "q_unprocessed")


# --- stepping draft by draft -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mistake", [None, *rd.MISTAKES])
def test_stepping_emits_at_the_last_event_what_playing_the_round_emits(mistake):
    """Step from before the first coin to the round's end: one event per coin tested, then the draw; nothing is
    emitted before the coins say so, and after the last event the tokens are the whole round's in play()."""
    for preset, K in SETTINGS[:3]:
        p, q, c, res = run(preset, K, 40, 1, mistake)
        for i in range(40):
            tr = rd.trace(p, q, c, i, mistake)
            rounds, event, seen = i + 1, 0, []
            assert rd.at_event(tr, 0).tokens == [] and all(s.state == rd.NOT_YET for s in rd.at_event(tr, 0).steps)
            while True:
                view = rd.at_event(tr, event)
                seen.append(view.tokens)
                nxt = rd.click("step", rounds, event, tr.events, False)[:2]
                if nxt[0] != rounds:
                    break
                rounds, event = nxt
            assert nxt == (i + 2, 1) and event == tr.events == len(seen) - 1
            assert view.done and view.tokens == [int(t) for t in res.tokens[i] if t >= 0]
            assert all(a == b[: len(a)] for a, b in zip(seen, seen[1:], strict=False))  # tokens only ever grow
            tested = [s for s in view.steps if s.state != "not reached"]
            assert len(tested) == tr.events - 1


def test_play_finishes_the_round_then_plays_whole_rounds():
    assert rd.play_tick(4, 2, 4) == (4, rd.END)  # mid-round: the rest of round 4
    assert rd.play_tick(4, 4, 4) == (rd.next_rounds(4), rd.END)
    assert rd.rounds_done(4, 2, 4) == 3 and rd.rounds_done(4, rd.END, 4) == 4
    assert rd.click("step", rd.MAX_ROUNDS, rd.END, 4, True) == (rd.MAX_ROUNDS, rd.END, False)  # the cap; Step pauses
    assert rd.click("play", 4, 2, 4, False) == (4, 2, True) and rd.click("reset", 4, 2, 4, True) == (1, 0, False)


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


def charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def coin_chart(at, n: int = 0) -> tuple[list[str], list]:
    """The n-th coin chart's row labels and coins, draft 1 first."""
    spec = [c for c in charts(at) if len(c["data"]) == 3 and c["data"][2].get("name") == "coin u"][n]
    return spec["data"][0]["y"][::-1], list(plotly_array(spec["data"][2]["x"]))[::-1]


def titles(at) -> list[str]:
    return [c["layout"]["title"]["text"] for c in charts(at)]


def test_page_opens_before_the_first_coin_and_steps_draft_by_draft():
    at = open_page("app_pages/one_round.py")
    assert metric(at, "round") == "1" and metric(at, "tokens emitted") == "0" and metric(at, "tokens per step") == "–"
    labels, us = coin_chart(at)
    assert all("not tested yet" in lb for lb in labels) and all(u is None for u in us)  # no coin tested
    assert "Last token: not drawn yet" in titles(at) and "All tokens of 0 rounds against p" in titles(at)
    assert at.markdown[0].value == "Round 1: no coin tested yet. Step tests draft 1's coin."
    assert link(at)["rounds"] == "1" and link(at)["event"] == "0"
    p, q, c, res = run(TEXTBOOK, 3, 2, 0)
    tr = rd.trace(p, q, c, 0)
    for event in range(1, tr.events + 1):
        at.button(key="round.step").click()
        rerun(at)
        assert metric(at, "round") == "1" and link(at)["event"] == str(event)
        labels, us = coin_chart(at)
        assert sum(u is not None for u in us) == min(event, tr.events - 1)  # one coin more per step, then the draw
        if event < tr.events:
            assert metric(at, "tokens emitted") == "0" and "Last token: not drawn yet" in titles(at)
    assert metric(at, "tokens emitted") == str(len(tr.tokens)) == str(int(res.num_tokens[0]))
    assert at.markdown[0].value.startswith(f"Round 1 done: emitted {len(tr.tokens)} token(s): "
                                           + ", ".join(map(str, tr.tokens)))  # fmt: skip
    at.button(key="round.step").click()
    rerun(at)
    assert metric(at, "round") == "2" and link(at)["event"] == "1"
    expected = metric(at, "expected: (1 − aᴷ⁺¹)/(1 − a)")
    at.slider(key="round.K").set_value(5)
    rerun(at)
    assert metric(at, "expected: (1 − aᴷ⁺¹)/(1 − a)") == f"{theory.expected_tokens(0.7, 5):.3f}" != expected
    at.button(key="round.reset").click()
    rerun(at)
    assert metric(at, "round") == "1" and link(at)["event"] == "0" and metric(at, "tokens emitted") == "0"


def test_a_link_mid_round_reproduces_both_sides_and_the_mistake_shows_its_one_coin():
    """The issue's case, shared_uniform beside the rule at seed 0, round 4, stepped: the link reproduces the very
    charts, and the mistake's panel shows draft 1's coin at draft 2, the coin that rejected it."""
    query = {"rounds": "4", "event": "2", "compare": "1", "mistake": "shared_uniform", "seed": "0"}
    at = open_page("app_pages/one_round.py", query)
    assert charts(open_page("app_pages/one_round.py", query)) == charts(at)  # the link reproduces what was shown
    rule_labels, _ = coin_chart(at, 0)
    bad_labels, bad_us = coin_chart(at, 1)
    assert "u = 0.38, accepted" in rule_labels[1] and "not tested yet" in rule_labels[2]
    assert "u = 0.62, rejected<br>(draft 1's coin)" in bad_labels[1] and bad_us[1] == bad_us[0]
    at.button(key="round.step").click()  # event 3: the mistake's draw (it tested two coins), the rule's third coin
    rerun(at)
    assert [m.value for m in at.markdown][:2] == [
        "Round 4: draft 3 of 3 tested (rejected); kept so far: tokens 0, 2.",
        "Round 4 done: emitted 2 token(s): 0, 1; last, a replacement at position 2 from the residual max(0, p − q), "
        "with its own uniform (u = 0.98).",
    ]
    at.button(key="round.step").click()  # event 4: the rule's draw
    rerun(at)
    done = "Round 4 done: emitted 3 token(s): 0, 2, 1; last, a replacement at position 3 from the residual"
    assert at.markdown[0].value.startswith(done)
    captions = " ".join(c.value for c in at.caption)
    assert "Same drafts, same coins" not in captions
    assert "at draft 2 it read draft 1's coin again (u = 0.62)" in captions and "it kept drafts 1, the rule" in captions


def test_reused_coin_shows_the_rejected_coin_as_its_draw():
    p, q, c, _ = run(TEXTBOOK, 3, 4, 0)
    bad = rd.trace(p, q, c, 3, "reused_coin")
    at = open_page("app_pages/one_round.py", {"rounds": "4", "event": str(rd.END), "compare": "1",
                                              "mistake": "reused_coin"})  # fmt: skip
    d = bad.draw
    assert f"Replacement: u = {d.u:.2f} → token {d.token}" in titles(at) and d.u == c.accept[3, 2]
    assert at.markdown[1].value.endswith(f"from the residual max(0, p − q), with draft 3's coin again (u = {d.u:.2f}).")
    assert "with draft 3's coin again" in " ".join(c.value for c in at.caption)


def test_page_from_a_link_shows_the_mistake_side_by_side():
    at = open_page("app_pages/one_round.py", {"rounds": "3000", "event": str(rd.END), "compare": "1",
                                              "mistake": "count_after_rejection", "K": "4", "seed": "5"})  # fmt: skip
    p, q, c, rule = run(TEXTBOOK, 4, 3000, 5)
    bad = rd.play(p, q, c, "count_after_rejection")
    part = rd.parting(rule, bad, 3000)
    assert [w.value for w in at.warning] == [
        f"The rule and count_after_rejection first differ in round {part.round + 1}, at emitted token "
        f"{part.position + 1}; {part.rounds_differing:,} of 3,000 rounds differ."
    ]
    t_rule, t_bad = rd.tally(p, q, rule, 3000), rd.tally(p, q, bad, 3000)
    captions = " ".join(c.value for c in at.caption)
    assert f"p-value {t_rule.test.p_value:.3g}" in captions and f"p-value {t_bad.test.p_value:.3g}" in captions
    assert not re.search(r"p-value 0(?![.\d])", captions)  # never a bare 0
    assert t_bad.test.p_value < stats.ALPHA < t_rule.test.p_value  # the mistake is seen at 3,000 rounds
    assert link(at)["mistake"] == "count_after_rejection" and link(at)["compare"] == "1"


def test_play_advances_rounds_on_each_run_and_pause_stops():
    at = open_page("app_pages/one_round.py", {"rounds": "10", "event": "1"})
    at.button(key="round.play").click()  # mid-round: Play first finishes round 10
    rerun(at)
    p, q, c, res = run(TEXTBOOK, 3, 10, 0)
    assert metric(at, "round") == "10" and metric(at, "tokens emitted") == f"{int(res.num_tokens.sum()):,}"
    rerun(at)
    assert metric(at, "round") == str(rd.next_rounds(10))
    assert at.button(key="round.play").label == "Pause"
    at.button(key="round.play").click()
    rerun(at)
    assert metric(at, "round") == str(rd.next_rounds(10)) and at.button(key="round.play").label == "Play"


def test_the_residual_shown_is_what_acceptance_leaves_missing():
    for preset in rd.PRESETS:
        p, q = rd.pair(preset, 1)
        excess = np.maximum(p - q, 0.0)
        law = excess / excess.sum() if excess.sum() > 0 else p  # p == q: the branch is unreachable, falls back to p
        np.testing.assert_allclose(np.minimum(p, q) + excess.sum() * law, p, atol=1e-12)  # the rule's output is p
        text = rd.residual_text(p, q)
        assert f"mass 1 − a = {theory.total_variation(p, q):.4f};" in text
        assert f"normalized: {links.plain(np.round(law, 4).tolist())}." in text


def test_texts_after_one_round_read_as_english_and_a_pooled_test_is_not_a_result():
    """Issue 29: "1 rounds", and a chi-square "on 0 degrees of freedom" shown as a result."""
    from specviz.app.results import plural

    assert [plural(n, "round") for n in (0, 1, 2, 1000)] == ["0 rounds", "1 round", "2 rounds", "1,000 rounds"]
    p = np.array([0.5, 0.3, 0.15, 0.05])
    one = rd.Tally(1, 2, np.array([2, 0, 0, 0]), 2.0, 2.5, stats.chi_square(np.array([2, 0, 0, 0]), p))
    assert one.test.dof == 0
    text = rd.tally_caption(one)
    assert "nothing to test yet" in text and "degrees of freedom" not in text and "2 tokens" in text
    many = np.array([50, 30, 15, 5])
    more = rd.Tally(40, 100, many, 2.5, 2.5, stats.chi_square(many, p))
    assert "on 3 degrees of freedom" in rd.tally_caption(more)  # control: a real test is reported
    at = open_page("app_pages/one_round.py", {"rounds": "1", "event": str(rd.END)})
    shown = " ".join(str(c.value) for c in at.caption)
    assert "0 degrees" not in shown and "1 rounds" not in shown
    assert "nothing to test yet" in shown or "degrees of freedom" in shown


def test_a_done_round_says_what_the_kv_caches_keep_from_the_rollback_widgets_numbers():
    """Issue 29: KV-cache rollback was on no lesson page; One round says it after each round, from kv_rollback."""
    from specviz.app import interview_topics as topics

    p, q = rd.pair(rd.PRESETS[0], 0)
    K, rounds = 3, 40
    c = rd.coins(q, K, rounds, 0)
    seen = set()
    for i in range(rounds):
        tr = rd.trace(p, q, c, i)
        j = sum(s.state == rd.STATES[0] for s in tr.steps)
        r = topics.kv_rollback(rd.ROLLBACK_CONTEXT, K, j, 1)
        text = rd.rollback_sentence(tr)
        assert f"keeps L + {j}," in text and f"wrote L + {K} positions" in text
        assert f"re-feeds {r.next_drafter_feed} token" in text
        assert (f"drops the other {K - j}" in text) == (j < K) and ("drops none" in text) == (j == K)
        seen.add(j == K)
    assert seen == {True, False}  # both a rejection and an all-kept round were described
    at = open_page("app_pages/one_round.py", {"rounds": "1", "event": str(rd.END)})
    assert any("KV cache" in str(c.value) for c in at.caption)
    before = open_page("app_pages/one_round.py", {"rounds": "1", "event": "0"})
    assert not any("KV cache" in str(c.value) for c in before.caption)  # only once the round is done
