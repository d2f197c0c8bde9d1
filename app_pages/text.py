"""Real text: speculative sampling on SmolLM2-135M or on two character n-gram models, and exactness on each."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from specviz import InputError, models
from specviz.app import figures, links, presenter, real_exact, real_text, serving, text
from specviz.proof.bugs import BUGS
from specviz.verifiers.processing import Settings

S, NONE = "text.", "none (correct verifier)"
MODEL, NGRAMS = "SmolLM2-135M (the real model)", "character n-grams (offline, light)"
MAX_PROMPT, RUN_TO, MAX_ROUNDS, MAX_K, MORE = 200, 200, 400, 8, 10  # characters; characters; rounds; drafts; rounds
BUG_NAMES = [NONE, *text.text_bugs()]
COLORS = {"accepted": figures.ACCEPTED, "rejected": "#9e9e9e", "replaced": figures.REPLACED, "bonus": figures.BONUS}
PARAMS = [
    links.text_param("prompt", "The ", MAX_PROMPT), links.int_param("K", 4, 1, MAX_K), links.bool_param("rej", False),
    links.float_param("T", 1.0, 0.0, 2.0), links.int_param("seed", 0, 0, 2**32 - 1), *real_text.link_params(NONE),
    links.int_param("rounds", 0, 0, MAX_ROUNDS), links.int_param("n", text.MAX_CHECK_N, 1, 10**12),
    links.choice_param("bug", NONE, BUG_NAMES), links.choice_param("src", NGRAMS, [NGRAMS, MODEL])]  # fmt: skip


def metric_row(items: list[tuple[str, str, str]]) -> None:
    for col, (name, value, why) in zip(st.columns(len(items)), items, strict=True):
        col.metric(name, value, help=why or None)


def heavy(key: tuple, compute: Any) -> Any:  # through the server's queue; a bad value shown, the result None
    try:
        return serving.heavy(key, compute, st.empty())
    except InputError as e:
        st.error(links.error_text(e), icon=":material/error:")


def set_rounds(r: int) -> None:
    st.session_state[S + "rounds"] = max(0, min(MAX_ROUNDS, r))


CHECKED, XCHECKED = links.Result("checked"), links.Result("xchecked")  # a link restores the checks' results
link = links.open_page(st, PARAMS, S, results=(CHECKED, XCHECKED))
st.title("Real text")
src = st.radio("Models", [MODEL, NGRAMS], key=S + "src", horizontal=True, on_change=set_rounds, args=(0,))
real = src == MODEL and models.missing() is None
if src == MODEL and not real:
    st.info(real_text.INSTALL_NOTE.format(why=models.missing()), icon=":material/download:")
st.caption(real_text.CAPTION if real else text.caption(text.trained_pair()))
link.show_notes()
left, right = st.columns([1, 2], gap="large")
with left:
    prompt = st.text_input("Prompt", max_chars=MAX_PROMPT, key=S + "prompt")
    if not real and (note := text.prompt_note(prompt)):
        st.caption(note)
    K = int(st.slider("Drafts per round K", 1, MAX_K, key=S + "K"))
    T = float(st.slider(f"Temperature ({'target' if real else 'both'}; 0 is greedy)", 0.0, 2.0, step=0.1, key=S + "T"))
    if real:
        top_p = float(st.slider("Top-p (target and drafter)", 0.05, 1.0, step=0.05, key=S + "tp"))
        kind = st.selectbox("Drafter", list(real_text.DRAFTERS), format_func=real_text.DRAFTERS.get, key=S + "drafter")
        layers = int(st.slider("Early exit after L of 30 layers", 1, 29, key=S + "L", disabled=kind != "early"))
        dT = float(st.slider("The drafter's temperature", 0.0, 2.0, step=0.1, key=S + "dT", disabled=kind == "lookup"))
    seed = int(st.number_input("Seed", min_value=0, max_value=2**32 - 1, step=1, key=S + "seed",
                               help="Round r draws from (seed, r): the link reproduces the text round by round."))
rounds = int(st.session_state[S + "rounds"])
with right, st.container(horizontal=True, gap="small", vertical_alignment="center"):
    st.button("Step", type="primary", key=S + "step", on_click=set_rounds, args=(rounds + 1,),
              disabled=rounds >= MAX_ROUNDS, wrap=False)  # fmt: skip
    st.button(f"Run {MORE} more rounds" if real else f"Run to {RUN_TO} characters", key=S + "run", wrap=False,
              on_click=lambda: set_rounds(rounds + MORE if real else len(text.page_transcript(prompt, K, T, seed, None,
                                                                                           RUN_TO))))  # fmt: skip
    st.button("Clear", key=S + "clear", on_click=set_rounds, args=(0,), wrap=False)
    show_rejected = bool(st.toggle("show rejected drafts", key=S + "rej", help="Struck through where they were "
                                   "proposed. Off, a replacement's tooltip names the draft it replaced."))  # fmt: skip
with right:
    st.html(text.legend_html(COLORS, show_rejected))
    board = st.empty()
if real:
    spec = real_text.Spec(prompt, T, top_p, kind, layers, dT, K, seed)
    R = link.cap(rounds, real_text.MAX_ROUNDS, "Rounds", "a round of the real model takes up to a second")
    with st.spinner("Loading SmolLM2-135M…"):
        m = models.load()  # once per process
    run = heavy(("real-model", *spec, R), lambda: real_text.rounds(
        m, spec, R, lambda r: board.html(real_text.transcript_html(m, r, COLORS, show_rejected, prompt)))) or st.stop()
    board.html(real_text.transcript_html(m, run, COLORS, show_rejected, prompt))
    with right:
        metric_row((ms := real_text.metrics(run, K))[:5])
        metric_row(ms[5:])
    if not run.views:
        right.info("Click **Step** for one round of the real model. Hover a token for its p, q and coin.")
    else:
        last = run.views[-1]  # the round's table at full width: a half column cut its columns at 1280×720
        st.caption(f"Round {len(run.views)}: emitted {links.plain(repr(m.decode(last.round.emitted)))}")
        st.dataframe(pd.DataFrame(real_text.round_rows(m, last)), hide_index=True, key=S + "model_round")
        c1, c2 = st.columns([1, 1], gap="large")
        c1.dataframe(pd.DataFrame(real_text.acceptance_rows(run, K)), hide_index=True, key=S + "acceptance")
        c1.caption(real_text.cost_sentence(real_text.costs(run, K), K))
        pos = c2.radio("Position of the last round", range(1, len(last.tops) + 1), index=last.round.accepted,
                       horizontal=True)  # fmt: skip
        fig = real_text.position_figure(last.tops[pos - 1], real_text.position_title(last, pos))
        c2.plotly_chart(presenter.chart(fig, st.session_state), key=S + "position")
else:
    steps = text.page_transcript(prompt, K, T, seed, rounds, None)
    board.html(text.transcript_html(text.encode(prompt).tolist(), steps, COLORS, show_rejected=show_rejected))
    with right:
        if not steps:
            st.info("Click **Step** for one round, or run to 200 characters. Hover a character for its p, q and coin.")
        metric_row(text.metrics(steps))
        if steps:
            st.caption(text.last_round_caption(steps))
            st.dataframe(pd.DataFrame(text.round_rows(steps[-1])), hide_index=True, key=S + "last_round")

st.divider()
st.subheader("Check exactness")
c1, c2 = st.columns([1, 2], gap="large")
with c1:  # the real model's check or the n-grams': one form, each with its own keys in the link
    st.caption(real_exact.CAPTION if real else text.check_caption())
    try:
        if not real:
            st.caption(text.needed_caption(text.needed_after(prompt, T)))
    except InputError as e:
        st.error(links.error_text(e), icon=":material/error:")
    nk, cap, bk, names = ("xn", real_exact.MAX_N, "xbug", [NONE, *real_exact.MISTAKES]) if real else \
        ("n", text.MAX_CHECK_N, "bug", BUG_NAMES)  # fmt: skip
    n = link.cap(int(st.number_input("N runs" if real else "N sequences", min_value=1, step=5_000, key=S + nk)), cap,
                 "N", "a check must answer a click in a few seconds")  # fmt: skip
    bug = st.selectbox("Verifier", names, key=S + bk,
                       format_func=lambda b: b if b == NONE else f"bug: {b} ({BUGS[b].title.lower()})")
    clicked = st.button("Run the check", key=S + ("xcheck" if real else "check"))  # the primary button is Step
key, result = (("real-exact", kind, layers, n, seed, bug), XCHECKED) if real else \
    (("real-text", prompt, K, T, seed, n, bug), CHECKED)  # fmt: skip
if clicked or link.restores(result):
    st.session_state[S + "checked"] = key
checked = st.session_state.get(S + "checked") == key
with c2:
    if not checked:
        st.info("Click **Run the check**; switch the verifier to a mistake to watch the law drift.")
    else:
        mistake = None if bug == NONE else bug
        res = heavy(key, (lambda: real_exact.check(m, real_exact.real_rows(m, kind, layers), n, seed, mistake)) if real
                    else lambda: text.check(text.trained_pair(), prompt, K, Settings(temperature=T), seed, n,
                                            None if mistake is None else BUGS[mistake].verifier))  # fmt: skip
        for s in [] if res is None else real_exact.shown(res) if real else text.shown_check(res, mistake, n):
            getattr(st, text.CHECK_BOXES[s.says][0])(s.sentence, icon=text.CHECK_BOXES[s.says][1])
            if s.metrics:
                metric_row(s.metrics)
            st.plotly_chart(presenter.chart(s.figure, st.session_state), key=S + s.key)
            if s.note:
                st.caption(s.note)
link.show_in_link({p.name: st.session_state[S + p.name] for p in PARAMS}, [result] if checked else [])
