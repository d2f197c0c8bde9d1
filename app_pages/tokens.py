"""Tokens per step: what the rule buys, the closed form against measurement, and a speedup model."""

from __future__ import annotations

import streamlit as st

from specviz import InputError
from specviz.app import figures, limits, links, position, presenter, results, serving, speed
from specviz.proof import stats, theory

S = "tokens."
MAX_K = 16  # the K slider's upper end; a link asking for more falls back to the default
K_RANGE = range(MAX_K + 1)  # the curve's K axis: 0..16 drafts, every value the K slider can take
REFERENCE_PQ = position.preset("textbook")  # p = [0.5, 0.3, 0.15, 0.05], q uniform
REFERENCE_K = 3
REFERENCE_N = 100_000
PARAMS = [
    links.float_param("a", 0.7, 0.0, 1.0),
    links.int_param("K", 3, 0, MAX_K),
    links.float_param("c", 0.1, 0.0, 1.0),
    links.int_param("n", 20_000, 2, 10**12),
    links.int_param("seed", 0, 0, 2**32 - 1),
]


@st.cache_data(show_spinner="Measuring…", max_entries=64, ttl=3600)
def measure(a: float, n: int, seed: int, bonus: bool) -> speed.Measured:
    p, q = speed.two_token_pair(a)
    return speed.measure_tokens(p, q, K_RANGE, n, seed, bonus=bonus)


@st.cache_data(show_spinner=False, max_entries=16, ttl=3600)
def measure_reference(seed: int) -> speed.Measured:
    return speed.measure_tokens(*REFERENCE_PQ, [REFERENCE_K], REFERENCE_N, seed)


link = links.open_page(st, PARAMS, S)

st.title("Tokens per step")
st.caption(
    "With a context-free acceptance rate a and K drafts, a verification emits the accepted drafts plus one token of "
    "its own (the replacement or the bonus): E[tokens] = 1 + a + … + a^K = (1 − a^(K+1)) / (1 − a)."
)
link.show_notes()

left, right = st.columns([1, 2], gap="large")
with left:
    a = st.slider("Acceptance rate a", 0.0, 1.0, step=0.01, key=S + "a")
    K = st.slider("Drafts per verification K", 0, MAX_K, key=S + "K")
    n_asked = st.number_input("Rows per measured point", min_value=2, step=10_000, key=S + "n")
    n = link.cap(
        int(n_asked), limits.MAX_TOKENS_N, "Rows per point", f"{len(K_RANGE)} points x 2 verifiers must answer a click"
    )
    seed = st.number_input("Seed", min_value=0, max_value=2**32 - 1, step=1, key=S + "seed")
    st.caption(
        "Measured by running specviz.verify on rows with p = [a, 1 − a] and q one-hot on token 0 (the drafter always "
        "proposes token 0, accepted with probability a); without the bonus, the no_bonus verifier of "
        "specviz.proof.bugs."
    )
    st.metric(f"E[tokens], K = {K}", f"{theory.expected_tokens(a, K):.4f}")
    st.metric(f"without the bonus, K = {K}", f"{theory.expected_tokens(a, K, bonus=False):.4f}")

