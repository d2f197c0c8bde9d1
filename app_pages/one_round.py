"""One round, step by step: the drafts, each coin against p/q, the residual or the bonus; Step and Play."""

from __future__ import annotations

import numpy as np
import streamlit as st

from specviz import InputError
from specviz.app import figures, find_bug, lesson_figures, links, presenter
from specviz.app import interview as iv
from specviz.app import one_round as rd
from specviz.app.results import plural
from specviz.proof.bugs import BUGS

S = "round."
KV_STEP = [q.key for q in iv.questions()].index("kv_rollback")  # the interview question with the rollback widget
TICK_S = 1.0  # Play: one tick a second, each adding rd.next_rounds' worth of rounds
PARAMS = [
    links.choice_param("preset", rd.PRESETS[0], rd.PRESETS),
    links.int_param("K", 3, 1, rd.MAX_K),
    links.int_param("seed", 0, 0, 2**32 - 1),
    links.int_param("rounds", 1, 1, rd.MAX_ROUNDS),
    links.int_param("event", 0, 0, rd.END),
    links.bool_param("compare", False),
    links.choice_param("mistake", rd.MISTAKES[0], rd.MISTAKES),
]


def step() -> None:
    r, e = rd.step(int(st.session_state[S + "rounds"]), int(st.session_state[S + "event"]),
                   int(st.session_state.get(S + "events", rd.END)))  # fmt: skip
    st.session_state[S + "rounds"], st.session_state[S + "event"] = r, e
    st.session_state[S + "playing"] = False


def toggle_play() -> None:
    st.session_state[S + "playing"] = not st.session_state.get(S + "playing", False)


def reset() -> None:
    st.session_state[S + "rounds"], st.session_state[S + "event"] = 1, 0
    st.session_state[S + "playing"] = False


link = links.open_page(st, PARAMS, S)

st.title("One round, step by step")
st.caption(
    "K drafts come from q. Each draft's coin u lands on [0, 1): below min(1, p/q) the draft is kept, above it the "
    "round stops and one token is drawn from the residual max(0, p − q), normalized; if every draft is kept, a bonus "
    "token comes from p. Every round's tokens join the histogram, which converges to p."
)
link.show_notes()

playing = bool(st.session_state.get(S + "playing", False))


def controls(t: rd.Tally, rounds: int) -> None:
    """Step, Play and Reset beside the counters; inside the fragment, so a click reruns only it."""
    left, right = st.columns([1, 1], gap="large")
    b = left.columns(3)
    b[0].button("Step", type="primary", key=S + "step", on_click=step, width="stretch",
                help="The next coin; after the last coin, the last draw; then the next round.")  # fmt: skip
    b[1].button("Pause" if playing else "Play", key=S + "play", on_click=toggle_play, width="stretch",
                help="Play whole rounds, faster and faster.")  # fmt: skip
    b[2].button("Reset", key=S + "reset", on_click=reset, width="stretch")
    m = right.columns(4)
    m[0].metric("round", f"{rounds:,}")
    m[1].metric("tokens emitted", f"{t.tokens:,}")
    m[2].metric("tokens per step", f"{t.tokens_per_step:.3f}" if t.rounds else "–")
    m[3].metric("expected: (1 − aᴷ⁺¹)/(1 − a)", f"{t.expected_tokens_per_step:.3f}")


def draw_chart(tr: rd.RoundTrace, view: rd.View, key: str) -> None:
    fig = lesson_figures.last_draw(tr.dist if view.done else None, tr.u if view.done else float("nan"), tr.last,
                                   tr.kind, rd.draw_title(tr.draw, view.done))  # fmt: skip
    st.plotly_chart(presenter.chart(fig, st.session_state), key=key)


def single(p, q, rounds: int, tr: rd.RoundTrace, view: rd.View, t: rd.Tally) -> None:
    left, right = st.columns([1, 1], gap="large")
    with left:
        fig = lesson_figures.coin_lines(view.steps, f"Round {rounds}: coins against p/q")
        st.plotly_chart(presenter.chart(fig, st.session_state), key=S + "coins")
        draw_chart(tr, view, S + "draw")
        st.markdown(rd.status(tr, view, rounds))
        if view.done:  # after the rejection (or the bonus): what a real model's caches keep, with the widget
            st.caption(rd.rollback_sentence(tr))
            st.page_link("app_pages/interview.py", label="KV-cache rollback, with your own L, K and pages",
                         query_params={"step": str(KV_STEP)}, icon=":material/memory:")  # fmt: skip
        r = rd.residual(p, q)
        with st.expander("How the residual is built: max(0, p − q), normalized"):
            st.markdown(f"max(0, p − q) = {links.plain(np.round(r.excess, 4).tolist())}, mass 1 − a = {r.mass:.4f}; "
                        f"normalized: {links.plain(np.round(r.law, 4).tolist())}.")  # fmt: skip
            st.plotly_chart(presenter.chart(figures.decomposition_bar(p, q), st.session_state), key=S + "build")
    with right:
        fig = lesson_figures.round_histogram(p, t.counts, f"All tokens of {plural(t.rounds, 'round')} against p")
        st.plotly_chart(presenter.chart(fig, st.session_state), key=S + "hist")
        if t.tokens:
            st.caption(rd.tally_caption(t))


