"""Tokens per step: what the rule buys, the closed form against measurement, and a speedup model."""

from __future__ import annotations

import streamlit as st

from specviz import InputError
from specviz.app import figures, limits, links, presenter, serving, speed
from specviz.proof import theory

S = "tokens."
PARAMS = [
    links.float_param("a", 0.7, 0.0, 1.0),
    links.int_param("K", 3, 0, speed.MAX_K),
    links.float_param("c", 0.1, 0.0, 1.0),
    links.int_param("n", 20_000, 2, 10**12),
    links.int_param("seed", 0, 0, 2**32 - 1),
]


@st.cache_data(show_spinner="Measuring…", max_entries=64, ttl=3600)
def measure(a: float, n: int, seed: int, bonus: bool) -> speed.Measured:
    p, q = speed.two_token_pair(a)
    return speed.measure_tokens(p, q, speed.K_RANGE, n, seed, bonus=bonus)


@st.cache_data(show_spinner=False, max_entries=16, ttl=3600)
def measure_textbook(seed: int) -> speed.Measured:
    return speed.measure_tokens(*speed.TEXTBOOK, [speed.TEXTBOOK_K], speed.TEXTBOOK_N, seed)


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
    K = st.slider("Drafts per verification K", 0, speed.MAX_K, key=S + "K")
    n_asked = st.number_input("Rows per measured point", min_value=2, step=10_000, key=S + "n")
    n = link.cap(int(n_asked), limits.MAX_TOKENS_N, "Rows per point",
                 f"{len(speed.K_RANGE)} points x 2 verifiers must answer a click")  # fmt: skip
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
        measured = serving.heavy(  # bounded, shared
            ("tokens", a, n, int(seed)),
            lambda: (measure(a, n, int(seed), True), measure(a, n, int(seed), False)),
            st.empty(),
        )
    except InputError as e:
        st.error(links.error_text(e), icon=":material/error:")
        measured = (None, None)
    view = speed.tokens_view(a, K, n, int(seed), *measured)
    st.plotly_chart(presenter.chart(view.figure, st.session_state), key=S + "curve")
    for text in view.captions:
        st.caption(text)
    for col, d in zip(st.columns(2) if view.downloads else [], view.downloads, strict=True):
        col.download_button(d.label, d.data, d.file_name, d.mime, key=S + d.key, help=d.help)

st.divider()
st.subheader("The textbook example")
presenter.metrics(st.columns(4), speed.textbook_metrics(measure_textbook(int(seed))))

st.divider()
st.subheader("Is it worth it? A speedup model")
s1, s2 = st.columns([1, 2], gap="large")
with s1:
    c = st.slider("Drafter cost c (one drafter step / one target pass)", 0.0, 1.0, step=0.01, key=S + "c")
    table = speed.speedup_table(a, speed.K_RANGE, c)
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

link.show_in_link({"a": a, "K": K, "c": c, "n": int(n_asked), "seed": int(seed)})  # the address bar shows them
