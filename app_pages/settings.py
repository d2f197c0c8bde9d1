"""Sampling settings: which p, which q, and what a mismatch between them costs or breaks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from specviz import InputError
from specviz.app import figures, flow, limits, links, presenter
from specviz.app import settings_demo as sd
from specviz.verifiers.processing import Settings

S = "settings."
SOURCES = ("preset", "random", "typed")
MAX_K = 8
MAX_TOP_K = sd.MAX_TYPED_V
REQ, DRA = sd.DEFAULT_REQUEST, sd.DEFAULT_DRAFTER
PARAMS = [
    links.choice_param("source", "preset", SOURCES),
    links.choice_param("preset", sd.DEFAULT_PRESET, list(sd.PRESETS)),
    links.int_param("seed", 0, 0, 2**32 - 1),
    links.text_param("tl", ", ".join(f"{v:g}" for v in sd.PRESETS[sd.DEFAULT_PRESET][0]), 1000),
    links.text_param("dl", ", ".join(f"{v:g}" for v in sd.PRESETS[sd.DEFAULT_PRESET][1]), 1000),
    links.float_param("rT", REQ.temperature, 0.0, 5.0),
    links.int_param("rk", REQ.top_k, 0, MAX_TOP_K),
    links.float_param("rp", REQ.top_p, 0.01, 1.0),
    links.float_param("dT", DRA.temperature, 0.0, 5.0),
    links.int_param("dk", DRA.top_k, 0, MAX_TOP_K),
    links.float_param("dp", DRA.top_p, 0.01, 1.0),
    links.int_param("K", 3, 1, MAX_K),
    links.choice_param("knob", "temperature", list(sd.KNOBS)),
    links.choice_param("pipeline", "correct", ["correct", "q_unprocessed", "target_unprocessed"]),
]


@st.cache_data(show_spinner=False, max_entries=256, ttl=3600)
def report(zt: tuple[float, ...], zd: tuple[float, ...], request: Settings, drafter: Settings, K: int):
    return sd.settings_report(zt, zd, request, drafter, K)


link = links.open_page(st, PARAMS, S)

st.title("Sampling settings")
st.caption(
    "A request asks for a temperature, top-k and top-p; the drafter may run with settings of its own. Speculative "
    "sampling is lossless with respect to the *processed* target p (what plain decoding with the request's settings "
    "samples), and q must be exactly the law each draft was drawn from. p and q need not match: a mismatch costs "
    "acceptance only."
)
link.show_notes()

left, right = st.columns([1, 2], gap="large")
with left:
    source = st.radio("Logits", SOURCES, horizontal=True, key=S + "source")
    zt = zd = None
    if source == "preset":
        preset = st.selectbox("Preset", list(sd.PRESETS), key=S + "preset")
        zt, zd = np.array(sd.PRESETS[preset][0]), np.array(sd.PRESETS[preset][1])
        st.caption(sd.PRESETS[preset][2].capitalize() + ".")
    elif source == "random":
        seed = st.number_input("Seed", min_value=0, max_value=2**32 - 1, step=1, key=S + "seed")
        zt, zd = sd.random_logits(int(seed))
        st.caption(f"{sd.RANDOM_V} standard normal logits times 1.5; the drafter's are the target's plus noise.")
    else:
        tl = st.text_input("Target logits", key=S + "tl", help="comma or space separated; -inf rules a token out",
                           max_chars=limits.MAX_TYPED_CHARS)  # fmt: skip
        dl = st.text_input("Draft logits", key=S + "dl", help="as many as the target's",
                           max_chars=limits.MAX_TYPED_CHARS)  # fmt: skip
        try:
            zt, zd = sd.parse_logit_pair(tl, dl)
        except InputError as e:
            st.error(links.error_text(e), icon=":material/error:")
            zt = zd = None
    V = None if zt is None else int(zt.size)
    r1, r2 = st.columns(2)
    with r1:
        st.markdown("**Request (target)**")
        rT = st.number_input("temperature", 0.0, 5.0, step=0.1, key=S + "rT", help="0 is greedy")
        rk = st.number_input("top-k", 0, MAX_TOP_K, step=1, key=S + "rk", help="0 keeps every token")
        rp = st.slider("top-p", 0.01, 1.0, step=0.01, key=S + "rp", help="1 keeps every token")
    with r2:
        st.markdown("**Drafter**")
        dT = st.number_input("temperature", 0.0, 5.0, step=0.1, key=S + "dT", help="0 is greedy")
        dk = st.number_input("top-k", 0, MAX_TOP_K, step=1, key=S + "dk", help="0 keeps every token")
        dp = st.slider("top-p", 0.01, 1.0, step=0.01, key=S + "dp", help="1 keeps every token")
    K = st.slider("Drafts per verification K", 1, MAX_K, key=S + "K")

shown = {"source": source, "K": K, "rT": rT, "rk": int(rk), "rp": rp, "dT": dT, "dk": int(dk), "dp": dp}
# Settings whose widget is not drawn now (init_state seeded them this run) stay in the link.
shown |= {k: st.session_state[S + k] for k in ("preset", "seed", "tl", "dl", "knob", "pipeline")}

request, drafter = Settings(float(rT), int(rk), float(rp)), Settings(float(dT), int(dk), float(dp))
rep = None
if zt is not None:
    try:
        rep = report(tuple(zt.tolist()), tuple(zd.tolist()), request, drafter, int(K))
    except InputError as e:
        with right:
            st.error(links.error_text(e), icon=":material/error:")

with right:
    if rep is not None:
        fig = figures.settings_bars(rep.p_raw, rep.p, rep.q_raw, rep.q, rep.removed_p, rep.removed_q)
        st.plotly_chart(presenter.chart(fig, st.session_state), key=S + "bars")
        correct = rep.pipelines[0]
        m = st.columns(3)
        m[0].metric("acceptance rate Σ min(p, q)", f"{correct.acceptance:.4f}")
        m[1].metric(f"tokens per step, K = {rep.K}", f"{rep.tokens_per_step:.4f}")
        m[2].metric("vocabulary V", f"{V}")
        st.markdown(
            f"Removed by the request's settings: **{sd.token_list(rep.removed_p)}**. "
            f"Removed by the drafter's settings: **{sd.token_list(rep.removed_q)}**."
        )

if rep is None:
    link.show_in_link(shown)
    raise flow.EndOfPage  # st.stop() would drop the Next link

st.divider()
st.subheader("Three pipelines, exactly")
st.caption(
    "The exact law of the first emitted token when drafts are drawn from q (the drafter's processed law) and the "
    "verifier is given the p and q of each pipeline. Plain decoding with the request's settings samples p; the "
    "raw target is the softmax of the target's logits with no settings."
)
table = pd.DataFrame(sd.pipeline_rows(rep))
# A static table wraps its cells (a data grid would cut the long last column off).
st.table(table, hide_index=True)
st.caption(
    f"Lossless means TV from plain decoding below {sd.LOSSLESS_TV:g}, shown as 0 (to {sd.LOSSLESS_TV:g}): float64 "
    "rounding of these closed forms is about 1e-16 per token. A mismatch bug is lossy only when its side's settings "
    "change that side's law (q_unprocessed the drafter's, target_unprocessed the request's): with default settings "
    "everywhere (temperature 1, top-k 0, top-p 1) all three coincide."
)
names = [pl.name for pl in rep.pipelines]
shown_pipeline = st.radio("Draw the exact law of", names, horizontal=True, key=S + "pipeline")
shown["pipeline"] = shown_pipeline
pl = rep.pipelines[names.index(shown_pipeline)]
law_fig = figures.law_comparison(rep.p, pl.law, law_name=f"{pl.name}: exact law of the first token")
st.plotly_chart(presenter.chart(law_fig, st.session_state), key=S + "law")
st.caption(
    f"Target p here is plain decoding with the request's settings. TV between the two: {sd.format_tv(pl.tv_plain)}."
)

st.divider()
st.subheader("Sweep one of the drafter's settings")
s1, s2 = st.columns([1, 2], gap="large")
with s1:
    knob = st.radio("Drafter's setting", sd.KNOBS, key=S + "knob")
    shown["knob"] = knob
    current = {"temperature": float(dT), "top_k": float(dk), "top_p": float(dp)}[knob]
    values = sd.sweep_values(knob, V)
    pts = sd.sweep(zt, zd, request, drafter, knob, values, int(K))
    best = max(pts, key=lambda pt: pt.acceptance)
    st.metric(f"best {knob} for acceptance", f"{best.value:g}", f"a = {best.acceptance:.4f}", delta_color="off",
              delta_arrow="off")  # fmt: skip
    st.caption(
        "The target stays fixed, and the pipeline is the correct one at every point: the output law is p throughout, "
        "only the speed changes. Top-k 0 (off) is the same as top-k = V."
    )
with s2:
    mark = float(V) if knob == "top_k" and current == 0 else current
    sweep_fig = figures.sweep_curve(
        [pt.value for pt in pts], [pt.acceptance for pt in pts], [pt.tokens_per_step for pt in pts], knob, mark, int(K)
    )
    st.plotly_chart(presenter.chart(sweep_fig, st.session_state), key=S + "sweep")

st.divider()
st.subheader("Greedy: temperature 0")
greedy = report(tuple(zt.tolist()), tuple(zd.tolist()), Settings(temperature=0.0), drafter, int(K))
st.markdown(
    "At temperature 0 the request's p puts all its mass on the target's argmax, so a draft is accepted if and only "
    "if it equals that token, and at the first mismatch the argmax itself is emitted: the output is greedy decoding "
    "token for token (the package's tests check both against plain greedy decoding)."
)
st.markdown(sd.greedy_text(zt, greedy, rep))
st.markdown(
    "Where engines diverge: **ties** at the top (one engine takes the lowest id, another the first in a sorted "
    "order), and **numerics**: a batch-dependent kernel (a different reduction order at another batch size) can move "
    "two near-equal logits past each other, so the same request gives a different greedy token alone and in a batch."
)

link.show_in_link(shown)