def side_by_side(p, q, rule, bad, rounds: int, event: int, sides, mistake: str) -> None:
    done = rd.rounds_done(rounds, event, max(tr.events for tr, _ in sides))
    part = rd.parting(rule, bad, done)
    if part.round is None:
        these = "this round" if done == 1 else f"these {plural(done, 'round')}"
        st.info(f"On {these} the rule and {mistake} emitted the same tokens: keep playing.",
                icon=":material/compare_arrows:")  # fmt: skip
    else:
        st.warning(f"The rule and {mistake} first differ in round {part.round + 1}, at emitted token "
                   f"{part.position + 1}; {part.rounds_differing:,} of {plural(done, 'round')} "
                   f"differ{'s' if part.rounds_differing == 1 else ''}.",
                   icon=":material/call_split:")  # fmt: skip
    names = ("the rule", mistake)
    for col, name, res, (trc, view) in zip(st.columns(2, gap="large"), names, (rule, bad), sides, strict=True):
        with col:
            fig = lesson_figures.coin_lines(view.steps, f"Round {rounds}, {name}")
            st.plotly_chart(presenter.chart(fig, st.session_state), key=S + "coins." + name)
            draw_chart(trc, view, S + "draw." + name)
            st.markdown(rd.status(trc, view, rounds))
            tal = rd.tally(p, q, res, rd.rounds_done(rounds, event, trc.events))
            fig = lesson_figures.round_histogram(p, tal.counts, f"{name}: {plural(tal.tokens, 'token')}")
            st.plotly_chart(presenter.chart(fig, st.session_state), key=S + "hist." + name)
            if tal.test is not None and tal.test.dof >= 1:
                st.caption(f"{tal.tokens_per_step:.3f} tokens per step; chi-square against p: p-value "
                           f"{find_bug.p_value_text(tal.test)} (fails below α = {tal.test.alpha:g}).")  # fmt: skip
            elif tal.tokens:
                st.caption(f"{tal.tokens_per_step:.3f} tokens per step; chi-square against p: nothing to test yet "
                           "(every token in one pooled cell).")  # fmt: skip
    st.caption(rd.mistake_caption(mistake, sides[0], sides[1], rounds))


@st.fragment(run_every=TICK_S if playing else None)
def stage() -> None:
    """The rounds so far; while playing, each tick adds rounds and reruns only this part."""
    if bool(st.session_state.get(S + "playing", False)) != playing:
        st.rerun()  # Play or Pause was clicked: the whole page reruns to start or stop the timer
    rounds, event = int(st.session_state[S + "rounds"]), int(st.session_state[S + "event"])
    K, seed = int(st.session_state[S + "K"]), int(st.session_state[S + "seed"])
    mistake = st.session_state[S + "mistake"] if st.session_state[S + "compare"] else None
    try:
        p, q = rd.pair(st.session_state[S + "preset"], seed)
        if playing:
            rounds, event = rd.play_tick(rounds, event, rd.events(p, q, K, rounds, seed, mistake))
            st.session_state[S + "rounds"], st.session_state[S + "event"] = rounds, event
        coins = rd.coins(q, K, rounds, seed)
        rule = rd.play(p, q, coins)
        bad = rd.play(p, q, coins, mistake) if mistake else None
        traces = [rd.trace(p, q, coins, rounds - 1, m) for m in ((None, mistake) if mistake else (None,))]
    except InputError as e:
        st.error(links.error_text(e), icon=":material/error:")
        return
    st.session_state[S + "events"] = max(tr.events for tr in traces)  # what Step walks through in this round
    sides = [(tr, rd.at_event(tr, event)) for tr in traces]
    t = rd.tally(p, q, rule, rd.rounds_done(rounds, event, traces[0].events))
    controls(t, rounds)
    if bad is None:
        single(p, q, rounds, *sides[0], t)
    else:
        side_by_side(p, q, rule, bad, rounds, event, sides, mistake)
    shown = {n: st.session_state[S + n] for n in ("preset", "K", "seed", "rounds", "event", "compare", "mistake")}
    link.show_in_link(shown)
    if rounds >= rd.MAX_ROUNDS and playing:  # the end: stop the timer
        st.session_state[S + "playing"] = False
        st.rerun()


stage()

# The settings below the lesson: on a projector the coins and the histogram come first.
c = st.columns([1, 1, 1, 1, 2])
c[0].selectbox("p and q", rd.PRESETS, key=S + "preset")
c[1].slider("drafts K", 1, rd.MAX_K, key=S + "K")
c[2].number_input("seed", min_value=0, max_value=2**32 - 1, step=1, key=S + "seed")
c[3].toggle("Mistake beside it", key=S + "compare",
            help="The same drafts and uniforms through a verifier with one step swapped; its side shows what it read.")
c[4].selectbox("mistake", rd.MISTAKES, key=S + "mistake", disabled=not st.session_state[S + "compare"],
               help="; ".join(f"{n}: {BUGS[n].title}" for n in rd.MISTAKES))  # fmt: skip


