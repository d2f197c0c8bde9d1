"""Tokens per step: what the rule buys, the closed form against measurement, and a speedup model."""

from __future__ import annotations

import streamlit as st

from specviz import InputError, figures, limits, links, position, speed, theory

S = "tokens."
MAX_K = 16  # the K slider's upper end; a link asking for more falls back to the default
K_RANGE = range(MAX_K + 1)  # the curve's K axis: 0..16 drafts, every value the K slider can take
REFERENCE_PQ = position.preset("reference")  # p = [0.5, 0.3, 0.15, 0.05], q uniform
REFERENCE_K = 3
REFERENCE_N = 100_000
PARAMS = [
    links.float_param("a", 0.7, 0.0, 1.0),
    links.int_param("K", 3, 0, MAX_K),
    links.float_param("c", 0.1, 0.0, 1.0),
    links.int_param("n", 20_000, 2, 10**12),
    links.int_param("seed", 0, 0, 2**32 - 1),
]


@st.cache_data(show_spinner="Measuring…", max_entries=64)
def measure(a: float, n: int, seed: int, bonus: bool) -> speed.Measured:
    p, q = speed.two_token_pair(a)
    return speed.measure_tokens(p, q, K_RANGE, n, seed, bonus=bonus)


@st.cache_data(show_spinner=False, max_entries=16)
def measure_reference(seed: int) -> speed.Measured:
    return speed.measure_tokens(*REFERENCE_PQ, [REFERENCE_K], REFERENCE_N, seed)


link_notes = links.init_state(st.query_params.to_dict(), st.session_state, PARAMS, S)

st.title("Tokens per step")
st.caption(
    "With a context-free acceptance rate a and K drafts, a verification emits the accepted drafts plus one token of "
    "its own (the replacement or the bonus): E[tokens] = 1 + a + … + a^K = (1 − a^(K+1)) / (1 − a)."
)
for note in link_notes:
    st.warning(note, icon=":material/link:")

left, right = st.columns([1, 2], gap="large")
with left:
    a = st.slider("Acceptance rate a", 0.0, 1.0, step=0.01, key=S + "a")
    K = st.slider("Drafts per verification K", 0, MAX_K, key=S + "K")
    n_asked = st.number_input("Rows per measured point", min_value=2, step=10_000, key=S + "n")
    n, n_note = limits.cap(
        int(n_asked), limits.MAX_TOKENS_N, "Rows per point", f"{len(K_RANGE)} points x 2 verifiers must answer a click"
    )
    if n_note:
        st.warning(n_note, icon=":material/content_cut:")
    seed = st.number_input("Seed", min_value=0, max_value=2**32 - 1, step=1, key=S + "seed")
    st.caption(
        "Measured by running specviz.verify on rows with p = [a, 1 − a] and q one-hot on token 0 (the drafter always "
        "proposes token 0, accepted with probability a); without the bonus, the no_bonus verifier of specviz.bugs."
    )
    st.metric(f"E[tokens], K = {K}", f"{theory.expected_tokens(a, K):.4f}")
    st.metric(f"without the bonus, K = {K}", f"{theory.expected_tokens(a, K, bonus=False):.4f}")

with right:
    try:
        with_bonus, without_bonus = measure(a, n, int(seed), True), measure(a, n, int(seed), False)
    except InputError as e:
        st.error(str(e), icon=":material/error:")
        with_bonus = without_bonus = None
    fig = figures.tokens_curve(
        list(K_RANGE),
        [theory.expected_tokens(a, k) for k in K_RANGE],
        [theory.expected_tokens(a, k, bonus=False) for k in K_RANGE],
        measured=None if with_bonus is None else (with_bonus.mean, with_bonus.se),
        measured_without=None if without_bonus is None else (without_bonus.mean, without_bonus.se),
        K_mark=K,
    )
    st.plotly_chart(fig, key=S + "curve")
    if with_bonus is not None:
        st.caption(
            f"Points: mean over {n:,} verifications each, error bars ±2 standard errors. At K = {K}: measured "
            f"{with_bonus.mean[K]:.4f} ± {with_bonus.se[K]:.4f} with the bonus, "
            f"{without_bonus.mean[K]:.4f} ± {without_bonus.se[K]:.4f} without."
        )

st.divider()
st.subheader("The reference example")
ref_a = theory.acceptance_rate(*REFERENCE_PQ)
ref = measure_reference(int(seed))
r = st.columns(4)
r[0].metric("p = [0.5, 0.3, 0.15, 0.05], q uniform: a", f"{ref_a:.2f}")
r[1].metric(f"theory, K = {REFERENCE_K}", f"{theory.expected_tokens(ref_a, REFERENCE_K):.3f}")
r[2].metric(f"measured ({REFERENCE_N:,} rows)", f"{ref.mean[0]:.3f} ± {ref.se[0]:.3f}")
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
    st.plotly_chart(figures.speedup_curve(table.K, table.speedup, table.best_K), key=S + "speedup")

link = links.encode_params({"a": a, "K": K, "c": c, "n": int(n_asked), "seed": int(seed)}, PARAMS)
if st.query_params.to_dict() != link:  # the address bar reproduces what is shown
    st.query_params.from_dict(link)
