"""Sampling settings: which p, which q, and what a mismatch between them costs or breaks."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from specviz import InputError
from specviz.app import figures, flow, limits, links, presenter
from specviz.app import settings_demo as sd
from specviz.verifiers.processing import Settings

S = "settings."
MAX_K = 8
MAX_TOP_K = sd.MAX_TYPED_V
REQ, DRA = sd.DEFAULT_REQUEST, sd.DEFAULT_DRAFTER
PARAMS = [
    links.choice_param("source", "preset", sd.SOURCES),
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
ss = st.session_state  # every setting, drawn or not (open_page seeded them), as the link shows them

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
    source = st.radio("Logits", sd.SOURCES, horizontal=True, key=S + "source")
    if source == "preset":
        preset = st.selectbox("Preset", list(sd.PRESETS), key=S + "preset")
        st.caption(sd.PRESETS[preset][2].capitalize() + ".")
    elif source == "random":
        st.number_input("Seed", min_value=0, max_value=2**32 - 1, step=1, key=S + "seed")
        st.caption(f"{sd.RANDOM_V} standard normal logits times 1.5; the drafter's are the target's plus noise.")
    else:
        st.text_input("Target logits", key=S + "tl", help="comma or space separated; -inf rules a token out",
                      max_chars=limits.MAX_TYPED_CHARS)  # fmt: skip
        st.text_input("Draft logits", key=S + "dl", help="as many as the target's", max_chars=limits.MAX_TYPED_CHARS)
    try:
        zt, zd = sd.logits(source, *(ss[S + k] for k in ("preset", "seed", "tl", "dl")))
    except InputError as e:
        st.error(links.error_text(e), icon=":material/error:")
        zt = zd = None
    for col, side, title in zip(st.columns(2), "rd", ("Request (target)", "Drafter"), strict=True):
        with col:
            st.markdown(f"**{title}**")
            st.number_input("temperature", 0.0, 5.0, step=0.1, key=S + side + "T", help="0 is greedy")
            st.number_input("top-k", 0, MAX_TOP_K, step=1, key=S + side + "k", help="0 keeps every token")
            st.slider("top-p", 0.01, 1.0, step=0.01, key=S + side + "p", help="1 keeps every token")
    K = st.slider("Drafts per verification K", 1, MAX_K, key=S + "K")

request, drafter = (Settings(float(ss[S + s + "T"]), int(ss[S + s + "k"]), float(ss[S + s + "p"])) for s in "rd")
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
        m = st.columns(3)
        m[0].metric("acceptance rate Σ min(p, q)", f"{rep.pipelines[0].acceptance:.4f}")
        m[1].metric(f"tokens per step, K = {rep.K}", f"{rep.tokens_per_step:.4f}")
        m[2].metric("vocabulary V", f"{rep.p.size}")
        st.markdown(sd.removed_text(rep))

if rep is None:
    link.show_in_link({p.name: ss[S + p.name] for p in PARAMS})
    raise flow.EndOfPage  # st.stop() would drop the Next link

st.divider()
st.subheader("Three pipelines, exactly")
st.caption(
    "The exact law of the first emitted token when drafts are drawn from q (the drafter's processed law) and the "
    "verifier is given the p and q of each pipeline. Plain decoding with the request's settings samples p; the "
    "raw target is the softmax of the target's logits with no settings."
)
st.table(pd.DataFrame(sd.pipeline_rows(rep)), hide_index=True)  # static: it wraps cells a data grid would cut off
st.caption(sd.LOSSLESS_NOTE)
names = [pl.name for pl in rep.pipelines]
pl = rep.pipelines[names.index(st.radio("Draw the exact law of", names, horizontal=True, key=S + "pipeline"))]
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
    sweep = sd.sweep_view(zt, zd, request, drafter, knob, int(K))
    st.metric(f"best {knob} for acceptance", f"{sweep.best.value:g}", f"a = {sweep.best.acceptance:.4f}",
              delta_color="off", delta_arrow="off")  # fmt: skip
    st.caption(
        "The target stays fixed, and the pipeline is the correct one at every point: the output law is p throughout, "
        "only the speed changes. Top-k 0 (off) is the same as top-k = V."
    )
s2.plotly_chart(presenter.chart(sweep.figure, st.session_state), key=S + "sweep")

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

link.show_in_link({p.name: ss[S + p.name] for p in PARAMS})
