"""Interview walkthrough: one question at a time, commit an answer, then the derivation and a live widget."""

from __future__ import annotations

import streamlit as st

from specviz.app import interview as iv
from specviz.app import interview_widgets as w
from specviz.app import links, position
from specviz.app.presenter import metrics, plot

S = "interview."
QUESTIONS = iv.questions()
SUMMARY = len(QUESTIONS)  # the step after the last question
PARAMS = w.link_params(SUMMARY)


def go(step: int) -> None:
    st.session_state[S + "step"] = max(0, min(SUMMARY, step))


def commit(key: str) -> None:
    """The Check button: commit the answer in the input (nothing when it is empty)."""
    value = st.session_state.get(S + "in." + key)
    if value is None:
        st.session_state[S + "empty"] = key
        return
    st.session_state.pop(S + "empty", None)
    st.session_state[S + "ans"] = iv.encode_answers({**iv.decode_answers(st.session_state[S + "ans"]), key: value})


def restart() -> None:
    st.session_state.update({S + "ans": "", S + "step": 0})
    for q in QUESTIONS:
        st.session_state.pop(S + "in." + q.key, None)


def show(view: w.View, metric_columns, text=st, charts=st) -> None:
    """The view's metrics in ``metric_columns`` in turn, its caption in ``text``, its charts in ``charts``."""
    metrics(metric_columns, view.metrics)
    if view.caption:
        text.caption(view.caption)
    for name, fig in view.charts.items():
        plot(st, fig, S + name, charts)


def slider(where, label: str, low, high, name: str, step=None):
    return where.slider(label, low, high, step=step, key=S + name)


SIDE = {  # the widgets laid out as controls, metrics and caption beside a chart, each reading its controls
    "speedup": lambda c: w.speedup(slider(c, "acceptance rate a", 0.0, 0.99, "a", 0.01),
                                   slider(c, "drafter cost c (one drafter step / one target pass)", 0.0, 1.0, "c",
                                          0.01)),  # fmt: skip
    "roofline": lambda c: w.roofline(slider(c, "batch size B", 1, 4096, "B"), slider(c, "drafts K", 0, 16, "K")),
    "first_rejection": lambda c: w.first_rejection(slider(c, "drafts K", 1, 8, "Kr")),
    "settings": lambda c: w.settings(slider(c, "request temperature", 0.05, 2.0, "T", 0.05),
                                     slider(c, "request top-p", 0.05, 1.0, "tp", 0.05)),  # fmt: skip
    "unclamped": lambda c: w.unclamped(c.selectbox("p and q", position.PRESETS, key=S + "up")),
}
SIDE["best_k"] = SIDE["speedup"]


def live_widget(key: str) -> None:
    """The reveal's live widget: its controls, then what specviz computes for them."""
    if key in SIDE:
        c1, c2 = st.columns([1, 2], gap="large")
        show(SIDE[key](c1), [c1], c1, c2)
    elif key in ("acceptance", "residual", "typical"):
        show(w.one_position(key), [])
    elif key == "tokens":
        show(w.tokens(slider(st, "drafts K", 1, 16, "Kt")), st.columns(3))
    elif key == "kv_rollback":
        c1, c2 = st.columns([1, 1], gap="large")
        L, K = slider(c1, "context L", 1, 256, "L"), slider(c1, "drafts K", 1, 16, "Kv")
        if st.session_state[S + "j"] > K:
            st.session_state[S + "j"] = K
        j = slider(c1, "accepted j", 0, K, "j")
        show(w.kv_rollback(L, K, j, slider(c1, "page size (positions)", 1, 64, "pg")), c2.columns(2), c2)
    elif key == "trees":
        c1, c2 = st.columns([1, 2], gap="large")
        view = w.trees(slider(c1, "candidates per node k", 1, 4, "k"), slider(c1, "depth K", 1, 4, "d"))
        metrics(c2.columns(3), view.metrics)
        for col, (name, fig) in zip(st.columns(2, gap="large"), view.charts.items(), strict=True):
            plot(st, fig, S + name, col)
    elif key == "block":
        c = st.columns(3)
        show(w.block(c[0].number_input("seed of one block verification", 0, 2**32 - 1, step=1, key=S + "bs")), c[1:])
    elif key == "ragged":
        K = iv.RAGGED_EXAMPLE[1]
        nd = slider(st, f"num_draft[b] (padded to K = {K}), every draft accepted", 0, K, "nd")
        show(w.ragged(nd), st.columns(2))


link = links.open_page(st, PARAMS, S)

st.title("Interview walkthrough")
st.caption(
    "The questions reviewers ask about speculative sampling, one at a time: commit an answer, then check it. Every "
    "answer and every number in the explanations is computed by specviz, not typed in."
)
link.show_notes()

step = int(st.session_state[S + "step"])
done = iv.decode_answers(st.session_state[S + "ans"])
right = iv.results(done)
progress_text = f"{len(done)} of {SUMMARY} answered, {sum(right.values())} right"

if step < SUMMARY:
    q = QUESTIONS[step]
    st.subheader(f"{step + 1}. {q.title}")
    st.markdown(links.plain(q.prompt))
    in_key = S + "in." + q.key
    st.session_state.setdefault(in_key, done.get(q.key))
    # The answer and Check side by side, the progress under them: on a 1280 x 720 projector at 150 % zoom,
    # Check stacked under a progress bar and the answer was below the fold.
    answer_col, check_col = st.columns([2, 1], vertical_alignment="bottom")
    if q.kind == "choice":
        answer_col.radio("Your answer", q.choices, key=in_key, horizontal=True)
    else:
        answer_col.number_input("Your answer", format="%.4f", key=in_key, placeholder="a number")
    check_col.button("Check", type="primary", key=S + "check", on_click=commit, args=(q.key,))
    st.progress(len(done) / SUMMARY, text=progress_text)
    if st.session_state.get(S + "empty") == q.key:
        st.warning("Choose or type an answer first.", icon=":material/edit:")
    if q.key in done:
        was_right, said = iv.feedback(q, done[q.key])
        box, icon = (st.success, ":material/check_circle:") if was_right else (st.error, ":material/cancel:")
        box(said, icon=icon)
        st.markdown(links.plain(q.reveal))
        live_widget(q.key)
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
    st.download_button("Download the cheat sheet (Markdown)", iv.cheat_sheet(right), file_name="specviz-cheat-sheet.md",
                       mime="text/markdown", key=S + "cheat_sheet")  # fmt: skip
    c = st.columns(2)
    c[0].button("← Back to the questions", key=S + "back", on_click=go, args=(SUMMARY - 1,))
    c[1].button("Start again", key=S + "restart", on_click=restart)

# Every setting in the link, the widgets' too: not read above, but kept with the page's other settings.
link.show_in_link({p.name: st.session_state[S + p.name] for p in PARAMS})
