"""Why it is exact: one position, your own p and q, the decomposition, the bugs, sampling."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from specviz import InputError
from specviz.app import figures, limits, links, position, presenter
from specviz.proof import theory
from specviz.proof.bugs import BUGS

S = "exact."  # session-state prefix of this page
NONE = "none"
PARAMS = [
    links.floats_param("p", position.REFERENCE_P),
    links.floats_param("q", [0.25] * 4),
    links.choice_param("bug", NONE, [NONE, *BUGS]),
    links.int_param("K", 1, 1, limits.MAX_POSITION_K),
    links.int_param("seed", 0, 0, 2**32 - 1),
]
SAMPLE_SIZES = (1, 1_000, 100_000)
MAX_CLICKS = 50  # sample clicks a link replays (each drawn again from its own seed); then Reset
PARAMS.append(links.int_list_param("drawn", SAMPLE_SIZES, MAX_CLICKS))  # the samples shown: the link replays them

link = links.open_page(st, PARAMS, S)
st.session_state.setdefault(S + "table_version", 0)


def load_preset() -> None:
    name = st.session_state[S + "preset"]
    if name is None:
        return
    st.session_state[S + "p"], st.session_state[S + "q"] = position.preset(name, int(st.session_state[S + "seed"]))
    st.session_state[S + "table_version"] += 1  # a fresh editor: the preset replaces any edits


def load_text() -> None:
    """Read the typed p and q texts (either may be left empty) into the table, or say what is wrong."""
    read = position.read_texts({name: st.session_state.get(f"{S}{name}_text", "") for name in ("p", "q")})
    st.session_state.update({S + name: values for name, values in read.values.items()})
    if read.values:
        st.session_state[S + "table_version"] += 1  # a fresh editor showing what was read
    notes = [f"{name}: {links.plain(said)}" for name, said in read.notes.items()]  # echo what was typed: as text
    errors = [links.error_text(e) for e in read.errors]
    st.session_state[S + "text_result"] = (notes, errors)


def show_me(where: position.ShowMe) -> None:
    """Load the setting where the selected bug shows: a preset and a draft count."""
    st.session_state[S + "p"], st.session_state[S + "q"] = position.preset(where.preset, position.SHOW_ME_SEED)
    st.session_state[S + "K"] = where.K
    st.session_state[S + "seed"] = position.SHOW_ME_SEED
    st.session_state[S + "table_version"] += 1


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
    raw_p, raw_q = list(st.session_state[S + "p"]), list(st.session_state[S + "q"])
    width = max(len(raw_p), len(raw_q))
    base = pd.DataFrame(
        {"p": raw_p + [np.nan] * (width - len(raw_p)), "q": raw_q + [np.nan] * (width - len(raw_q))},
        dtype="float64",
    ).rename_axis("token")
    edited = st.data_editor(
        base,
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
    with preset_slot:
        st.selectbox(
            "Preset",
            position.PRESETS,
            key=S + "preset",
            placeholder="your own table (no preset): choose one to replace it",
            on_change=load_preset,  # the name alone fits the box on a projector; what it holds is said below
        )
        if st.session_state[S + "preset"] is not None:
            st.caption(position.PRESET_HELP[st.session_state[S + "preset"]].capitalize() + ".")
    with st.expander("Type p and q as text"):
        st.text_input("p", key=S + "p_text", placeholder="e.g. 1/2, 30%, 0.15, 5e-2", max_chars=limits.MAX_TYPED_CHARS)
        st.text_input("q", key=S + "q_text", placeholder="e.g. 0.25 0.25 0.25 0.25 (leave empty to keep q)",
                      max_chars=limits.MAX_TYPED_CHARS)  # fmt: skip
        st.button("Use these", key=S + "use_text", on_click=load_text)
        st.caption("Commas, semicolons or spaces between numbers; fractions (1/4), percents (25%), 1e-3.")
        text_notes, text_errors = st.session_state.pop(S + "text_result", ([], []))
        for note in text_notes:
            st.success(note, icon=":material/check:")
        for err in text_errors:
            st.error(err, icon=":material/error:")
    dists = {}
    for name, typed in (("p", typed_p), ("q", typed_q)):
        try:
            dists[name] = position.parse_distribution(typed, name)
        except InputError as e:
            msg = f"{links.error_text(e)}. Fix the table: the rest of the page waits for a valid {name}."
            st.error(msg, icon=":material/error:")
            continue
        if dists[name].note:
            st.info(
                dists[name].note.capitalize() + ": every number below uses the divided values.",
                icon=":material/functions:",
            )

    seed = st.number_input("Seed", min_value=0, max_value=2**32 - 1, step=1, key=S + "seed")

ok = len(dists) == 2
p = dists["p"].probs if ok else None
q = dists["q"].probs if ok else None

# --- the decomposition -----------------------------------------------------------------------------
with right:
    st.subheader("min(p, q) + (1 − a)·residual = p")
    if not ok:
        st.info("The figures appear once p and q are valid distributions.")
    else:
        d = theory.decompose(p, q)
        c1, c2, c3 = st.columns(3)
        c1.metric("acceptance rate a", f"{d.acceptance_rate:.4f}", help="a = Σ min(p, q)")
        c2.metric("TV(p, q) = 1 − a", f"{d.total_variation:.4f}", help="total variation distance between p and q")
        c3.metric("largest |output − p|", f"{d.max_abs_error:.2e}", help="min(p, q) + (1 − a)·residual against p")
        st.plotly_chart(presenter.chart(figures.decomposition_bar(p, q), st.session_state), key=S + "decomposition")
        columns = {
            "p": (p, "target probability"),
            "q": (q, "draft probability"),
            "min(p,q)": (d.accepted, "emitted by acceptance"),
            "P(accept)": (d.accept_prob, "min(1, p/q): chance a drafted token is kept"),
            "residual r": (d.residual, "max(0, p − q) / (1 − a): the replacement law"),
            "(1−a)·r": (d.replaced, "emitted by replacement"),
        }
        st.dataframe(
            pd.DataFrame({name: v for name, (v, _) in columns.items()}).rename_axis("token"),
            column_config={
                name: st.column_config.NumberColumn(format="%.4f", help=h) for name, (_, h) in columns.items()
            },
        )
        same = position.residual_is_target(p, q)
        st.caption(
            "Accept probability 1 where q(x) = 0: such a token is never drafted. The residual is where q "
            "under-proposes. It is p itself exactly when q = a·p wherever p > 0, q's other 1 − a sitting on tokens p "
            "never produces (e.g. p = [.5, .5, 0], q = [.25, .25, .5] at a = 0.5), or when a = 1 and it is never "
            f"used. Here it {'is' if same.equal else 'is not'} p."
        )

# --- break it --------------------------------------------------------------------------------------
st.divider()
st.subheader("Break it: the exact law of each mistake")
b1, b2 = st.columns([1, 2], gap="large")
with b1:
    bug = st.selectbox("Bug", [NONE, *BUGS], key=S + "bug", help="one step of the rule swapped for a classic mistake")
    K = st.slider("Drafts per row K", 1, limits.MAX_POSITION_K, key=S + "K", help="matters for count_after_rejection")
    where = None
    if bug != NONE:
        info = BUGS[bug]
        st.markdown(f"**{info.title}.** {info.explanation}")
        st.caption(f"Caught by: {info.caught_by}.")
        where = position.show_me(bug)
        if where is None:
            st.info(
                f"{bug} never changes the law of the first token at one position: with every preset and every K "
                "here its TV from p is 0 (or it has no single-position law). Its effect shows end to end, in the "
                f"Bug lab: /bug-lab?bug={bug}",
                icon=":material/bug_report:",
            )
            st.page_link("app_pages/bug_lab.py", label=f"Open the Bug lab with {bug}", query_params={"bug": bug})
        else:
            st.button(
                f"Show me: load '{where.preset}' with K = {where.K} (TV {where.tv:.3f})",
                key=S + "show_me",
                on_click=show_me,
                args=(where,),
                help="the preset and draft count where this bug moves the law furthest from p",
            )
    else:
        st.caption("The correct rule: its law is p, whatever p and q are.")

shown_settings = {"p": typed_p, "q": typed_q, "bug": bug, "K": K, "seed": seed}  # the table as typed
shown_settings["drawn"] = st.session_state[S + "drawn"]  # replaced by what is sampled below, once p and q are read

with b2:
    if not ok:
        st.info("Fix p and q above to see the output law.")
    else:
        law = theory.position_law(p, q, None if bug == NONE else bug, K=K)
        samples_key = (tuple(p), tuple(q), bug, K, seed)
        state = st.session_state.get(S + "samples")
        drawn = shown_settings["drawn"]
        replay = link.from_link and (state is None or (state.key, state.sizes) != (samples_key, drawn))
        if state is None or state.key != samples_key or replay:
            state = st.session_state[S + "samples"] = position.Samples(samples_key, len(p))
        for n in drawn if replay else ():  # a link shows what was sampled, click by click
            try:
                draws = position.sample_position(p, q, n, K, None if bug == NONE else bug, [seed, state.clicks])
            except InputError as e:
                st.error(links.error_text(e))
                break
            state.add(draws, p, q)

        m1, m2 = st.columns(2)
        if law is None:
            m1.metric("TV(output law, p)", "no single-position law")
            st.info(
                f"**{bug}** has no single-position law: it reads the bonus from padded row K instead of row "
                "num_draft[b], which differs only when a row has fewer drafts than the padded width. Here every row "
                "has K drafts and every target row is p, so what you sample below is p. See it fail in the Bug lab, "
                "scenario 'ragged'."
            )
        else:
            tv = theory.total_variation(law, p)
            m1.metric("TV(output law, p)", f"{tv:.6f}", help="exact, from theory")
            if bug != NONE and tv <= position.SHOWN_TV and where is not None:
                st.warning(
                    f"With this p, q and K, {bug} leaves the first token's law at p (TV 0): nothing to see here. "
                    f"The button below loads a setting where it moves it by TV {where.tv:.3f}.",
                    icon=":material/visibility_off:",
                )
                st.button(  # right under the warning that names it (the one beside the bug's explanation is far)
                    f"Show me: load '{where.preset}' with K = {where.K} (TV {where.tv:.3f})",
                    key=S + "show_me_here",
                    on_click=show_me,
                    args=(where,),
                )

        buttons = st.columns(len(SAMPLE_SIZES) + 1)
        for col, n in zip(buttons, SAMPLE_SIZES, strict=False):
            full = state.clicks >= MAX_CLICKS
            why = f"{MAX_CLICKS} clicks, the most a link replays: Reset to sample again" if full else None
            if col.button(f"Sample x{n:,}", key=f"{S}sample{n}", disabled=full, help=why):
                try:
                    draws = position.sample_position(p, q, n, K, None if bug == NONE else bug, [seed, state.clicks])
                except InputError as e:
                    st.error(links.error_text(e))
                else:
                    state.add(draws, p, q)
        if buttons[-1].button("Reset samples", key=S + "reset"):
            state.reset()
        shown_settings["drawn"] = state.sizes

        total, freq = state.total, state.freq
        if total > 1:  # the TV of one sample from a law says nothing
            ref = p if law is None else law
            m2.metric(f"TV(sampled, exact), {total:,} rows", f"{theory.total_variation(freq, ref):.4f}")
        label = "exact law of the rule" if bug == NONE else f"exact law with {bug}"
        law_fig = figures.law_comparison(p, law, freq, n=total or None, law_name=label, single=state.single)
        st.plotly_chart(presenter.chart(law_fig, st.session_state), key=S + "law")
        if total == 1:
            st.caption(f"One sample is one token, marked with a star: sample {SAMPLE_SIZES[1]:,} to see a histogram.")
        elif total:
            st.caption("Error bars: ±2 standard errors of a frequency under the exact law, clipped to [0, 1].")
        if state.trace:
            st.markdown("**The last single verification, traced** (accepted iff u < p/q):")
            trace = pd.DataFrame(state.trace)
            # The drawn slot has no p/q test: a dash says so where a missing value would read "None".
            trace["p/q"] = [f"{v:.4f}" if v == v else "— (drawn, not tested)" for v in trace["p/q"]]
            # A table that wraps: in this half-width column a grid cut "bonus (every draft accepted)" off.
            st.table(trace.style.format(precision=4), hide_index=True)

if not shown_settings["drawn"]:  # nothing sampled: no ?drawn= in the link
    del shown_settings["drawn"]
link.show_in_link(shown_settings)  # the table as typed, typos included, and the samples drawn

# --- the derivation --------------------------------------------------------------------------------
st.divider()
st.subheader("The derivation")
for kind, line in position.DERIVATION:
    (st.latex if kind == "tex" else st.markdown)(line)
