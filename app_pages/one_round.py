"""One round, step by step: the drafts, each coin against p/q, the residual or the bonus; Step and Play."""

from __future__ import annotations

import streamlit as st

from specviz import InputError
from specviz.app import figures, lesson_figures, links, presenter
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


def click(button: str) -> None:
    """Step, Play (or Pause) and Reset: the round, the event and the timer after the click (rd.click)."""
    ss = st.session_state
    now = int(ss[S + "rounds"]), int(ss[S + "event"]), int(ss.get(S + "events", rd.END)), bool(ss.get(S + "playing"))
    ss[S + "rounds"], ss[S + "event"], ss[S + "playing"] = rd.click(button, *now)


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
    b[0].button("Step", type="primary", key=S + "step", on_click=click, args=("step",), width="stretch",
                help="The next coin; after the last coin, the last draw; then the next round.")  # fmt: skip
    b[1].button("Pause" if playing else "Play", key=S + "play", on_click=click, args=("play",), width="stretch",
                help="Play whole rounds, faster and faster.")  # fmt: skip
    b[2].button("Reset", key=S + "reset", on_click=click, args=("reset",), width="stretch")
    m = right.columns(4)
    m[0].metric("round", f"{rounds:,}")
    m[1].metric("tokens emitted", f"{t.tokens:,}")
    m[2].metric("tokens per step", f"{t.tokens_per_step:.3f}" if t.rounds else "–")
    m[3].metric("expected: (1 − aᴷ⁺¹)/(1 − a)", f"{t.expected_tokens_per_step:.3f}")


def chart(fig, key: str) -> None:
    st.plotly_chart(presenter.chart(fig, st.session_state), key=S + key)


def round_view(side: rd.Side, rounds: int, title: str, key: str) -> None:
    """One verifier's last round: its coins against p/q, its last draw, and where Step is."""
    d, view = side.trace.draw, side.view
    chart(lesson_figures.coin_lines(view.steps, title), "coins" + key)
    chart(lesson_figures.last_draw(d.law if view.done else None, d.u if view.done else float("nan"), d.token, d.kind,
                                   rd.draw_title(d, view.done)), "draw" + key)  # fmt: skip
    st.markdown(rd.status(side.trace, view, rounds))


def single(sg: rd.Stage) -> None:
    rule, t = sg.sides[0], sg.sides[0].tally
    left, right = st.columns([1, 1], gap="large")
    with left:
        round_view(rule, sg.rounds, f"Round {sg.rounds}: coins against p/q", "")
        if rule.view.done:  # after the rejection (or the bonus): what a real model's caches keep, with the widget
            st.caption(rd.rollback_sentence(rule.trace))
            st.page_link("app_pages/interview.py", label="KV-cache rollback, with your own L, K and pages",
                         query_params={"step": str(KV_STEP)}, icon=":material/memory:")  # fmt: skip
        with st.expander("How the residual is built: max(0, p − q), normalized"):
            st.markdown(rd.residual_text(sg.p, sg.q))
            chart(figures.decomposition_bar(sg.p, sg.q), "build")
    with right:
        chart(lesson_figures.round_histogram(sg.p, t.counts, f"All tokens of {plural(t.rounds, 'round')} against p"),
              "hist")  # fmt: skip
        if t.tokens:
            st.caption(rd.tally_caption(t))


def side_by_side(sg: rd.Stage, mistake: str) -> None:
    differs, note = rd.parting_note(sg, mistake)
    (st.warning if differs else st.info)(note, icon=":material/call_split:" if differs else ":material/compare_arrows:")
    for col, side in zip(st.columns(2, gap="large"), sg.sides, strict=True):
        with col:
            t, key = side.tally, "." + side.name
            round_view(side, sg.rounds, f"Round {sg.rounds}, {side.name}", key)
            fig = lesson_figures.round_histogram(sg.p, t.counts, f"{side.name}: {plural(t.tokens, 'token')}")
            chart(fig, "hist" + key)
            if (caption := rd.side_caption(t)) is not None:
                st.caption(caption)
    st.caption(rd.mistake_caption(mistake, *sg.sides, sg.rounds))


@st.fragment(run_every=TICK_S if playing else None)
def stage() -> None:
    """The rounds so far; while playing, each tick adds rounds and reruns only this part."""
    ss = st.session_state
    if bool(ss.get(S + "playing", False)) != playing:
        st.rerun()  # Play or Pause was clicked: the whole page reruns to start or stop the timer
    mistake = ss[S + "mistake"] if ss[S + "compare"] else None
    try:
        sg = rd.stage(ss[S + "preset"], int(ss[S + "K"]), int(ss[S + "seed"]), int(ss[S + "rounds"]),
                      int(ss[S + "event"]), mistake, playing)  # fmt: skip
    except InputError as e:
        st.error(links.error_text(e), icon=":material/error:")
        return
    ss[S + "rounds"], ss[S + "event"] = sg.rounds, sg.event  # a tick of Play moved them
    ss[S + "events"] = sg.events  # what Step walks through in this round
    controls(sg.sides[0].tally, sg.rounds)
    if mistake is None:
        single(sg)
    else:
        side_by_side(sg, mistake)
    link.show_in_link({n: ss[S + n] for n in ("preset", "K", "seed", "rounds", "event", "compare", "mistake")})
    if sg.rounds >= rd.MAX_ROUNDS and playing:  # the end: stop the timer
        ss[S + "playing"] = False
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
