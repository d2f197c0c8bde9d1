"""The Sampling-settings, Interview and Real-text pages under AppTest.

Each page renders without exception, a widget change changes the numbers it should (read
back from the page and compared with specviz computed here), a bad typed value shows an
inline error while the page keeps running, and the link round-trips the settings. The
package functions behind them are tested in test_settings_demo, test_interview and test_text.
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from pathlib import Path

import apptest
import numpy as np
import pytest
from apptest import link, metric, rerun, texts
from streamlit.testing.v1 import AppTest

from specviz.app import interview as iv
from specviz.app import settings_demo as sd
from specviz.app import text
from specviz.proof import stats, theory
from specviz.verifiers.processing import Settings

ROOT = Path(__file__).resolve().parents[1]
SETTINGS, INTERVIEW, TEXT = "app_pages/settings.py", "app_pages/interview.py", "app_pages/text.py"


open_page = functools.partial(apptest.open_page, timeout=90)


# --- Sampling settings -----------------------------------------------------------------------------


LOSSLESS, LOSSY = "✓\u00a0lossless", "✗\u00a0lossy"  # verdicts as the table shows them (no break after the mark)


def pipelines(at: AppTest) -> dict[str, dict]:
    df = at.table[0].value
    return {row["pipeline"]: row for row in df.to_dict("records")}


def test_settings_defaults_show_both_mismatches_lossy_with_their_exact_tv():
    at = open_page(SETTINGS)
    assert at.title[0].value == "Sampling settings"
    zt, zd, _ = sd.PRESETS[sd.DEFAULT_PRESET]
    assert sd.DEFAULT_REQUEST != Settings() and sd.DEFAULT_DRAFTER != Settings()
    rep = sd.settings_report(zt, zd, sd.DEFAULT_REQUEST, sd.DEFAULT_DRAFTER, K=3)
    by = {pl.name: pl for pl in rep.pipelines}
    assert metric(at, "acceptance rate Σ min(p, q)") == f"{by['correct'].acceptance:.4f}"
    assert metric(at, "tokens per step, K = 3") == f"{rep.tokens_per_step:.4f}"
    rows = pipelines(at)
    assert list(rows) == ["correct", "q_unprocessed", "target_unprocessed"]
    assert [r["verdict"] for r in rows.values()] == [LOSSLESS, LOSSY, LOSSY]
    for name in ("q_unprocessed", "target_unprocessed"):
        assert rows[name]["TV from plain decoding"] == f"{by[name].tv_plain:.3g}" and by[name].tv_plain > 0.01
    assert rows["correct"]["TV from plain decoding"] == "0 (to 1e-12)"
    # The whole description is in the table (a data grid cut this column off).
    assert rows["correct"]["what the verifier is given"] == by["correct"].description
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    names = [t["name"] for t in chart["data"]]
    assert "p (request's settings)" in names and "q (drafter's settings)" in names
    assert "removed by the request" in names and "removed by the drafter" in names
    # With default settings everywhere all three coincide, and their float noise reads as the bound.
    at.slider(key="settings.rp").set_value(1.0)
    at.number_input(key="settings.dk").set_value(0)
    rerun(at)
    plain = sd.settings_report(zt, zd, Settings(), Settings(), K=3)
    assert any(0 < pl.tv_plain for pl in plain.pipelines)  # raw formatting would print this noise (6e-17)
    rows = pipelines(at)
    assert all(r["verdict"] == LOSSLESS for r in rows.values())
    assert all(r["TV from plain decoding"] == "0 (to 1e-12)" for r in rows.values())
    assert "TV between the two: 0 (to 1e-12)." in texts(at.caption)
    assert "6.27e-17" not in texts(at.caption) + str(at.table[0].value)


def test_settings_request_top_p_makes_the_unprocessed_target_lossy_with_its_exact_tv():
    at = open_page(SETTINGS)
    at.slider(key="settings.rp").set_value(0.95)
    at.number_input(key="settings.dk").set_value(2)
    rerun(at)
    zt, zd, _ = sd.PRESETS["hot drafter"]
    rep = sd.settings_report(zt, zd, Settings(top_p=0.95), Settings(top_k=2), K=3)
    by = {pl.name: pl for pl in rep.pipelines}
    assert metric(at, "acceptance rate Σ min(p, q)") == f"{by['correct'].acceptance:.4f}"
    rows = pipelines(at)
    assert rows["correct"]["verdict"] == LOSSLESS
    assert rows["target_unprocessed"]["verdict"] == LOSSY and rows["q_unprocessed"]["verdict"] == LOSSY
    assert rows["target_unprocessed"]["TV from plain decoding"] == f"{by['target_unprocessed'].tv_plain:.3g}"
    assert rows["q_unprocessed"]["TV from plain decoding"] == f"{by['q_unprocessed'].tv_plain:.3g}"
    removed = np.flatnonzero(rep.removed_p)
    assert removed.size and f"token {removed[0]}" in texts(at.markdown)
    assert link(at)["rp"] == "0.95" and link(at)["dk"] == "2"
    # The badge is computed: at top-p 0.8 the request keeps one token, p is one-hot, and the wrong q
    # can no longer move the law (the residual is that token), so q_unprocessed turns lossless.
    at.radio(key="settings.pipeline").set_value("target_unprocessed")
    rerun(at)
    chart = json.loads(at.get("plotly_chart")[1].proto.spec)
    law = [t for t in chart["data"] if t["name"].startswith("target_unprocessed")][0]
    assert "y" in law and f"TV between the two: {by['target_unprocessed'].tv_plain:.3g}" in texts(at.caption)
    assert link(at)["pipeline"] == "target_unprocessed"
    at.slider(key="settings.rp").set_value(0.8)
    rerun(at)
    assert pipelines(at)["q_unprocessed"]["verdict"] == LOSSLESS


def test_settings_bad_typed_logits_show_an_inline_error_and_the_page_keeps_running():
    at = open_page(SETTINGS)
    at.radio(key="settings.source").set_value("typed")
    rerun(at)
    at.text_input(key="settings.tl").input("1, two, 3")
    rerun(at)
    assert "target logits: expected numbers (or -inf), got 'two'" in texts(at.error)
    assert at.title[0].value == "Sampling settings" and link(at)["tl"] == "1, two, 3"  # the typo stays in the link
    at.text_input(key="settings.tl").input("2, 1, 0, -inf")
    at.text_input(key="settings.dl").input("0 0 0 0")
    rerun(at)
    assert not at.error
    rep = sd.settings_report([2, 1, 0, -np.inf], [0, 0, 0, 0], sd.DEFAULT_REQUEST, sd.DEFAULT_DRAFTER)
    assert metric(at, "acceptance rate Σ min(p, q)") == f"{rep.pipelines[0].acceptance:.4f}"
    at.text_input(key="settings.dl").input("0 0 0")
    rerun(at)
    assert "draft logits: expected 4 logits" in texts(at.error)


def test_settings_link_round_trips_and_bad_link_values_are_noted():
    query = {"source": "random", "seed": "5", "dT": "0.5", "dk": "3", "K": "5", "knob": "top_k", "rT": "0.7"}
    at = open_page(SETTINGS, query)
    assert at.number_input(key="settings.seed").value == 5 and at.slider(key="settings.K").value == 5
    zt, zd = sd.random_logits(5)
    request = replace(sd.DEFAULT_REQUEST, temperature=0.7)
    drafter = replace(sd.DEFAULT_DRAFTER, temperature=0.5, top_k=3)
    rep = sd.settings_report(zt, zd, request, drafter, K=5)
    assert metric(at, "tokens per step, K = 5") == f"{rep.tokens_per_step:.4f}"
    best = max(sd.sweep(zt, zd, request, drafter, "top_k", sd.sweep_values("top_k", 8), 5),
               key=lambda pt: pt.acceptance)  # fmt: skip
    assert metric(at, "best top_k for acceptance") == f"{best.value:g}"
    got = link(at)
    for k, v in query.items():
        assert got[k] == v, k
    bad = open_page(SETTINGS, {"rT": "-1", "knob": "heat"})
    notes = texts(bad.warning)
    assert "rT" in notes and "knob" in notes
    assert bad.number_input(key="settings.rT").value == 1.0


def test_settings_greedy_acceptance_is_q_of_the_target_argmax():
    at = open_page(SETTINGS)
    at.number_input(key="settings.rT").set_value(0.0)
    rerun(at)
    zt, zd, _ = sd.PRESETS["hot drafter"]
    q = sd.settings_report(zt, zd, Settings(), sd.DEFAULT_DRAFTER).q
    top = int(np.argmax(zt))
    assert metric(at, "acceptance rate Σ min(p, q)") == f"{q[top]:.4f}"
    assert f"the target's argmax is **token {top}**" in texts(at.markdown)


# --- Interview walkthrough -------------------------------------------------------------------------


def test_interview_check_says_right_or_wrong_and_keeps_progress_in_the_link():
    at = open_page(INTERVIEW)
    assert at.title[0].value == "Interview walkthrough"
    qs = iv.questions()
    assert qs[0].title in texts(at.subheader) and not at.success  # nothing revealed before a check
    at.number_input(key="interview.in.acceptance").set_value(round(float(qs[0].answer), 3))
    at.button(key="interview.check").click()
    rerun(at)
    assert texts(at.success).startswith("Right")
    reveal = texts(at.markdown)  # the derivation in readable math, its number computed
    assert "Σₓ" in reveal and "sum_x" not in reveal and f"{float(qs[0].answer):.3f}" in reveal
    assert link(at)["ans"] == iv.encode_answers({"acceptance": round(float(qs[0].answer), 3)})
    at.button(key="interview.next").click()
    rerun(at)
    at.radio(key="interview.in.residual").set_value("p itself")
    at.button(key="interview.check").click()
    rerun(at)
    assert "Not quite" in texts(at.error) and "the answer is" in texts(at.error)
    assert link(at)["step"] == "1"
    at.button(key="interview.to_summary").click()
    rerun(at)
    summary = texts(at.markdown)
    assert f"**{qs[0].title}**: ✅ right" in summary and f"**{qs[1].title}**: ❌ wrong" in summary
    assert metric(at, "right") == f"1 of {len(qs)}"
    assert [b.proto.label for b in at.get("download_button")] == ["Download the cheat sheet (Markdown)"]


def test_interview_link_restores_the_step_and_answers_and_bad_links_fall_back():
    qs = iv.questions()
    at = open_page(INTERVIEW, {"step": "3", "ans": "0.7,1,2.2"})
    assert f"4. {qs[3].title}" in texts(at.subheader)
    assert f"3 of {len(qs)} answered, 2 right" in str(at.get("progress")[0].proto.text)
    bad = open_page(INTERVIEW, {"ans": "0.7,zz", "step": "99"})
    notes = texts(bad.warning)
    assert "ans" in notes and "step" in notes
    assert f"1. {qs[0].title}" in texts(bad.subheader)


def test_interview_speedup_explorer_and_roofline_follow_their_sliders():
    keys = [q.key for q in iv.questions()]
    at = open_page(INTERVIEW, {"step": str(keys.index("best_k"))})
    at.number_input(key="interview.in.best_k").set_value(3)
    at.button(key="interview.check").click()
    rerun(at)
    assert metric(at, "best K") == f"{iv.best_K(0.8, 0.05)}"
    at.slider(key="interview.a").set_value(0.5)
    at.slider(key="interview.c").set_value(0.3)
    rerun(at)
    assert metric(at, "best K") == f"{iv.best_K(0.5, 0.3)}"
    assert metric(at, "speedup at K = 1: (1 + a)/(1 + c)") == f"×{iv.speedup(0.5, 1, 0.3):.3f}"
    at = open_page(INTERVIEW, {"step": str(keys.index("tokens")), "ans": ",,2.5"})
    a = 0.7  # the reference example's acceptance rate, checked against theory below
    assert theory.acceptance_rate(iv.REFERENCE_P, iv.UNIFORM_Q) == pytest.approx(a)
    at.slider(key="interview.Kt").set_value(5)
    rerun(at)
    assert metric(at, "tokens per target pass, a = 0.70") == f"{theory.expected_tokens(a, 5):.4f}"
    assert metric(at, "accepted drafts alone") == f"{theory.expected_tokens(a, 5) - 1:.4f}"
    assert link(at)["Kt"] == "5"
    at = open_page(INTERVIEW, {"step": str(keys.index("roofline")), "ans": ",,,,,3"})
    before = metric(at, "verification cost (decode steps of this batch)")
    assert before == f"{iv.verify_cost(8, 4):.2f}"
    at.slider(key="interview.B").set_value(1024)
    rerun(at)
    after = metric(at, "verification cost (decode steps of this batch)")
    assert after == f"{iv.verify_cost(1024, 4):.2f}" and after != before
    assert link(at)["B"] == "1024"


def test_interview_settings_text_cites_the_tv_its_widget_shows():
    """Issue 29: Q16's text said TV 0.127 (another example's) while its widget showed 0.1020."""
    from specviz.app import interview_topics as topics

    keys = [q.key for q in iv.questions()]
    q = iv.questions()[keys.index("settings")]
    at = open_page(INTERVIEW, {"step": str(keys.index("settings")),
                               "ans": iv.encode_answers({"settings": q.answer})})  # fmt: skip
    shown = metric(at, "TV(raw p, processed p): what the raw target gets wrong")
    assert float(shown) == pytest.approx(topics.settings_facts().target_unprocessed_tv, abs=5e-5)
    assert f"TV {float(shown):.3f}" in q.reveal
    req = topics.SETTINGS_REQUEST
    assert f"temperature {req.temperature:g} and top-p {req.top_p:g}" in q.prompt
    assert at.slider(key="interview.T").value == req.temperature and at.slider(key="interview.tp").value == req.top_p


# --- Real text ---------------------------------------------------------------------------------------


def transcript(prompt: str, K: int, T: float, seed: int, **kw) -> list[text.Step]:
    pair = text.trained_pair()
    return text.transcript(pair.target, pair.drafter, text.encode(prompt).tolist(), K, Settings(temperature=T), seed,
                           **kw)  # fmt: skip


def test_text_step_and_run_follow_the_package_transcript():
    at = open_page(TEXT)
    assert at.title[0].value == "Real text"
    assert metric(at, "target calls (rounds)") == "0"
    at.button(key="text.step").click()
    rerun(at)
    one = transcript("The ", 4, 1.0, 0, rounds=1)
    assert metric(at, "characters generated") == f"{len(one[0].emitted)}"
    at.button(key="text.run").click()
    rerun(at)
    steps = transcript("The ", 4, 1.0, 0, until=200)
    measured, expected = text.tokens_per_call(steps)
    assert metric(at, "target calls (rounds)") == f"{len(steps)}"
    assert int(metric(at, "characters generated")) >= 200
    assert metric(at, "tokens per target call") == f"{measured:.3f}"
    assert metric(at, "exact expectation, contexts met") == f"{expected:.3f}"
    html = "".join(h.proto.body for h in at.get("html"))
    assert html.count('class="sv-accepted"') == sum(s.accepted for s in steps)
    assert link(at)["rounds"] == str(len(steps))


def test_text_rejected_drafts_toggle_keeps_the_text_readable_and_goes_into_the_link():
    at = open_page(TEXT, {"rounds": "20"})
    steps = transcript("The ", 4, 1.0, 0, rounds=20)
    rejected = sum(not s.bonus for s in steps)
    assert rejected > 0  # some rounds reject, so the toggle has something to show
    assert at.toggle(key="text.rej").value is False  # off by default: the text reads as text
    html = "".join(h.proto.body for h in at.get("html"))
    assert 'class="sv-rejected"' not in html and "line-through" not in html  # no struck-through legend either
    assert html.count('class="sv-replaced"') == rejected
    assert html.count('class="sv-accepted"') == sum(s.accepted for s in steps)
    at.toggle(key="text.rej").set_value(True)
    rerun(at)
    html = "".join(h.proto.body for h in at.get("html"))
    assert html.count('class="sv-rejected"') == rejected and "rejected draft (not in the text)" in html
    assert link(at)["rej"] == "1"
    again = open_page(TEXT, {"rounds": "20", "rej": "1"})
    assert again.toggle(key="text.rej").value is True
    assert "".join(h.proto.body for h in again.get("html")).count('class="sv-rejected"') == rejected


def test_text_link_round_trips_and_hostile_prompts_are_escaped():
    query = {"prompt": "<b>bold</b> & ", "K": "2", "T": "0.5", "seed": "3", "rounds": "7"}
    at = open_page(TEXT, query)
    steps = transcript(query["prompt"], 2, 0.5, 3, rounds=7)
    assert metric(at, "characters generated") == f"{sum(len(s.emitted) for s in steps)}"
    html = "".join(h.proto.body for h in at.get("html"))
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    got = link(at)
    for k, v in query.items():
        assert got[k] == v, k
    at.slider(key="text.T").set_value(0.0)  # greedy: the same rounds, recomputed
    rerun(at)
    greedy = transcript(query["prompt"], 2, 0.0, 3, rounds=7)
    assert metric(at, "characters generated") == f"{sum(len(s.emitted) for s in greedy)}"
    bad = open_page(TEXT, {"prompt": "x" * 201, "K": "99"})
    notes = texts(bad.warning)
    assert "prompt" in notes and "K" in notes
    assert bad.text_input(key="text.prompt").value == "The "


def test_text_check_is_inconclusive_without_power_and_catches_a_bug_with_it():
    at = open_page(TEXT, {"K": "1", "n": "2000"})
    pair = text.trained_pair()
    need = stats.needed_n(text.target_law(pair.target, text.encode("The ").tolist(), 2, Settings()))
    assert f"from N = {need:,}; below that" in texts(at.caption) and need > 2000
    at.button(key="text.check").click()
    rerun(at)
    assert "**Inconclusive** for the correct verifier" in texts(at.warning)
    assert f"this law needs N ≥ {need:,}" in texts(at.warning)
    at.number_input(key="text.n").set_value(10**6)
    at.selectbox(key="text.bug").set_value("resample_from_p")
    rerun(at)
    assert f"N capped at {text.MAX_CHECK_N:,}" in texts(at.warning)
    at.button(key="text.check").click()
    rerun(at)
    assert "**Fail** for the bug resample_from_p" in texts(at.error)
    assert float(metric(at, "detectable TV (99% power)")) <= 0.05


@pytest.mark.parametrize("page", [SETTINGS, INTERVIEW, TEXT])
def test_settings_survive_a_visit_to_another_page(page):
    at = open_page(page)
    key, value = {SETTINGS: ("settings.K", 6), INTERVIEW: ("interview.step", 2), TEXT: ("text.K", 7)}[page]
    if page == INTERVIEW:
        at.button(key="interview.next").click()
        rerun(at)
        at.button(key="interview.next").click()
    else:
        at.slider(key=key).set_value(value)
    rerun(at)
    at.switch_page("app_pages/tokens.py")
    at.query_params.clear()
    rerun(at)
    at.switch_page(page)
    at.query_params.clear()
    rerun(at)
    assert at.session_state[key] == value


# --- the figures behind the pages ---------------------------------------------------------------------


def test_new_figures_hold_the_computed_numbers():
    from specviz.app import figures

    zt, zd, _ = sd.PRESETS["hot drafter"]
    rep = sd.settings_report(zt, zd, Settings(top_k=2), Settings(top_p=0.5))
    fig = figures.settings_bars(rep.p_raw, rep.p, rep.q_raw, rep.q, rep.removed_p, rep.removed_q)
    by = {t.name: t for t in fig.data}
    np.testing.assert_array_equal(by["p (request's settings)"].y, rep.p)
    np.testing.assert_array_equal(by["q (drafter's settings)"].y, rep.q)
    assert len(by["removed by the request"].x) == rep.removed_p.sum() == 6
    assert len(by["removed by the drafter"].x) == rep.removed_q.sum() > 0
    # Issue 29: where both sides removed a token, the drafter's mark was drawn on top of the request's
    both = rep.removed_p & rep.removed_q
    assert both.any()
    req, dra = by["removed by the request"], by["removed by the drafter"]
    assert not {(x, y) for x, y in zip(req.x, req.y, strict=True)} & {(x, y) for x, y in zip(dra.x, dra.y, strict=True)}
    roof = iv.roofline(7e9, [1, 10, 100, 1000, 10_000])
    fig = figures.roofline_chart(roof.tokens, roof.seconds, roof.ridge_tokens, 100.0)
    ridge = [t for t in fig.data if t.name.startswith("ridge")][0]
    # A trace in data units: a shape on a log axis would read x as log10 and put the ridge at 10^295.
    assert list(ridge.x) == [roof.ridge_tokens] * 2 and not fig.layout.shapes
    # Decade ticks only, and the flat memory-bound floor inside the y range with a decade under it.
    assert fig.layout.xaxis.dtick == 1 and fig.layout.yaxis.dtick == 1
    floor_ms = np.log10(roof.seconds.min() * 1e3)
    assert fig.layout.yaxis.range[0] < np.floor(floor_ms) <= floor_ms < fig.layout.yaxis.range[1]
    star = [t for t in fig.data if t.name.startswith("this pass")][0]
    assert star.y[0] == pytest.approx(roof.seconds[2] * 1e3)
    pts = sd.sweep(zt, zd, Settings(), Settings(), "temperature", sd.sweep_values("temperature", 8), K=3)
    fig = figures.sweep_curve([p.value for p in pts], [p.acceptance for p in pts], [p.tokens_per_step for p in pts],
                              "temperature", 1.0, 3)  # fmt: skip
    right = fig.layout.yaxis2
    # Round ticks on the tokens axis: 1, 2, 3, 4 (from 1 token at a = 0 to K + 1 at a = 1), not auto-fitted ones.
    assert right.tickmode == "linear" and right.tick0 == 1 and right.dtick == 1
    assert right.range[0] == 1 and 4 <= right.range[1] < 5
    assert all(right.range[0] <= t <= right.range[1] for t in [p.tokens_per_step for p in pts])
    law = np.array([0.5, 0.3, 0.2, 0.0])
    counts = np.array([10, 10, 10, 70])
    fig = figures.continuation_comparison(law, counts, ["a", "b", "c", "d"], top=1)
    assert list(fig.data[0].x) == ["a", "d"]  # the likeliest cell and the most observed one, by exact probability
    np.testing.assert_allclose(fig.data[1].y, [0.1, 0.7])
