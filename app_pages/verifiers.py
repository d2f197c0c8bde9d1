"""Verifiers side by side: every rule's exact distance from the target and its exact tokens per step."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from specviz import InputError
from specviz.app import certify as cv
from specviz.app import figures, lesson_figures, limits, links
from specviz.app.presenter import metrics, plot
from specviz.proof import block_trace, court, registry
from specviz.verifiers import tree

S = "verifiers."
TOY, PQ = cv.TOY, cv.PQ
Probs = tuple[float, ...]  # a typed p or q, as the caches key it


@st.cache_data(show_spinner="Enumerating every rule's exact law…", max_entries=32, ttl=3600)
def judge_all(source: str, p: Probs, q: Probs, K: int, k: int) -> list[court.Judgement]:
    return cv.judge(source, p, q, K, k)


@st.cache_data(show_spinner="Generating sequences with every rule…", max_entries=16, ttl=3600)
def measure_all(source: str, p: Probs, q: Probs, K: int, k: int, n: int, seed: int) -> list[dict]:
    return cv.measured_rows(judge_all(source, p, q, K, k), cv.page_problem(source, p, q, K), n, seed)


@st.cache_data(show_spinner="Verifying trees…", max_entries=64, ttl=3600)
def measure_tree(p: Probs, q: Probs, k: int, depth: int, seed: int, iid: bool) -> tree.Measured:
    return tree.measure_kary(p, q, k, depth, cv.TREE_ROWS, seed, iid=iid)


@st.cache_data(show_spinner="Pairing the engine with the reference…", max_entries=32, ttl=3600)
def certify_engine(source: str, p: Probs, q: Probs, K: int, seed: int, engine: str) -> cv.Certificate:
    name, verifier = cv.ENGINE  # engine: its name, so the cache is keyed by the verifier too
    return cv.certify(verifier, name, cv.page_problem(source, p, q, K), seed=seed)


def section(title: str, caption: str) -> None:
    st.divider()
    st.subheader(title)
    st.caption(caption)


MEASURED, CERTIFIED = links.Result("measured"), links.Result("certified")  # a link restores both
link = links.open_page(st, cv.PARAMS, S, results=(MEASURED, CERTIFIED))
shown_results: list[links.Result] = []

st.title("Verifiers side by side")
st.caption(cv.INTRO)
link.show_notes()

left, right = st.columns([1, 2], gap="large")
with left:
    source = st.selectbox("Problem", cv.SOURCES, format_func=cv.SOURCE_LABELS.get, key=S + "source")
    if source == TOY:  # the box holds a short name (a long one was cut on a projector); the numbers go here
        st.caption("The block-verification paper's example: p = (1/3, 2/3), q = (2/3, 1/3), K = 2 drafts.")
    if source == PQ:
        p_text = st.text_input("p (target), comma-separated", key=S + "p", max_chars=limits.MAX_TYPED_CHARS)
        q_text = st.text_input("q (draft), comma-separated", key=S + "q", max_chars=limits.MAX_TYPED_CHARS)
        K = st.slider("Drafts per verification K", 1, cv.MAX_K, key=S + "K")
    else:  # greyed out, the numbers this problem judges; the typed ones are kept for "your own p and q"
        p_text, q_text, K = (st.session_state[S + name] for name in ("p", "q", "K"))
        st.session_state.update({S + "p": p_text, S + "q": q_text, S + "K": K})  # not drawn this run: kept all the same
        judged = cv.shown_problem(source)
        st.text_input("p (target)", judged.p, disabled=True, key=S + "p_judged." + source)
        st.text_input("q (draft)", judged.q, disabled=True, key=S + "q_judged." + source)
        st.slider("Drafts per verification K", 1, cv.MAX_K, judged.K, disabled=True, key=S + "K_judged." + source)
    k = int(st.slider("Candidates per node k (trees)", 1, 3, key=S + "k"))
    seed = int(st.number_input("Seed (measurements)", min_value=0, max_value=2**32 - 1, step=1, key=S + "seed"))

rows, p, q, K = None, (), (), int(K)
with right:
    try:
        typed = cv.typed_pair(source, p_text, q_text)
        p, q = typed.p, typed.q
        for note in typed.notes:  # a sum other than 1 is divided out, as on Why it is exact
            st.info(f"{links.plain(note)}. Every number below uses the divided values.", icon=":material/functions:")
        rows = cv.court_rows(judge_all(source, p, q, K, k), k)
    except (InputError, ValueError) as e:
        st.error(links.error_text(e), icon=":material/error:")
    if rows is not None:
        metrics(st.columns(3), cv.headline(rows))

if rows is not None:
    # The chart spans the page: beside the inputs, at 150 % zoom its rule names left the bars and their
    # verdict labels no room and the labels ran past the chart's edge.
    plot(st, lesson_figures.verdict_bars(rows), S + "chart")
    # A table that wraps: a grid pushed its last columns past the page's edge at 150 % zoom.
    st.table(pd.DataFrame(cv.shown_rows(rows)).style.format(precision=6), hide_index=True)
    mcol, ncol = st.columns([1, 2])
    n_asked = int(ncol.number_input("Sequences per rule", min_value=100, step=10_000, key=S + "n"))
    settings = (source, p, q, K, k, min(n_asked, cv.MAX_MEASURE_N), seed)
    if mcol.button("Measure every rule", key=S + "measure") or link.restores(MEASURED):
        st.session_state[S + "measured_for"] = settings
    if st.session_state.get(S + "measured_for") == settings:
        shown_results.append(MEASURED)
        # A table that wraps its long cells ("2.0928 (inconclusive: 3,372 rows is too few…)"); "—": no z.
        st.table(pd.DataFrame(measure_all(*settings)).style.format(precision=4, na_rep="—"), hide_index=True)
        st.caption(cv.measured_caption(settings[5], n_asked))
    if (refused := cv.refused_caption(rows)) is not None:
        st.caption(refused)
    st.caption(cv.RULES_CAPTION)
    # The certified bound: the paired test of the engine against the reference on this problem (specviz.app.certify).
    cert_for = (source, p, q, K, seed, cv.ENGINE[0])
    if st.button("Certify the chain engine against the reference", key=S + "certify") or link.restores(CERTIFIED):
        st.session_state[S + "certified_for"] = cert_for
    if st.session_state.get(S + "certified_for") == cert_for:
        shown_results.append(CERTIFIED)
        cert = certify_engine(*cert_for)
        box, icon = (st.success, ":material/verified:") if cert.certified else (st.error, ":material/error:")
        box("  \n".join(cert.lines()), icon=icon)
        st.caption(cv.covers(cv.page_problem(source, p, q, K), cv.SOURCE_LABELS[source])
                   + f" The seed above draws the rows; {cert.seconds:.2f} s of CPU.")  # fmt: skip
    else:
        st.caption(cv.CERTIFY_CAPTION)

context_free = source in (TOY, PQ) and rows is not None  # the tree and block sections draw the pair
pair_p, pair_q, depth = cv.pair(source, p, q, K)
section("Multi-draft trees: the full k-ary tree", cv.TREES_CAPTION)
if context_free:
    for col, (name, fig) in zip(st.columns(2), cv.tree_figures(k, depth).items(), strict=True):
        plot(st, fig, S + "shape_" + name, col)
    st.dataframe(cv.tree_rows(pair_p, pair_q, k, depth, seed, measure_tree), hide_index=True, key=S + "trees")
    st.markdown(cv.traced_tree_text(seed))
    # A table that wraps (a grid cut "drawn at node 0 from the residual…" at 1280 x 720); "—": no coin test.
    st.table(pd.DataFrame(cv.traced_tree(pair_p, pair_q, k, depth, seed)).style.format(precision=4, na_rep="—"),
             hide_index=True)  # fmt: skip
else:
    st.info("Trees are shown for the context-free problems: the toy example or your own p and q.")

section("One block verification, step by step", cv.BLOCK_CAPTION)
if context_free:
    steps = block_trace.seeded_block_trace(pair_p, pair_q, depth, seed)
    plot(st, figures.block_steps(steps), S + "block_chart")
    st.dataframe(block_trace.trace_rows(steps), hide_index=True, key=S + "block_steps")
    st.markdown(cv.block_text(steps, depth))
else:
    st.info("The block step by step is shown for the context-free problems: the toy example or your own p and q.")

section("Every verifier the package ships", cv.REGISTRY_CAPTION)
entries = registry.table()
st.table([{c: row[c] for c in cv.REGISTRY_COLUMNS} for row in entries], border="horizontal", hide_index=True)
st.markdown(cv.registry_list(entries))

shown = {"source": source, "p": p_text, "q": q_text, "K": K, "k": k, "seed": seed}
shown |= {"n": int(st.session_state[S + "n"])} if S + "n" in st.session_state else {}  # drawn once there are rows
link.show_in_link(shown, shown_results)
