"""Find the bug: twenty histograms, one from a mistake; guess which, then the chi-square of each."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from specviz import InputError
from specviz.app import find_bug as fb
from specviz.app import flow, lesson_figures, links, presenter
from specviz.proof.bugs import BUGS

S = "findbug."
NO_GUESS = "no guess yet"
CLOSE = 1.2  # thresholds within this factor of each other are "about as well"
GUESSES = (NO_GUESS, *(str(i + 1) for i in range(fb.PANELS)))
PARAMS = [
    links.choice_param("mistake", "shared_noise_stream", fb.MISTAKES),
    links.int_param("n", 300, 1, 10**12),
    links.int_param("seed", 0, 0, 2**32 - 1),
]


@st.cache_data(show_spinner="Drawing twenty histograms…", max_entries=32, ttl=3600)
def lineup(mistake: str, n: int, seed: int) -> fb.Lineup:
    return fb.lineup(mistake, n, seed)


@st.cache_resource(show_spinner=False, max_entries=64, ttl=3600)  # shared, never changed: 20 panels take 0.09 s
def panels(mistake: str, n: int, seed: int, revealed: bool) -> go.Figure:
    result = lineup(mistake, n, seed)
    return lesson_figures.panels(fb.P, result.counts, marked=result.odd if revealed else None)


def hide() -> None:
    st.session_state[S + "revealed"] = False
    st.session_state[S + "guess"] = NO_GUESS


def reveal() -> None:
    st.session_state[S + "revealed"] = True


REVEALED = links.Result("revealed", answers_prediction=True)  # a link restores the lineup, never the answer
link = links.open_page(st, PARAMS, S, keep=("guess", "revealed"), results=(REVEALED,))
if link.from_link:  # a shared link shows the twenty histograms unrevealed, even to a session that revealed them
    hide()
st.session_state.setdefault(S + "guess", NO_GUESS)
st.session_state.setdefault(S + "revealed", False)

st.title("Find the bug")
st.caption(
    f"Each histogram holds the first token of N verifications of the textbook example (p = {fb.P.tolist()}, q "
    f"uniform, K = {fb.K}). {fb.PANELS - 1} come from the correct verifier, one from a mistake the seed placed at "
    "random. Which one? The ticks are p."
)
link.show_notes()

c = st.columns([2, 1, 1, 1, 1])
c[0].selectbox("mistake", fb.MISTAKES, key=S + "mistake", on_change=hide,
               help="Each is the correct verifier with one step swapped: " + "; ".join(
                   f"{name}: {BUGS[name].title}" for name in fb.MISTAKES))  # fmt: skip
n_asked = c[1].number_input("N per histogram", min_value=1, step=50, key=S + "n", on_change=hide)
c[2].number_input("seed", min_value=0, max_value=2**32 - 1, step=1, key=S + "seed", on_change=hide)
c[3].selectbox("your guess", GUESSES, key=S + "guess")
c[4].button("Reveal", type="primary", key=S + "reveal", on_click=reveal)
n = link.cap(int(n_asked), fb.MAX_N, "N per histogram", f"{fb.PANELS} histograms must answer a click")

mistake, seed, revealed = st.session_state[S + "mistake"], int(st.session_state[S + "seed"]), st.session_state[
    S + "revealed"]  # fmt: skip
try:
    result = lineup(mistake, n, seed)
except InputError as e:
    st.error(links.error_text(e), icon=":material/error:")
    raise flow.EndOfPage from None  # st.stop() would drop the Next link
fig = panels(mistake, n, seed, revealed)
st.plotly_chart(presenter.chart(fig, st.session_state), key=S + "panels")

if revealed:
    odd = result.odd + 1
    guess = st.session_state[S + "guess"]
    if guess == NO_GUESS:
        st.info(f"The mistake is histogram {odd} (no guess was made).", icon=":material/visibility:")
    elif int(guess) == odd:
        st.success(f"Right: histogram {odd} is {mistake}.", icon=":material/check_circle:")
    else:
        st.error(f"Histogram {odd} is {mistake}, not {guess}.", icon=":material/cancel:")
    st.caption(f"{mistake}: {BUGS[mistake].title}.")
    th = fb.thresholds(mistake)
    m = st.columns(3)
    m[0].metric("the eye picks it out from N ≈", f"{th.n_eye:,}")
    m[1].metric("the chi-square picks it out from N ≈", f"{th.n_test:,}")
    m[2].metric(f"test alone, power {th.power:g} at α = {th.alpha:g}", f"N ≥ {th.n_power:,}")
    ratio = th.n_eye / th.n_test
    where = (
        f"Below N ≈ {th.n_eye:,} the eye stops seeing what the test still sees down to N ≈ {th.n_test:,} "
        f"({ratio:.1f}× fewer samples)"
        if ratio >= CLOSE
        else f"Here the eye does about as well as the test (N ≈ {th.n_eye:,} against {th.n_test:,})"
        if ratio > 1 / CLOSE
        else f"Here the eye beats the test (N ≈ {th.n_eye:,} against {th.n_test:,}): the whole shift sits on one bar"
    )
    st.markdown(
        f"{where}. The eye compares bar heights with the ticks: the mistake moves token {th.eye_token}'s bar furthest "
        f"from p, and it must stand out from the largest wiggle of the {(fb.PANELS - 1) * fb.P.size} bars of the "
        f"{fb.PANELS - 1} honest histograms "
        f"(median {th.eye_wiggle:.2f} / √N). The chi-square adds every bar's shift, each in its own standard errors, "
        f"and must beat the largest of {fb.PANELS - 1} honest statistics (median {th.chi_max:.2f}). Each figure is "
        "where it picks the right histogram about half the time; this N is "
        f"{n:,}. TV of the mistake's first token from p: {th.tv:.3f}."
    )
    rows = [
        {
            "histogram": i + 1,
            "chi-square": round(t.statistic, 2),
            "p-value": fb.p_value_text(t),
            f"fails at α = {t.alpha:g}": not t.passed,
            "from": mistake if i == result.odd else "the rule",
        }
        for i, t in enumerate(result.tests)
    ]
    # The mistake's row first, in view with the table's top (it sat below the rows a projector shows), then
    # the rule's in order; every row drawn (a row's height grows with presenter mode's font).
    rows.insert(0, rows.pop(result.odd))
    st.caption(f"Histogram {odd} first, then the rule's {fb.PANELS - 1} in order.")
    wide = {"from": st.column_config.TextColumn(width="medium")}  # room for the mistake's name at 150 % zoom
    st.dataframe(rows, hide_index=True, key=S + "table", height="content", column_config=wide)

shown = {name: st.session_state[S + name] for name in ("mistake", "n", "seed")}
link.show_in_link(shown, [REVEALED] if revealed else [])
