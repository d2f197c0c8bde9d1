"""Interview walkthrough: one question at a time, commit an answer, then the derivation and a live widget."""

from __future__ import annotations

import numpy as np
import streamlit as st

from specviz.app import figures, links, position, presenter, tree_shapes
from specviz.app import interview as iv
from specviz.app import interview_topics as topics
from specviz.proof import block_trace, court, theory
from specviz.verifiers import tree

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
    links.int_param("Kr", 3, 1, 8),
    links.int_param("L", iv.KV_EXAMPLE[0], 1, 256),
    links.int_param("Kv", iv.KV_EXAMPLE[1], 1, 16),
    links.int_param("j", iv.KV_EXAMPLE[2], 0, 16),
    links.int_param("pg", iv.KV_EXAMPLE[3], 1, 64),
    links.int_param("k", iv.TREE_EXAMPLE[0], 1, 4),
    links.int_param("d", iv.TREE_EXAMPLE[1], 1, 4),
    links.int_param("bs", 0, 0, 2**32 - 1),
    links.float_param("T", topics.SETTINGS_REQUEST.temperature, 0.05, 2.0),
    links.float_param("tp", topics.SETTINGS_REQUEST.top_p, 0.05, 1.0),
    links.choice_param("up", topics.unclamped().preset, position.PRESETS),
    links.int_param("nd", iv.RAGGED_EXAMPLE[0], 0, iv.RAGGED_EXAMPLE[1]),
]
SHOWN = ("step", "ans", "a", "c", "B", "K", "Kt", *(p.name for p in PARAMS[7:]))  # every setting, in the link


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


def first_rejection_widget() -> None:
    p, q = iv.REFERENCE_P, iv.UNIFORM_Q
    c1, c2 = st.columns([1, 2], gap="large")
    with c1:
        K = st.slider("drafts K", 1, 8, key=S + "Kr")
        st.metric("TV from p when passing drafts after a rejection count", f"{topics.count_after_rejection_tv(K):.4f}")
        st.caption("At K = 1 no draft comes after the first: nothing to count, nothing wrong.")
    with c2:
        law = theory.position_law(p, q, "count_after_rejection", K=K)
        fig = figures.law_comparison(p, law, law_name="count_after_rejection, exact")
        st.plotly_chart(presenter.chart(fig, st.session_state), key=S + "first_rejection_chart")


def kv_widget() -> None:
    c1, c2 = st.columns([1, 1], gap="large")
    with c1:
        L = st.slider("context L", 1, 256, key=S + "L")
        K = st.slider("drafts K", 1, 16, key=S + "Kv")
        if st.session_state[S + "j"] > K:
            st.session_state[S + "j"] = K
        j = st.slider("accepted j", 0, K, key=S + "j")
        page = st.slider("page size (positions)", 1, 64, key=S + "pg")
    r = topics.kv_rollback(L, K, j, page)
    with c2:
        m = st.columns(2)
        m[0].metric("target keeps (positions)", f"{r.target_kept}", f"−{r.target_dropped} dropped", delta_color="off",
                     delta_arrow="off")  # fmt: skip
        m[1].metric("pages freed", f"{r.pages_freed}", f"{r.pages_kept} of {r.pages_held} kept", delta_color="off",
                     delta_arrow="off")  # fmt: skip
        m[0].metric("drafter keeps", f"{r.drafter_kept}", f"of {r.drafter_written} fed", delta_color="off",
                     delta_arrow="off")  # fmt: skip
        m[1].metric("the drafter feeds next round", f"{r.next_drafter_feed} token(s)")
        st.caption(f"The target fed L + K = {r.target_written} positions; the token this round emits is in no cache "
                   "until the next pass feeds it.")  # fmt: skip


def trees_widget() -> None:
    c1, c2 = st.columns([1, 2], gap="large")
    with c1:
        k = st.slider("candidates per node k", 1, 4, key=S + "k")
        depth = st.slider("depth K", 1, 4, key=S + "d")
    sh = topics.tree_shapes(k, depth)
    with c2:
        m = st.columns(3)
        m[0].metric("a node accepts one of k (recursive residual)", f"{sh.node_acceptance:.4f}")
        m[1].metric(f"{tree_shapes.chains_name(k)}: drafts kept", f"{sh.chains:.4f}")
        m[2].metric(f"{tree_shapes.kary_name(k)}: drafts kept", f"{sh.kary:.4f}")
    shapes = st.columns(2, gap="large")
    for col, par, name in ((shapes[0], tree.multi_draft_parents(k, depth), tree_shapes.chains_name(k)),
                           (shapes[1], tree.kary_parents(k, depth), tree_shapes.kary_name(k))):  # fmt: skip
        col.plotly_chart(presenter.chart(tree_shapes.shape_figure(par, name), st.session_state),
                         key=S + "shape." + name)  # fmt: skip


def block_widget() -> None:
    toy = topics.block_toy()
    c = st.columns(3)
    seed = c[0].number_input("seed of one block verification", 0, 2**32 - 1, step=1, key=S + "bs")
    c[1].metric("token verification: drafts kept per step", f"{toy.token:.4f}")
    c[2].metric("block verification: drafts kept per step", f"{toy.block:.4f}")
    trace = block_trace.seeded_block_trace(court.TOY_P, court.TOY_Q, toy.K, int(seed))
    st.plotly_chart(presenter.chart(figures.block_steps(trace), st.session_state), key=S + "block_chart")