with right:
    try:
        with_bonus, without_bonus = serving.heavy(  # bounded, shared
            ("tokens", a, n, int(seed)),
            lambda: (measure(a, n, int(seed), True), measure(a, n, int(seed), False)),
            st.empty(),
        )
    except InputError as e:
        st.error(links.error_text(e), icon=":material/error:")
        with_bonus = without_bonus = None
    theory_with = [theory.expected_tokens(a, k) for k in K_RANGE]
    theory_without = [theory.expected_tokens(a, k, bonus=False) for k in K_RANGE]

    fig = figures.tokens_curve(
        list(K_RANGE),
        theory_with,
        theory_without,
        measured=None if with_bonus is None else speed.error_bars(with_bonus, theory_with),
        measured_without=None if without_bonus is None else speed.error_bars(without_bonus, theory_without),
        K_mark=K,
    )
    st.plotly_chart(presenter.chart(fig, st.session_state), key=S + "curve")
    if with_bonus is not None:
        t_with = results.tokens_point(with_bonus.mean[K], with_bonus.se[K], n, theory_with[K])
        t_without = results.tokens_point(without_bonus.mean[K], without_bonus.se[K], n, theory_without[K])
        st.caption(
            f"Points: mean over {n:,} verifications each, error bars ±2 standard errors. At K = {K}: measured "
            f"{results.point_text(t_with)} with the bonus, {results.point_text(t_without)} without (± 1 SE)."
        )
        if not t_with.conclusive:
            st.caption(
                f"A point speaks only after {stats.MIN_ROUNDS} rows and when ±SE is small enough to see a shift "
                f"of {stats.MIN_TOKENS:g} tokens with {t_with.power:.0%} probability; below that a standard "
                "error of a few rows can read 0 and would be a false promise, so no error bar is drawn."
            )
        rows = results.tokens_rows(list(K_RANGE), a, with_bonus, without_bonus, theory_with, theory_without)
        d1, d2 = st.columns(2)
        d1.download_button(
            "Download the points (CSV)",
            results.to_csv(rows),
            file_name=f"specviz-tokens-a{a:g}.csv",
            mime="text/csv",
            key=S + "download_csv",
        )
        d2.download_button(
            "Download the points (JSON)",
            results.to_json({"a": a, "rows_per_point": n, "seed": int(seed), "points": rows}),
            file_name=f"specviz-tokens-a{a:g}.json",
            mime="application/json",
            key=S + "download_json",
        )

st.divider()
st.subheader("The textbook example")
ref_a = theory.acceptance_rate(*REFERENCE_PQ)
ref = measure_reference(int(seed))
r = st.columns(4)
r[0].metric("p = [0.5, 0.3, 0.15, 0.05], q uniform: a", f"{ref_a:.2f}")
r[1].metric(f"theory, K = {REFERENCE_K}", f"{theory.expected_tokens(ref_a, REFERENCE_K):.3f}")
ref_point = results.tokens_point(ref.mean[0], ref.se[0], REFERENCE_N, theory.expected_tokens(ref_a, REFERENCE_K))
r[2].metric(  # the SE goes under the value: "2.537 ± 0.004 (1 SE)" ran into the next metric on a projector
    f"measured ({REFERENCE_N:,} rows)",
    f"{ref.mean[0]:.3f}" if ref_point.conclusive else results.point_text(ref_point),
    f"± {ref.se[0]:.3f} (1 SE)" if ref_point.conclusive else None,
    delta_color="off",
    delta_arrow="off",
)
r[3].metric("without the bonus (theory)", f"{theory.expected_tokens(ref_a, REFERENCE_K, bonus=False):.3f}")

st.divider()
st.subheader("Is it worth it? A speedup model")
s1, s2 = st.columns([1, 2], gap="large")
with s1:
    c = st.slider("Drafter cost c (one drafter step / one target pass)", 0.0, 1.0, step=0.01, key=S + "c")
    table = speed.speedup_table(a, K_RANGE, c)
    st.metric(f"speedup at K = {K}", f"×{table.speedup[K]:.3f}")
    st.metric("best K", f"{table.best_K}", f"×{table.speedup[table.best_K]:.3f}", delta_color="off", delta_arrow="off")
    st.caption(
        "Model: speedup = E[tokens] / (1 + K·c). Assumes one target pass costs the same whether it scores 1 or K + 1 "
        "positions (decoding is memory-bound), the drafter's K steps run one after another at cost c each, acceptance "
        "is independent across positions at rate a, and verification itself is free. Real systems also pay for "
        "batching, KV-cache rollback and the draft model's prefill."
    )
with s2:
    speedup_fig = figures.speedup_curve(table.K, table.speedup, table.best_K)
    st.plotly_chart(presenter.chart(speedup_fig, st.session_state), key=S + "speedup")

shown_settings = {"a": a, "K": K, "c": c, "n": int(n_asked), "seed": int(seed)}
link.show_in_link(shown_settings)  # the address bar shows them
