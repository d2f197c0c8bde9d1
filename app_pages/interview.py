"""Interview walkthrough: one question at a time, commit an answer, then the derivation and a live widget."""

from __future__ import annotations

import numpy as np
import streamlit as st

from specviz.app import figures, links, presenter
from specviz.app import interview as iv
from specviz.proof import theory

S = "interview."
QUESTIONS = iv.questions()
SUMMARY = len(QUESTIONS)  # the step after the last question
EXAMPLE_PARAMS = 7e9  # the roofline chart's model size; the verification cost does not depend on it
K_RANGE = range(1, 17)


def parse_answers(text: str) -> str:
    iv.decode_answers(text)  # raises InputError (a ValueError) on a malformed entry
    return text


PARAMS = [
    links.int_param("step", 0, 0, SUMMARY),
    links.Param("ans", "", parse_answers, "comma-separated answers: a choice's index or a number per question"),
    links.float_param("a", 0.8, 0.0, 0.99),
    links.float_param("c", 0.05, 0.0, 1.0),
    links.int_param("B", 8, 1, 4096),
    links.int_param("K", 4, 0, 16),
    links.int_param("Kt", 3, 1, 16),
]


def answers() -> dict[str, str | float]:
    return iv.decode_answers(st.session_state[S + "ans"])


def go(step: int) -> None:
    st.session_state[S + "step"] = max(0, min(SUMMARY, step))


def commit(key: str) -> None:
    """The Check button: commit the answer in the input (nothing when it is empty)."""
    value = st.session_state.get(S + "in." + key)
    if value is None:
        st.session_state[S + "empty"] = key
        return
    st.session_state.pop(S + "empty", None)
    done = answers()
    done[key] = value
    st.session_state[S + "ans"] = iv.encode_answers(done)


def restart() -> None:
    st.session_state[S + "ans"] = ""
    st.session_state[S + "step"] = 0
    for q in QUESTIONS:
        st.session_state.pop(S + "in." + q.key, None)


def speedup_explorer() -> None:
    c1, c2 = st.columns([1, 2], gap="large")
    with c1:
        a = st.slider("acceptance rate a", 0.0, 0.99, step=0.01, key=S + "a")
        c = st.slider("drafter cost c (one drafter step / one target pass)", 0.0, 1.0, step=0.01, key=S + "c")
        speedups = [iv.speedup(a, k, c) for k in K_RANGE]
        best = iv.best_K(a, c, max(K_RANGE))
        st.metric("best K", f"{best}", f"×{iv.speedup(a, best, c):.3f}", delta_color="off", delta_arrow="off")
        st.metric("speedup at K = 1: (1 + a)/(1 + c)", f"×{iv.speedup(a, 1, c):.3f}",
                  "a > c: faster" if a > c else "a ≤ c: not faster", delta_color="off", delta_arrow="off")  # fmt: skip
    with c2:
        fig = figures.speedup_curve(list(K_RANGE), speedups, best)
        st.plotly_chart(presenter.chart(fig, st.session_state), key=S + "speedup_chart")


def roofline_widget() -> None:
    c1, c2 = st.columns([1, 2], gap="large")
    with c1:
        B = st.slider("batch size B", 1, 4096, key=S + "B")
        K = st.slider("drafts K", 0, 16, key=S + "K")
        tokens = B * (K + 1)
        st.metric("verification cost (decode steps of this batch)", f"{iv.verify_cost(B, K):.2f}")
        ridge = iv.EXAMPLE_PEAK_FLOPS / iv.EXAMPLE_BANDWIDTH
        st.caption(
            f"{tokens:,} tokens in the pass; the ridge is at {ridge:.0f} tokens "
            f"({iv.EXAMPLE_PEAK_FLOPS / 1e12:.0f} TFLOP/s over {iv.EXAMPLE_BANDWIDTH / 1e12:.2f} TB/s). "
            f"Chart: a {EXAMPLE_PARAMS / 1e9:.0f}-billion-parameter model in 16-bit weights (the cost ratio does "
            "not depend on the size)."
        )
    with c2:
        grid = np.unique(np.concatenate([np.geomspace(1, 2**16, 200).round(), [tokens]]))
        roof = iv.roofline(EXAMPLE_PARAMS, grid)
        fig = figures.roofline_chart(roof.tokens, roof.seconds, roof.ridge_tokens, float(tokens))
        st.plotly_chart(presenter.chart(fig, st.session_state), key=S + "roofline_chart")


