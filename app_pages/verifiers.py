"""Verifiers side by side: every rule's exact distance from the target and its exact tokens per step."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from specviz import InputError
from specviz.app import certify, figures, lesson_figures, limits, links, position, presenter, results, tree_shapes
from specviz.proof import block_trace, court, registry, scenarios, stats
from specviz.verifiers import tree

S = "verifiers."
MAX_K = 3  # the exact court enumerates every draft sequence: K = 3 at V = 4 answers in a few seconds
MAX_V = 4  # tokens in a typed p or q, for the same reason
MAX_ASSIGNMENTS = 256  # candidate-token assignments per context of a tree the court judges on a click
MAX_EVALS = 1_000_000  # verifier rows per rule before the court refuses (about a second at V = 4)
TOY, PQ = certify.TOY, certify.PQ
SCENARIOS = ("reference", "deterministic", "zeros", "ragged")  # prove's scenarios the court answers fast
SOURCES = (TOY, PQ, *SCENARIOS)
PARAMS = [
    links.choice_param("source", TOY, SOURCES),
    links.text_param("p", "0.5, 0.3, 0.15, 0.05", max_len=200),
    links.text_param("q", "0.25, 0.25, 0.25, 0.25", max_len=200),
    links.int_param("K", 2, 1, MAX_K),
    links.int_param("k", 2, 1, 3),
    links.int_param("seed", 0, 0, 2**32 - 1),
    links.int_param("n", 20_000, 100, 10**9),
]
MAX_MEASURE_N = 100_000  # sequences per rule of one measurement: a few seconds for 7 rules
TREE_ROWS = 10_000  # measured trees per rule: 85 nodes at k = 3, K = 3 take a fraction of a second
SOURCE_LABELS = {
    TOY: "toy example",  # the block paper's p = (1/3, 2/3), q = (2/3, 1/3), K = 2: said under the box
    PQ: "Your own p and q (the same at every position)",
    **{name: f"Scenario: {scenarios.SCENARIOS[name].title}" for name in SCENARIOS},
}


@st.cache_data(show_spinner="Enumerating every rule's exact law…", max_entries=32, ttl=3600)
def judge_all(source: str, p: tuple[float, ...], q: tuple[float, ...], K: int, k: int) -> list[court.Judgement]:
    pb = certify.page_problem(source, p, q, K)
    return court.compare_with_trees(pb, k, max_evals=MAX_EVALS, max_assignments=MAX_ASSIGNMENTS)


@st.cache_data(show_spinner="Generating sequences with every rule…", max_entries=16, ttl=3600)
def measure_all(
    source: str, p: tuple[float, ...], q: tuple[float, ...], K: int, k: int, n: int, seed: int
) -> list[dict]:
    pb = certify.page_problem(source, p, q, K)
    return certify.measured_rows(judge_all(source, p, q, K, k), pb, n, seed)


@st.cache_data(show_spinner="Verifying trees…", max_entries=64, ttl=3600)
def measure_tree(p: tuple[float, ...], q: tuple[float, ...], k: int, depth: int, seed: int, iid: bool) -> tree.Measured:
    return tree.measure_kary(p, q, k, depth, TREE_ROWS, seed, iid=iid)


@st.cache_data(show_spinner="Pairing the engine with the reference…", max_entries=32, ttl=3600)
def certify_engine(source: str, p: tuple[float, ...], q: tuple[float, ...], K: int, seed: int,
                   engine: str) -> certify.Certificate:  # fmt: skip
    name, verifier = certify.ENGINE  # engine: its name, so the cache is keyed by the verifier too
    return certify.certify(verifier, name, certify.page_problem(source, p, q, K), seed=seed)


MEASURED, CERTIFIED = links.Result("measured"), links.Result("certified")  # a link restores both
link = links.open_page(st, PARAMS, S, results=(MEASURED, CERTIFIED))
shown_results: list[links.Result] = []

st.title("Verifiers side by side")
st.caption(
    "Every rule is put through the exact court (specviz.proof.court): its output law over the first tokens is "
    "enumerated over its explicit uniforms, compared with the target's law, and its expected tokens per "
    "verification computed exactly. The verdict is computed from those numbers: lossless when the total-variation "
    "distance from the target is at most 1e-12 plus the mass the enumeration could not resolve."
)
link.show_notes()

left, right = st.columns([1, 2], gap="large")
with left:
    source = st.selectbox("Problem", SOURCES, format_func=SOURCE_LABELS.get, key=S + "source")
    if source == TOY:  # the box holds a short name (a long one was cut on a projector); the numbers go here
        st.caption("The block-verification paper's example: p = (1/3, 2/3), q = (2/3, 1/3), K = 2 drafts.")
    if source == PQ:
        p_text = st.text_input("p (target), comma-separated", key=S + "p", max_chars=limits.MAX_TYPED_CHARS)
        q_text = st.text_input("q (draft), comma-separated", key=S + "q", max_chars=limits.MAX_TYPED_CHARS)
        K = st.slider("Drafts per verification K", 1, MAX_K, key=S + "K")
    else:  # greyed out, the numbers this problem judges; the typed ones are kept for "your own p and q"
        for name in ("p", "q", "K"):
            st.session_state[S + name] = st.session_state[S + name]  # not drawn this run: kept all the same
        p_text, q_text, K = st.session_state[S + "p"], st.session_state[S + "q"], st.session_state[S + "K"]
        judged = certify.shown_problem(source)
        st.text_input("p (target)", judged.p, disabled=True, key=S + "p_judged." + source)
        st.text_input("q (draft)", judged.q, disabled=True, key=S + "q_judged." + source)
        st.slider("Drafts per verification K", 1, MAX_K, judged.K, disabled=True, key=S + "K_judged." + source)
    k = st.slider("Candidates per node k (trees)", 1, 3, key=S + "k")
    seed = st.number_input("Seed (measurements)", min_value=0, max_value=2**32 - 1, step=1, key=S + "seed")

rows = None
with right:
    try:
        p: tuple[float, ...] = ()
        q: tuple[float, ...] = ()
        if source == PQ:  # the texts are read only when they define the problem (a link may carry junk)
            typed = position.parse_pair(p_text, q_text, MAX_V, "the court enumerates every draft sequence")
            p, q = typed.p, typed.q
            for note in typed.notes:  # a sum other than 1 is divided out, as on Why it is exact
                st.info(f"{links.plain(note)}. Every number below uses the divided values.",
                        icon=":material/functions:")  # fmt: skip
        rows = court.table(judge_all(source, p, q, int(K), int(k)))
        for r in rows:  # one name per tree shape: the court's tree rows are k chains from the root
            r["rule"] = tree_shapes.court_label(r["rule"], int(k))
    except (InputError, ValueError) as e:
        st.error(links.error_text(e), icon=":material/error:")
    if rows is not None:
        by_rule = {r["rule"]: r for r in rows}
        m = st.columns(3)
        for col, name in zip(m, ("chain", "block", "block, lossy last threshold"), strict=True):
            r = by_rule[name]
            col.metric(f"{name}: accepted drafts per step", f"{r['accepted drafts per step']:.6f}", r["verdict"],
                       delta_color="off", delta_arrow="off")  # fmt: skip

if rows is not None:
    # The chart spans the page: beside the inputs, at 150 % zoom its rule names left the bars and their
    # verdict labels no room and the labels ran past the chart's edge.
    st.plotly_chart(presenter.chart(lesson_figures.verdict_bars(rows), st.session_state), key=S + "chart")
    # TV as text: a lossless rule's rounding noise reads "< 1e-12", not "6.59e-17". A table that wraps: a grid
    # pushed its last columns past the page's edge at 150 % zoom.
    court_rows = [{**r, "TV from target": results.tv_text(r["TV from target"])} for r in rows]
    st.table(pd.DataFrame(court_rows).style.format(precision=6), hide_index=True)
    mcol, ncol = st.columns([1, 2])
    n_asked = ncol.number_input("Sequences per rule", min_value=100, step=10_000, key=S + "n")
    n_run = min(int(n_asked), MAX_MEASURE_N)
    settings = (source, p, q, int(K), int(k), n_run, int(seed))
    if mcol.button("Measure every rule", key=S + "measure") or link.restores(MEASURED):
        st.session_state[S + "measured_for"] = settings
    if st.session_state.get(S + "measured_for") == settings:
        shown_results.append(MEASURED)
        # A table that wraps its long cells ("2.0928 (inconclusive: 3,372 rows is too few…)"); "—": no z.
        st.table(pd.DataFrame(measure_all(*settings)).style.format(precision=4, na_rep="—"), hide_index=True)
        st.caption(
            f"{n_run:,} seeded sequences per rule through specviz.proof.simulate.generate (the seed above); the "
            f"exact figure is the court's expectation for each (context, draft count) the run met, averaged over its "
            f"verifications; z = (measured − exact) / SE. '{certify.SIMULATION_TEST}' checks the simulation "
            "against the court's exact figure for the same rule, lossy rules included: it is not a test of "
            f"losslessness (the verdict above is). It speaks only after {stats.MIN_ROUNDS} "
            f"verifications and when it would catch a shift of {stats.MIN_TOKENS:g} tokens with "
            f"{stats.POWER:.0%} probability (the detectable shift column); otherwise it says inconclusive and "
            "gives no z."
            + (f" Capped at {MAX_MEASURE_N:,} sequences per rule." if n_run < int(n_asked) else "")
        )
    refused = [r["rule"] for r in rows if r["verdict"] == "refused"]
    if refused:
        st.caption(
            f"Refused ({', '.join(refused)}): the enumeration needed more than {MAX_EVALS:,} verifier rows; the court "
            "gives no number rather than a guess."
        )
    st.caption(
        "Rules: chain (specviz.verify), block verification (Sun et al., ICLR 2025), recursive rejection sampling on a "
        "chain-shaped tree, sample-and-match, and four rules that are lossy in general, kept for comparison (the "
        "badge says where one happens to be exact, e.g. with a deterministic drafter): block verification with the "
        "uncapped product as its last threshold, Medusa's typical acceptance (epsilon 0.09, delta 0.3, then the "
        "target's argmax, as Medusa's medusa_generate does), lenient acceptance (keep with probability "
        "min(1, p / (0.75 q))) and a ratio threshold (keep iff p / q >= 1/2, no coin)."
    )
    # The certified bound: the paired test of the engine against the reference on this problem (specviz.app.certify).
    cert_for = (source, p, q, int(K), int(seed), certify.ENGINE[0])
    if st.button("Certify the chain engine against the reference", key=S + "certify") or link.restores(CERTIFIED):
        st.session_state[S + "certified_for"] = cert_for
    if st.session_state.get(S + "certified_for") == cert_for:
        shown_results.append(CERTIFIED)
        cert = certify_engine(*cert_for)
        if cert.certified:
            st.success("  \n".join(cert.lines()), icon=":material/verified:")
        else:
            st.error("  \n".join(cert.lines()), icon=":material/error:")
        st.caption(certify.covers(certify.page_problem(source, p, q, int(K)), SOURCE_LABELS[source])
                   + f" The seed above draws the rows; {cert.seconds:.2f} s of CPU.")  # fmt: skip
    else:
        st.caption(
            f"The button runs the chain engine (specviz.verify) and the plain reference "
            f"(specviz.verifiers.reference) on {certify.ROWS:,} rows drawn from this problem with the same uniforms: "
            "no row differing certifies a bound on their distance."
        )

st.divider()
st.subheader("Multi-draft trees: the full k-ary tree")
st.caption(
    "Two shapes, one name each. The table above judges **k chains from the root**: k independent drafts of K "
    "tokens sharing only the context. This section measures the **full k-ary tree**: k candidates at every node, K "
    "levels deep, so every accepted node has k fresh candidates below it and more drafts survive per step. Tree "
    "verification (specviz.verifiers.tree) on a context-free pair (the toy example or your own p and q): after a "
    "rejected candidate the node's target becomes the normalized residual, so the tokens still follow the target "
    "(checked exactly by enumeration in tests/test_tree.py). k = 1 is the chain for both. Exact: the chance a node "
    "accepts one of its candidates, A, raised to each depth and summed."
)
# The context-free pair the tree and block sections draw: the toy example or the typed p and q.
pair_p, pair_q, pair_K = (court.TOY_P, court.TOY_Q, court.TOY_K) if source == TOY else (p, q, int(K))
if source in (TOY, PQ) and rows is not None:
    tp, tq, depth = pair_p, pair_q, pair_K
    shapes = st.columns(2)
    shapes[0].plotly_chart(presenter.chart(tree_shapes.shape_figure(tree.multi_draft_parents(int(k), depth),
                           tree_shapes.chains_name(int(k))), st.session_state),
                           key=S + "shape_chains")  # fmt: skip
    shapes[1].plotly_chart(presenter.chart(tree_shapes.shape_figure(tree.kary_parents(int(k), depth),
                           tree_shapes.kary_name(int(k))), st.session_state),
                           key=S + "shape_kary")  # fmt: skip
    tree_rows = []
    kary = tree_shapes.kary_name(int(k))
    for label, iid in ((f"{kary}, i.i.d. from q (SpecInfer)", True), (f"{kary}, q's top k (EAGLE-style)", False)):
        measured = f"measured ({TREE_ROWS:,} trees)"
        try:
            got = measure_tree(tp, tq, int(k), depth, int(seed), iid)
        except InputError as e:  # k distinct top tokens need k <= V
            # str(e), not links.error_text: a table cell shows text as typed, escapes included
            tree_rows.append({"candidates": label, "exact accepted per step": None, measured: str(e)})
            continue
        exact = tree.kary_expected_accepted(tp, tq, int(k), depth, iid=iid)
        point = results.tokens_point(got.mean, got.se, got.n, exact)
        tree_rows.append({"candidates": label, "exact accepted per step": exact, measured: results.point_text(point)})
    st.dataframe(tree_rows, hide_index=True, key=S + "trees")
    one = tree.context_free_trees(tp, tq, tree.kary_parents(int(k), depth), 1, np.random.default_rng(int(seed)))
    traced = tree.verify_tree(*one, rng=np.random.default_rng([int(seed), 1]))
    st.markdown(
        f"**One traced verification** (i.i.d. candidates, seed {int(seed)}): each tried candidate's coin u against "
        "its acceptance probability min(1, r(y) / q(y)), where r is the target row, or the residual left by the "
        "siblings rejected before it; the last line is the token drawn where the walk stopped."
    )
    # A table that wraps (a grid cut "drawn at node 0 from the residual…" at 1280 x 720); "—": no coin test.
    st.table(pd.DataFrame(tree.trace(one, traced)).style.format(precision=4, na_rep="—"), hide_index=True)
else:
    st.info("Trees are shown for the context-free problems: the toy example or your own p and q.")

st.divider()
st.subheader("One block verification, step by step")
st.caption(
    "Block verification (specviz.verifiers.block) on the pair above: K drafts drawn from q, then per draft its weight "
    "w_i = min(1, w_(i-1) p(x_i) / q(x_i)), its threshold h_i = m_i / (m_i + 1 - w_i) (the last one h_K = w_K) and "
    "the uniform eta_i compared with it. Every uniform is looked at: tau, the drafts kept, is the LAST i with "
    "eta_i < h_i, so a later pass rescues earlier failures. Then one token: the bonus from p if tau = K, else from "
    "the residual (w_tau p - q)+ normalized. The seed above draws the drafts and the uniforms."
)
if source in (TOY, PQ) and rows is not None:
    steps = block_trace.seeded_block_trace(pair_p, pair_q, pair_K, int(seed))
    st.plotly_chart(presenter.chart(figures.block_steps(steps), st.session_state), key=S + "block_chart")
    st.dataframe(block_trace.trace_rows(steps), hide_index=True, key=S + "block_steps")
    st.markdown(
        f"Kept **tau = {steps.tau}** of {pair_K} drafts; emitted {steps.tokens}. The last token, **{steps.token}**, "
        f"came from {steps.source}: {np.round(steps.source_row, 4).tolist()} "
        f"(sample uniform {steps.sample_uniform:.4f})."
    )
else:
    st.info("The block step by step is shown for the context-free problems: the toy example or your own p and q.")

st.divider()
st.subheader("Every verifier the package ships")
st.caption(
    "The verifier registry (specviz.proof.registry): each rule's kind, the signature it takes, whether it claims "
    "to be lossless (the court above checks the claim), the plain reference its tokens must equal on the same "
    "uniforms, and for each kind's own verifier the mistakes prove --kind runs as its negative controls."
)
# The short columns as a table; the long ones (what each is, its mistakes) as wrapped text below,
# so nothing runs past the page on a projector at 150 % zoom.
entries = registry.table()
short = ("verifier", "kind", "signature", "claims", "reference")
st.table([{c: row[c] for c in short} for row in entries], border="horizontal", hide_index=True)
st.markdown(
    "\n".join(
        f"- **{row['verifier']}**: {row['what it is']}"
        + (f" Its mistakes, run as controls: {row['mistakes']}." if row["mistakes"] else "")
        for row in entries
    )
)

shown = {"source": source, "p": p_text, "q": q_text, "K": int(K), "k": int(k), "seed": int(seed)}
if S + "n" in st.session_state:
    shown["n"] = int(st.session_state[S + "n"])
link.show_in_link(shown, shown_results)
