"""Real text: speculative sampling writes English with two character n-gram models, and stays exact."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from specviz import InputError
from specviz.app import figures, links, presenter, serving, text
from specviz.proof import stats
from specviz.proof.bugs import BUGS
from specviz.verifiers.processing import Settings

S = "text."
NONE = "none (correct verifier)"
MAX_PROMPT = 200  # characters of prompt
RUN_TO = 200  # characters the "Run" button generates
MAX_ROUNDS = 400  # rounds kept in a transcript (the link can ask for no more)
MAX_K = 8
CHECK_L = text.CHECK_L
BUG_NAMES = [NONE, *text.text_bugs()]
COLORS = {"accepted": figures.ACCEPTED, "rejected": "#9e9e9e", "replaced": figures.REPLACED, "bonus": figures.BONUS}
PARAMS = [
    links.text_param("prompt", "The ", MAX_PROMPT),
    links.int_param("K", 4, 1, MAX_K),
    links.float_param("T", 1.0, 0.0, 2.0),
    links.int_param("seed", 0, 0, 2**32 - 1),
    links.int_param("rounds", 0, 0, MAX_ROUNDS),
    links.int_param("n", text.MAX_CHECK_N, 1, 10**12),
    links.choice_param("bug", NONE, BUG_NAMES),
    links.bool_param("rej", False),
]


@st.cache_resource(show_spinner="Training the two models…")
def models() -> text.Pair:
    return text.trained_pair()


@st.cache_data(show_spinner=False, max_entries=64, ttl=3600)
def transcript(prompt: str, K: int, T: float, seed: int, rounds: int | None, until: int | None) -> list[text.Step]:
    pair = models()
    return text.transcript(pair.target, pair.drafter, text.encode(prompt).tolist(), K, Settings(temperature=T), seed,
                           rounds=rounds, until=until)  # fmt: skip


@st.cache_data(show_spinner="Generating and testing…", max_entries=32, ttl=3600)
def run_check(prompt: str, K: int, T: float, seed: int, n: int, bug: str) -> text.Check:
    verifier = None if bug == NONE else BUGS[bug].verifier
    return text.check(models(), prompt, K, Settings(temperature=T), seed, n, verifier)


@st.cache_data(show_spinner=False, max_entries=256, ttl=3600)
def needed(prompt: str, T: float) -> int:
    """Sequences the check needs after this prompt to see a TV shift of stats.MIN_TV."""
    law = text.target_law(models().target, text.encode(prompt).tolist(), CHECK_L, Settings(temperature=T))
    return stats.needed_n(law)


def set_rounds(r: int) -> None:
    st.session_state[S + "rounds"] = max(0, min(MAX_ROUNDS, r))


def run_to() -> None:
    ss = st.session_state
    steps = transcript(ss[S + "prompt"], int(ss[S + "K"]), float(ss[S + "T"]), int(ss[S + "seed"]), None, RUN_TO)
    set_rounds(len(steps))


CHECKED = links.Result("checked")  # a link restores the check's result
link = links.open_page(st, PARAMS, S, results=(CHECKED,))

st.title("Real text")
pair = models()
st.caption(
    f"Two character models trained when the app starts on the Python documentation topics that ship with every "
    f"Python ({len(text.corpus()):,} characters): the target a {pair.target.order}-gram, the drafter a "
    f"{pair.drafter.order}-gram, both smoothed so that every character has positive probability. Each round the "
    "drafter proposes K characters and one target call verifies them with specviz.verifiers.verify."
)
link.show_notes()

left, right = st.columns([1, 2], gap="large")
with left:
    prompt = st.text_input("Prompt", max_chars=MAX_PROMPT, key=S + "prompt")
    if text.decode(text.encode(prompt)) != prompt:
        st.caption(f"Characters outside printable ASCII and newline are read as '{text.UNKNOWN}'.")
    K = st.slider("Drafts per round K", 1, MAX_K, key=S + "K")
    T = st.slider("Temperature (both models; 0 is greedy)", 0.0, 2.0, step=0.1, key=S + "T")
    seed = st.number_input("Seed", min_value=0, max_value=2**32 - 1, step=1, key=S + "seed")
    st.caption(
        f"Round r draws its random numbers from (seed, r): the link reproduces the text round by round "
        f"(at most {MAX_ROUNDS} rounds)."
    )

rounds = int(st.session_state[S + "rounds"])
with right:
    # The controls sit over the text they write, in one row sized to their labels (three equal columns in the
    # narrow left column wrapped "Run to 200 characters" at 1280 px).
    with st.container(horizontal=True, gap="small", vertical_alignment="center"):
        st.button("Step", type="primary", key=S + "step", on_click=set_rounds, args=(rounds + 1,),
                  disabled=rounds >= MAX_ROUNDS, wrap=False)  # fmt: skip
        st.button(f"Run to {RUN_TO} characters", key=S + "run", on_click=run_to, wrap=False)
        st.button("Clear", key=S + "clear", on_click=set_rounds, args=(0,), wrap=False)
        show_rejected = st.toggle("show rejected drafts", key=S + "rej",
                                  help="Struck through where they were proposed. Off, the text reads as text and a "
                                       "replacement's tooltip names the draft it replaced.")  # fmt: skip
steps = transcript(prompt, int(K), float(T), int(seed), rounds, None)
with right:
    kinds = (("accepted", "accepted draft"), ("rejected", "rejected draft (not in the text)"),
             ("replaced", "replacement"), ("bonus", "bonus"))  # fmt: skip
    legend = " ".join(
        f'<span style="color:{COLORS[k]}{";text-decoration:line-through" if k == "rejected" else ""}">■ {name}</span>'
        for k, name in kinds
        if show_rejected or k != "rejected"
    )
    st.html(f"<div>{legend}</div>")
    st.html(text.transcript_html(text.encode(prompt).tolist(), steps, COLORS, show_rejected=bool(show_rejected)))
    if not steps:
        st.info("Click **Step** for one round, or run to 200 characters. Hover a character for its p, q and coin.")
    measured, expected = text.tokens_per_call(steps)
    m = st.columns(4)
    m[0].metric("target calls (rounds)", f"{len(steps)}")
    m[1].metric("characters generated", f"{sum(len(s.emitted) for s in steps)}")
    m[2].metric("tokens per target call", "–" if not steps else f"{measured:.3f}")
    m[3].metric(
        "exact expectation, contexts met",
        "–" if not steps else f"{expected:.3f}",
        help="mean over the rounds of 1 + Σ_i Π_(j≤i) min(1, p_j/q_j) for the drafts each round proposed",
    )
    if steps:
        last = steps[-1]
        emitted = links.plain(repr(text.decode(last.emitted)))  # steered by the prompt: shown as plain text
        st.caption(f"Round {len(steps)}: emitted {emitted}" + (" (bonus)" if last.bonus else ""))
        st.dataframe(pd.DataFrame(text.round_rows(last)), hide_index=True, key=S + "last_round")

shown = {k: st.session_state[S + k] for k in ("prompt", "K", "T", "seed", "rounds", "n", "bug", "rej")}

st.divider()
st.subheader("Check exactness")
c1, c2 = st.columns([1, 2], gap="large")
with c1:
    st.caption(
        f"Generate N continuations of the prompt by draft-and-verify rounds with the settings above and test the "
        f"joint law of the next {CHECK_L} characters against the target's exact law (chi-square over "
        f"{len(text.ALPHABET) ** CHECK_L:,} cells, small ones pooled, α = {stats.ALPHA:g}). N is capped at "
        f"{text.MAX_CHECK_N:,} so that a click answers in a few seconds."
    )
    try:
        need = needed(prompt, float(T))
        st.caption(
            f"After this prompt the test sees a TV shift of {stats.MIN_TV:g} with {stats.POWER:.0%} probability from "
            f"N = {need:,}" + (": beyond the cap, so expect an inconclusive verdict." if need > text.MAX_CHECK_N
                               else "; below that, expect an inconclusive verdict.")
        )  # fmt: skip
    except InputError as e:
        st.error(links.error_text(e), icon=":material/error:")
    n_asked = st.number_input("N sequences", min_value=1, step=5_000, key=S + "n")
    n = link.cap(int(n_asked), text.MAX_CHECK_N, "N", "a check must answer a click in a few seconds")
    bug = st.selectbox("Verifier", BUG_NAMES, key=S + "bug",
                       format_func=lambda b: b if b == NONE else f"bug: {b} ({BUGS[b].title.lower()})")  # fmt: skip
    clicked = st.button("Run the check", key=S + "check")  # the page's primary button is Step, on top
shown |= {"n": int(n_asked), "bug": bug}
check_key = (prompt, int(K), float(T), int(seed), n, bug)
if clicked or link.restores(CHECKED):
    st.session_state[S + "checked"] = check_key
checked = st.session_state.get(S + "checked") == check_key
with c2:
    if not checked:
        st.info("Click **Run the check**; switch the verifier to a bug to watch the law drift.")
    else:
        try:
            res = serving.heavy(("real-text", *check_key), lambda: run_check(*check_key), st.empty())
        except InputError as e:
            st.error(links.error_text(e), icon=":material/error:")
            res = None
        if res is not None:
            j = res.joint
            who = "the correct verifier" if bug == NONE else f"the bug {bug}"
            says, sentence = text.check_verdict(j, who, n, res.needed, correct=bug == NONE)
            show, icon = text.CHECK_BOXES[says]
            getattr(st, show)(sentence, icon=icon)
            m = st.columns(4)
            m[0].metric(f"chi-square ({j.dof} dof)", f"{j.statistic:,.1f}", help=f"{j.cells} cells after pooling")
            m[1].metric(f"critical value (α = {j.alpha:g})", f"{j.critical_value:,.1f}")
            m[2].metric("TV(observed, exact)", f"{j.tv:.4f}")
            m[3].metric(f"detectable TV ({j.power:.0%} power)", f"{j.detectable_tv:.4f}")
            fig = figures.continuation_comparison(res.law, res.counts, text.cell_labels(CHECK_L))
            st.plotly_chart(presenter.chart(fig, st.session_state), key=S + "law")

link.show_in_link(shown, [CHECKED] if checked else [])