def settings_widget() -> None:
    p_raw, q = np.array(iv.REFERENCE_P), np.array(iv.UNIFORM_Q)
    c1, c2 = st.columns([1, 2], gap="large")
    with c1:
        T = st.slider("request temperature", 0.05, 2.0, step=0.05, key=S + "T")
        top_p = st.slider("request top-p", 0.05, 1.0, step=0.05, key=S + "tp")
        p, tv = topics.request_target(T, top_p)  # the question's text reads the same function
        st.metric("acceptance against the processed p", f"{theory.acceptance_rate(p, q):.4f}")
        st.metric("TV(raw p, processed p): what the raw target gets wrong", f"{tv:.4f}")
    with c2:
        fig = figures.settings_bars(p_raw, p, q, q, (p == 0) & (p_raw > 0), np.zeros(q.size, bool))
        st.plotly_chart(presenter.chart(fig, st.session_state), key=S + "settings_chart")


def unclamped_widget() -> None:
    c1, c2 = st.columns([1, 2], gap="large")
    with c1:
        name = st.selectbox("p and q", position.PRESETS, key=S + "up")
        p, q = position.preset(name)
        law = theory.position_law(p, q, "unclamped_residual")
        st.metric("TV from p, unclamped residual (K = 1)", f"{theory.total_variation(law, p):.4f}")
    with c2:
        fig = figures.law_comparison(p, law, law_name="unclamped residual, exact")
        st.plotly_chart(presenter.chart(fig, st.session_state), key=S + "unclamped_chart")


def ragged_widget() -> None:
    K = iv.RAGGED_EXAMPLE[1]
    nd = st.slider(f"num_draft[b] (padded to K = {K}), every draft accepted", 0, K, key=S + "nd")
    rb = topics.ragged_bonus(nd, K)
    m = st.columns(2)
    m[0].metric("bonus from specviz.verify (token = row)", f"{rb.rule}")
    m[1].metric("bonus from wrong_bonus_row", f"{rb.mistake}")


WIDGETS = {
    "first_rejection": lambda key: first_rejection_widget(),
    "kv_rollback": lambda key: kv_widget(),
    "trees": lambda key: trees_widget(),
    "block": lambda key: block_widget(),
    "settings": lambda key: settings_widget(),
    "unclamped": lambda key: unclamped_widget(),
    "ragged": lambda key: ragged_widget(),
    "acceptance": one_position_figure,
    "residual": one_position_figure,
    "tokens": lambda key: tokens_widget(),
    "speedup": lambda key: speedup_explorer(),
    "best_k": lambda key: speedup_explorer(),
    "roofline": lambda key: roofline_widget(),
    "typical": one_position_figure,
}

link = links.open_page(st, PARAMS, S)

st.title("Interview walkthrough")
st.caption(
    "The questions reviewers ask about speculative sampling, one at a time: commit an answer, then check it. Every "
    "answer and every number in the explanations is computed by specviz, not typed in."
)
link.show_notes()

step = int(st.session_state[S + "step"])
done = answers()
right = iv.results(done)
progress_text = f"{len(done)} of {SUMMARY} answered, {sum(right.values())} right"

if step < SUMMARY:
    q = QUESTIONS[step]
    st.subheader(f"{step + 1}. {q.title}")
    st.markdown(links.plain(q.prompt))
    in_key = S + "in." + q.key
    if in_key not in st.session_state:
        st.session_state[in_key] = done.get(q.key)
    # The answer and Check side by side, the progress under them: on a 1280 x 720 projector at 150 % zoom,
    # Check stacked under a progress bar and the answer was below the fold.
    answer_col, check_col = st.columns([2, 1], vertical_alignment="bottom")
    with answer_col:
        if q.kind == "choice":
            st.radio("Your answer", q.choices, key=in_key, horizontal=True)
        else:
            st.number_input("Your answer", format="%.4f", key=in_key, placeholder="a number")
    check_col.button("Check", type="primary", key=S + "check", on_click=commit, args=(q.key,))
    st.progress(len(done) / SUMMARY, text=progress_text)
    if st.session_state.get(S + "empty") == q.key:
        st.warning("Choose or type an answer first.", icon=":material/edit:")
    if q.key in done:
        was_right, said = iv.feedback(q, done[q.key])
        box, icon = (st.success, ":material/check_circle:") if was_right else (st.error, ":material/cancel:")
        box(said, icon=icon)
        st.markdown(links.plain(q.reveal))
        if q.key in WIDGETS:
            WIDGETS[q.key](q.key)
    nav = st.columns(3)
    nav[0].button("← Previous", key=S + "prev", on_click=go, args=(step - 1,), disabled=step == 0)
    nav[1].button("Next →", key=S + "next", on_click=go, args=(step + 1,))
    nav[2].button("Go to the summary", key=S + "to_summary", on_click=go, args=(SUMMARY,))
else:
    st.progress(len(done) / SUMMARY, text=progress_text)
    st.subheader("Summary")
    for i, (title, mark) in enumerate(iv.summary_marks(right)):
        st.markdown(f"{i + 1}. **{links.plain(title)}**: {mark}")
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
shown = {name: st.session_state[S + name] for name in SHOWN}
link.show_in_link(shown)
