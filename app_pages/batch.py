"""Batch: the real batched verifier on ragged rows (random, or the real model's), token strips, backend timings."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from specviz import InputError
from specviz.app import batch_demo, batch_model, figures, flow, limits, links, presenter, results, serving

S = "batch."
MAX_ROWS_SHOWN = 32  # token strips beyond this are unreadable; the histogram covers every row
MODEL = batch_model.SOURCE


@st.cache_data(show_spinner=False, max_entries=1)
def cuda_status() -> tuple[bool, str]:
    return batch_demo.cuda_status()


# Bounded: at most 16 results of <= MAX_BATCH_ROWS rows each (specviz.app.limits), each kept an hour.
@st.cache_data(show_spinner="Building, verifying and timing the batch…", max_entries=16, ttl=3600)
def run_batch(B: int, K: int, V: int, counts: str, typed: str, source: str, conc: float, drafter: str, seed: int,
              backend: str, time_on: tuple[str, ...]) -> batch_demo.BatchReport:  # fmt: skip
    num_draft = batch_demo.draft_counts(counts, B, K, seed, typed)
    return batch_demo.run_batch_demo(B, K, V, num_draft, source, conc, seed, backend, time_on, max_rows=MAX_ROWS_SHOWN,
                                     drafter=drafter)  # fmt: skip


link = links.open_page(st, batch_demo.PARAMS, S)
cuda_ok, cuda_reason = cuda_status()
available = batch_demo.available_backends(cuda_ok)
if st.session_state[S + "backend"] not in available:
    asked = st.session_state[S + "backend"]
    link.notes.append(f"{asked} is not available here ({links.plain(cuda_reason)}); using NumPy.")
    st.session_state[S + "backend"] = "NumPy"

st.title("Batch")
st.caption(
    "B rows, each with its own number of drafts (a ragged batch padded to K), verified in one call of "
    "specviz.verifiers.verify. Row b tests num_draft[b] drafts and takes its bonus from target row num_draft[b]."
)
link.show_notes()

# --- inputs ----------------------------------------------------------------------------------------
c1, c2, c3 = st.columns(3, gap="large")
with c3:
    source = st.radio("p and q", batch_demo.SOURCES, key=S + "source", horizontal=True)
    no_model = batch_model.missing() if source == MODEL else None
    model_V = batch_model.vocab() if source == MODEL and no_model is None else None
    conc = st.number_input("Dirichlet concentration", min_value=0.01, max_value=100.0, step=0.1, key=S + "conc",
                           disabled=source != "random Dirichlet",
                           help="small: spiky rows, low acceptance; large: near-uniform rows, high acceptance",
                           )  # fmt: skip
    drafter = st.selectbox("Drafter (real model)", list(batch_model.DRAFTERS), format_func=batch_model.DRAFTERS.get,
                           key=S + "drafter", disabled=source != MODEL)  # fmt: skip
    seed = st.number_input("Seed", min_value=0, max_value=2**32 - 1, step=1, key=S + "seed")
    backend = st.radio("Backend shown", available, key=S + "backend", horizontal=True)
    if not cuda_ok:
        st.checkbox("PyTorch CUDA", value=False, disabled=True, help=cuda_reason, key=S + "cuda_off")
        off = "PyTorch CUDA is" if "PyTorch CPU" in available else "The PyTorch backends are"
        st.caption(f"{off} disabled: {links.plain(cuda_reason)}.")
with c1:
    B_asked = st.number_input("Rows B", min_value=1, step=1, key=S + "B")
    K = st.slider("Padded drafts K", 0, batch_demo.MAX_K, key=S + "K")
    V = st.number_input("Vocabulary V", min_value=1, step=1, key=S + "V", disabled=source == MODEL,
                        help=f"the real model's rows have its vocabulary, {model_V:,}" if model_V else None,
                        )  # fmt: skip
with c2:
    counts = st.radio("Drafts per row", batch_demo.COUNT_MODES, key=S + "counts", horizontal=True)
    typed = st.text_input("Typed draft counts (comma list, one per row)", key=S + "typed",
                          placeholder="e.g. 4, 2, 0, 3", disabled=counts != "typed",
                          max_chars=limits.MAX_COUNTS_CHARS)  # fmt: skip
    size = batch_demo.cap_batch(int(B_asked), K, int(V), model_V)
    count_error = None
    if counts == "typed":
        try:
            batch_demo.parse_counts(typed, size.B, K)
        except InputError as e:
            count_error = links.error_text(e)  # quotes the typed text: escaped
            st.error(count_error, icon=":material/error:")
if no_model:
    st.warning(f"{no_model}. The random rows work without it.", icon=":material/download:")

values = {"B": int(B_asked), "K": K, "counts": counts, "typed": typed, "V": int(V), "source": source,
          "conc": float(conc), "drafter": drafter, "seed": int(seed), "backend": backend}  # fmt: skip
link.show_in_link(values)  # the address bar shows what is shown
B = size.B
link.show_caps(size.notes)

# The batch is verified (validated) on NumPy and timed on every available backend, keeping each
# backend's first rows: "Backend shown" switches between them without running the batch again.
run_key = (B, K, size.V, counts, typed, source, float(conc), drafter, int(seed), "NumPy", tuple(available))
blocked = count_error is not None or no_model is not None
clicked = st.button("Run batch", type="primary", disabled=blocked, key=S + "run")
if clicked or (link.from_link and not blocked):  # a link restores the result too, within the caps above
    st.session_state[S + "ran"] = run_key

# --- results ---------------------------------------------------------------------------------------
if st.session_state.get(S + "ran") != run_key:
    st.info("Set up a batch and click **Run batch**.")
    raise flow.EndOfPage  # st.stop() would drop the Next link

try:
    report = serving.heavy(("batch", *run_key), lambda: run_batch(*run_key), st.empty())  # bounded, shared
except InputError as e:
    st.error(links.error_text(e), icon=":material/error:")
    raise flow.EndOfPage from None  # st.stop() would drop the Next link

for col, (label, value, help_) in zip(st.columns(4), batch_demo.metrics(report), strict=True):
    col.metric(label, value, help=help_)
if not report.tested:
    st.caption("No draft was tested (every row has 0 drafts), so there is no acceptance rate: each row emits its "
               "bonus.")  # fmt: skip

shown = min(B, MAX_ROWS_SHOWN)
head = report.heads.get(backend, report.head)
strips = figures.token_strips(head, report.num_draft[:shown], report.head_draft_tokens, max_rows=shown)
st.plotly_chart(presenter.chart(strips, st.session_state), key=S + "strips")
st.caption(batch_demo.strips_caption(B, shown, backend))
if report.texts:
    st.dataframe(pd.DataFrame(report.texts), hide_index=True, key=S + "texts")
    st.caption(batch_demo.MODEL_CAPTION)

h, t = st.columns(2, gap="large")
hist = figures.accepted_histogram(report.num_accepted, K, report.num_draft)
h.plotly_chart(presenter.chart(hist, st.session_state), key=S + "hist")
bars = figures.timing_bar([x.backend for x in report.timings], [x.rows_per_second for x in report.timings])
t.plotly_chart(presenter.chart(bars, st.session_state), key=S + "timing")
# The table spans the page: in half of it the last column ("agrees", the correctness check) was cut.
number = st.column_config.NumberColumn
st.dataframe(pd.DataFrame(batch_demo.timing_rows(report)), hide_index=True, column_config={
    "median time (ms)": number(format="%.3f"), "rows per second": number(format="%,.0f"),
    "torch threads": st.column_config.TextColumn(help="torch.get_num_threads() during the timing"),
    # "medium" holds "3 of 16 rows differ"; "large" pushed the column past the table's edge at 150 % zoom
    "agrees": st.column_config.TextColumn(help="same tokens as NumPy on the same uniforms", width="medium"),
})  # fmt: skip
st.caption(batch_demo.timing_caption(report))

settings = {**values, "B": B, "V": size.V}  # what ran, after the caps
d1, d2 = st.columns(2)
d1.download_button("Download this run (JSON)", results.to_json(results.batch_record(report, settings)),
                   file_name="specviz-batch.json", mime="application/json", key=S + "download_json",
                   help="settings, summary, timings with threads, and the rows shown")  # fmt: skip
d2.download_button(f"Download the first {shown} rows (CSV)", results.to_csv(results.batch_rows(report)),
                   file_name="specviz-batch-rows.csv", mime="text/csv", key=S + "download_csv")  # fmt: skip