def tokens_widget() -> None:
    a = theory.acceptance_rate(iv.REFERENCE_P, iv.UNIFORM_Q)
    K = st.slider("drafts K", 1, 16, key=S + "Kt")
    m = st.columns(3)
    m[0].metric(f"tokens per target pass, a = {a:.2f}", f"{theory.expected_tokens(a, K):.4f}")
    m[1].metric("accepted drafts alone", f"{iv.accepted_drafts(a, K):.4f}")
    m[2].metric("limit as K grows: 1/(1 − a)", f"{1 / (1 - a):.4f}")


def one_position_figure(key: str) -> None:
    p, q = iv.REFERENCE_P, iv.UNIFORM_Q
    if key == "typical":
        law = iv.typical_acceptance_law(p, q, 0.3, 0.6)
        fig = figures.law_comparison(p, law, law_name="typical acceptance, exact")
    else:
        fig = figures.decomposition_bar(p, q)
    st.plotly_chart(presenter.chart(fig, st.session_state), key=S + "fig." + key)


WIDGETS = {
    "acceptance": one_position_figure,
    "residual": one_position_figure,
    "tokens": lambda key: tokens_widget(),
    "speedup": lambda key: speedup_explorer(),
    "best_k": lambda key: speedup_explorer(),
    "roofline": lambda key: roofline_widget(),
    "typical": one_position_figure,
}

link_notes = links.init_state(st.query_params.to_dict(), st.session_state, PARAMS, S)

st.title("Interview walkthrough")
st.caption(
    "The questions reviewers ask about speculative sampling, one at a time: commit an answer, then check it. Every "
    "answer and every number in the explanations is computed by specviz, not typed in."
)
for note in link_notes:
    st.warning(note, icon=":material/link:")

step = int(st.session_state[S + "step"])
done = answers()
right = iv.results(done)
st.progress(len(done) / SUMMARY, text=f"{len(done)} of {SUMMARY} answered, {sum(right.values())} right")

if step < SUMMARY:
    q = QUESTIONS[step]
    st.subheader(f"{step + 1}. {q.title}")
    st.markdown(links.plain(q.prompt))
    in_key = S + "in." + q.key
    if in_key not in st.session_state:
        st.session_state[in_key] = done.get(q.key)
    if q.kind == "choice":
        st.radio("Your answer", q.choices, key=in_key)
    else:
        st.number_input("Your answer", format="%.4f", key=in_key, placeholder="a number")
    st.button("Check", type="primary", key=S + "check", on_click=commit, args=(q.key,))
    if st.session_state.get(S + "empty") == q.key:
        st.warning("Choose or type an answer first.", icon=":material/edit:")
    if q.key in done:
        given = done[q.key]
        shown = given if isinstance(given, str) else f"{given:g}"
        correct = q.answer if isinstance(q.answer, str) else f"{q.answer:.4g}"
        if right[q.key]:
            st.success(f"Right: {links.plain(shown)}.", icon=":material/check_circle:")
        else:
            tol = f" (within ±{q.tolerance:g})" if q.kind == "number" and q.tolerance else ""
            st.error(f"Not quite: you said {links.plain(shown)}; the answer is {links.plain(correct)}{tol}.",
                     icon=":material/cancel:")  # fmt: skip
        st.markdown(links.plain(q.reveal))
        if q.key in WIDGETS:
            WIDGETS[q.key](q.key)
    nav = st.columns(3)
    nav[0].button("← Previous", key=S + "prev", on_click=go, args=(step - 1,), disabled=step == 0)
    nav[1].button("Next →", key=S + "next", on_click=go, args=(step + 1,))
    nav[2].button("Go to the summary", key=S + "to_summary", on_click=go, args=(SUMMARY,))
else:
    st.subheader("Summary")
    for i, q in enumerate(QUESTIONS):
        mark = "✅ right" if right.get(q.key) else "❌ wrong" if q.key in right else "— not answered"
        st.markdown(f"{i + 1}. **{links.plain(q.title)}**: {mark}")
    st.metric("right", f"{sum(right.values())} of {SUMMARY}")
    st.download_button(
        "Download the cheat sheet (Markdown)",
        iv.cheat_sheet(right),
        file_name="specviz-cheat-sheet.md",
        mime="text/markdown",
        key=S + "cheat_sheet",
    )
    c = st.columns(2)
    c[0].button("← Back to the questions", key=S + "back", on_click=go, args=(SUMMARY - 1,))
    c[1].button("Start again", key=S + "restart", on_click=restart)

# Not read above, but kept in the link with the page's other settings.
shown = {name: st.session_state[S + name] for name in ("step", "ans", "a", "c", "B", "K", "Kt")}
links.show_in_link(st.query_params, st.session_state, shown, PARAMS, S)
