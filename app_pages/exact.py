"""Why it is exact: one position, your own p and q, the decomposition, the bugs, sampling."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from specviz.app import figures, limits, links, position, presenter
from specviz.app import why_exact as wx
from specviz.proof import theory
from specviz.proof.bugs import BUGS

S = "exact."  # session-state prefix of this page
STATE = (st.session_state, S)  # what the callbacks change (specviz.app.why_exact)
link = links.open_page(st, wx.PARAMS, S)
st.session_state.setdefault(S + "table_version", 0)

st.title("Why it is exact")
st.caption(
    "One position: target p, draft q. A draft x is accepted with probability min(1, p(x)/q(x)); after a rejection "
    "one token is drawn from the residual max(0, p − q), normalized. Edit p and q, break the rule, sample it."
)
link.show_notes()

# --- p and q ---------------------------------------------------------------------------------------
left, right = st.columns([2, 3], gap="large")
with left:
    st.subheader("Your p and q")
    preset_slot = st.container()  # filled below, once the table says which preset (if any) it holds
    edited = st.data_editor(
        pd.DataFrame(wx.padded(st.session_state[S + "p"], st.session_state[S + "q"]), dtype="float64").rename_axis(
            "token"),
        key=f"{S}table{st.session_state[S + 'table_version']}",
        num_rows="dynamic",
        hide_index=False,  # the token numbers: the class reads "token 2" off the chart and finds its row here
        column_config={
            "_index": st.column_config.NumberColumn("token", help="token id: the chart's token 0, 1, ...",
                                                    disabled=True),  # fmt: skip
            "p": st.column_config.NumberColumn("p (target)", format="%.4f", help="target probability of this token"),
            "q": st.column_config.NumberColumn("q (draft)", format="%.4f", help="draft probability of this token"),
        },
    )
    typed_p, typed_q = edited["p"].tolist(), edited["q"].tolist()
    st.caption(f"Add or delete rows to change the vocabulary (at most {limits.MAX_TABLE_V} tokens).")
    # The selector shows the preset the table holds now: a loaded one, or none once the table is edited.
    st.session_state[S + "preset"] = position.matching_preset(typed_p, typed_q, int(st.session_state[S + "seed"]))
    preset = preset_slot.selectbox("Preset", position.PRESETS, key=S + "preset", on_change=wx.load_preset, args=STATE,
                                   placeholder="your own table (no preset): choose one to replace it")  # fmt: skip
    if preset is not None:  # the name alone fits the box on a projector; what it holds is said here
        preset_slot.caption(position.PRESET_HELP[preset].capitalize() + ".")
    with st.expander("Type p and q as text"):
        st.text_input("p", key=S + "p_text", placeholder="e.g. 1/2, 30%, 0.15, 5e-2", max_chars=limits.MAX_TYPED_CHARS)
        st.text_input("q", key=S + "q_text", placeholder="e.g. 0.25 0.25 0.25 0.25 (leave empty to keep q)",
                      max_chars=limits.MAX_TYPED_CHARS)  # fmt: skip
        st.button("Use these", key=S + "use_text", on_click=wx.load_text, args=STATE)
        st.caption("Commas, semicolons or spaces between numbers; fractions (1/4), percents (25%), 1e-3.")
        presenter.say(st, st.session_state.pop(S + "text_result", []))
    table = wx.read_table(typed_p, typed_q)
    presenter.say(st, table.messages)
    seed = st.number_input("Seed", min_value=0, max_value=2**32 - 1, step=1, key=S + "seed")

ok = len(table.dists) == 2
p, q = (table.dists["p"].probs, table.dists["q"].probs) if ok else (None, None)

# --- the decomposition -----------------------------------------------------------------------------
with right:
    st.subheader("min(p, q) + (1 − a)·residual = p")
    if not ok:
        st.info("The figures appear once p and q are valid distributions.")
    else:
        d = wx.decomposition(p, q)
        presenter.metrics(st.columns(3), d.metrics)
        presenter.plot(st, figures.decomposition_bar(p, q), S + "decomposition")
        st.dataframe(pd.DataFrame({name: v for name, (v, _) in d.columns.items()}).rename_axis("token"),
                     column_config={name: st.column_config.NumberColumn(format="%.4f", help=h)
                                    for name, (_, h) in d.columns.items()})  # fmt: skip
        st.caption(d.caption)

# --- break it --------------------------------------------------------------------------------------
st.divider()
st.subheader("Break it: the exact law of each mistake")
b1, b2 = st.columns([1, 2], gap="large")
with b1:
    bug = st.selectbox("Bug", wx.BUG_CHOICES, key=S + "bug", help="one step of the rule swapped for a classic mistake")
    K = st.slider("Drafts per row K", 1, limits.MAX_POSITION_K, key=S + "K", help="matters for count_after_rejection")
    mistake = None if bug == wx.NO_BUG else bug
    where = None if mistake is None else position.show_me(bug)
    if mistake is None:
        st.caption("The correct rule: its law is p, whatever p and q are.")
    else:
        st.markdown(f"**{BUGS[bug].title}.** {BUGS[bug].explanation}")
        st.caption(f"Caught by: {BUGS[bug].caught_by}.")
        if where is None:
            st.info(wx.no_position_effect(bug), icon=":material/bug_report:")
            st.page_link("app_pages/bug_lab.py", label=f"Open the Bug lab with {bug}", query_params={"bug": bug})
        else:
            st.button(wx.show_me_label(where), key=S + "show_me", on_click=wx.show_me, args=(*STATE, where),
                      help="the preset and draft count where this bug moves the law furthest from p")  # fmt: skip

drawn = st.session_state[S + "drawn"]  # replaced by what is sampled below, once p and q are read

with b2:
    if not ok:
        st.info("Fix p and q above to see the output law.")
    else:
        law = theory.position_law(p, q, mistake, K=K)
        state, replay = wx.replayed(st.session_state, S + "samples", (tuple(p), tuple(q), bug, K, seed), len(p), drawn,
                                    link.from_link)  # fmt: skip
        if (error := state.draw(p, q, replay, K, mistake, seed)) is not None:  # a link replays its samples
            st.error(links.error_text(error))

        m1, m2 = st.columns(2)
        if law is None:
            m1.metric("TV(output law, p)", "no single-position law")
            st.info(wx.no_law_text(bug))
        else:
            tv = theory.total_variation(law, p)
            m1.metric("TV(output law, p)", f"{tv:.6f}", help="exact, from theory")
            if mistake is not None and tv <= position.SHOWN_TV and where is not None:
                st.warning(wx.hidden_text(bug, where), icon=":material/visibility_off:")
                # right under the warning that names it (the one beside the bug's explanation is far)
                st.button(wx.show_me_label(where), key=S + "show_me_here", on_click=wx.show_me, args=(*STATE, where))

        buttons = st.columns(len(wx.SAMPLE_SIZES) + 1)
        for col, n in zip(buttons, wx.SAMPLE_SIZES, strict=False):
            why = wx.full_help(state)
            clicked = col.button(f"Sample x{n:,}", key=f"{S}sample{n}", disabled=why is not None, help=why)
            if clicked and (error := state.draw(p, q, [n], K, mistake, seed)) is not None:
                st.error(links.error_text(error))
        if buttons[-1].button("Reset samples", key=S + "reset"):
            state.reset()
        drawn = state.sizes

        presenter.metrics([m2], wx.sampled_tv(state, p, law))
        presenter.plot(st, wx.law_figure(p, law, state, bug), S + "law")
        if (said := wx.samples_caption(state.total)) is not None:
            st.caption(said)
        if state.trace:
            st.markdown("**The last single verification, traced** (accepted iff u < p/q):")
            # A table that wraps: in this half-width column a grid cut "bonus (every draft accepted)" off.
            st.table(pd.DataFrame(wx.shown_trace(state.trace)).style.format(precision=4), hide_index=True)

# The table as typed, typos included, and the samples drawn (nothing sampled: no ?drawn= in the link).
link.show_in_link({"p": typed_p, "q": typed_q, "bug": bug, "K": K, "seed": seed} | ({"drawn": drawn} if drawn else {}))

# --- the derivation --------------------------------------------------------------------------------
st.divider()
st.subheader("The derivation")
for kind, line in wx.DERIVATION:
    (st.latex if kind == "tex" else st.markdown)(line)
