"""Batch: the real batched verifier on ragged rows, its token strips, and backend timings."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from specviz import InputError
from specviz.app import batch_demo, figures, flow, limits, links, presenter, results, serving

S = "batch."
MAX_K = 16  # the K slider's upper end; a link asking for more falls back to the default
MAX_ROWS_SHOWN = 32  # token strips beyond this are unreadable; the histogram covers every row
PARAMS = [
    links.int_param("B", 16, 1, 10**9),
    links.int_param("K", 4, 0, MAX_K),
    links.choice_param("counts", batch_demo.COUNT_MODES[0], batch_demo.COUNT_MODES),
    links.text_param("typed", ""),
    links.int_param("V", 32, 1, 10**9),
    links.choice_param("source", batch_demo.SOURCES[0], batch_demo.SOURCES),
    links.float_param("conc", 1.0, 0.01, 100.0),
    links.int_param("seed", 0, 0, 2**32 - 1),
    links.choice_param("backend", batch_demo.BACKENDS[0], batch_demo.BACKENDS),
]


@st.cache_data(show_spinner=False, max_entries=1)
def cuda_status() -> tuple[bool, str]:
    return batch_demo.cuda_status()


# Bounded: at most 16 results of <= MAX_BATCH_ROWS rows each (specviz.app.limits), each kept an hour.
@st.cache_data(show_spinner="Building, verifying and timing the batch…", max_entries=16, ttl=3600)
def run_batch(
    B: int,
    K: int,
    V: int,
    counts: str,
    typed: str,
    source: str,
    conc: float,
    seed: int,
    backend: str,
    time_on: tuple[str, ...],
) -> batch_demo.BatchReport:
    num_draft = batch_demo.draft_counts(counts, B, K, seed, typed)
    return batch_demo.run_batch_demo(B, K, V, num_draft, source, conc, seed, backend, time_on, max_rows=MAX_ROWS_SHOWN)


link = links.open_page(st, PARAMS, S)
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
with c1:
    B_asked = st.number_input("Rows B", min_value=1, step=1, key=S + "B")
    K = st.slider("Padded drafts K", 0, MAX_K, key=S + "K")
    V = st.number_input("Vocabulary V", min_value=1, step=1, key=S + "V")
with c2:
    counts = st.radio("Drafts per row", batch_demo.COUNT_MODES, key=S + "counts", horizontal=True)
    typed = st.text_input(
        "Typed draft counts (comma list, one per row)",
        key=S + "typed",
        placeholder="e.g. 4, 2, 0, 3",
        disabled=counts != "typed",
        max_chars=limits.MAX_COUNTS_CHARS,
    )
    size = batch_demo.cap_batch(int(B_asked), K, int(V))
    count_error = None
    if counts == "typed":
        try:
            batch_demo.parse_counts(typed, size.B, K)
        except InputError as e:
            count_error = links.error_text(e)  # quotes the typed text: escaped
            st.error(count_error, icon=":material/error:")
with c3:
    source = st.radio("p and q", batch_demo.SOURCES, key=S + "source", horizontal=True)
    conc = st.number_input(
        "Dirichlet concentration",
        min_value=0.01,
        max_value=100.0,
        step=0.1,
        key=S + "conc",
        disabled=source != "random Dirichlet",
        help="small: spiky rows, low acceptance; large: near-uniform rows, high acceptance",
    )
    seed = st.number_input("Seed", min_value=0, max_value=2**32 - 1, step=1, key=S + "seed")
    backend = st.radio("Backend shown", available, key=S + "backend", horizontal=True)
    if not cuda_ok:
        st.checkbox("PyTorch CUDA", value=False, disabled=True, help=cuda_reason, key=S + "cuda_off")
        off = "PyTorch CUDA is" if "PyTorch CPU" in available else "The PyTorch backends are"
        st.caption(f"{off} disabled: {links.plain(cuda_reason)}.")

values = {
    "B": int(B_asked),
    "K": K,
    "counts": counts,
    "typed": typed,
    "V": int(V),
    "source": source,
    "conc": float(conc),
    "seed": int(seed),
    "backend": backend,
}
link.show_in_link(values)  # the address bar shows what is shown

B = size.B
link.show_caps(size.notes)

# The batch is verified (validated) on NumPy and timed on every available backend, keeping each
# backend's first rows: "Backend shown" switches between them without running the batch again.
run_key = (B, K, size.V, counts, typed, source, float(conc), int(seed), "NumPy", tuple(available))
clicked = st.button("Run batch", type="primary", disabled=count_error is not None, key=S + "run")
if clicked or (link.from_link and count_error is None):  # a link restores the result too, within the caps above
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

m = st.columns(4)
m[0].metric("rows verified", f"{B:,}")
m[1].metric("mean drafts per row", f"{report.num_draft.mean():.2f}")
m[2].metric(
    "acceptance rate (accepted / tested)",
    batch_demo.rate_text(report.accepted, report.tested),
    help=f"{report.accepted:,} accepted of {report.tested:,} drafts whose coin counted",
)
m[3].metric("mean tokens per row", f"{report.num_tokens.mean():.3f}")
if not report.tested:
    st.caption(
        "No draft was tested (every row has 0 drafts), so there is no acceptance rate: each row emits its bonus."
    )

shown = min(B, MAX_ROWS_SHOWN)
head = report.heads.get(backend, report.head)
st.plotly_chart(
    presenter.chart(
        figures.token_strips(head, report.num_draft[:shown], report.head_draft_tokens, max_rows=shown), st.session_state
    ),
    key=S + "strips",
)
st.caption(
    (f"Showing the first {shown} of {B:,} rows. " if B > shown else "")
    + "Cells show the emitted token; a draft in parentheses was never reached (after a rejection its coin does "
    "not count). Hover a cell for its coin u and p/q. Backend shown: " + backend + "."
)

h, t = st.columns(2, gap="large")
with h:
    hist = figures.accepted_histogram(report.num_accepted, K, report.num_draft)
    st.plotly_chart(presenter.chart(hist, st.session_state), key=S + "hist")
with t:
    st.plotly_chart(
        presenter.chart(
            figures.timing_bar([x.backend for x in report.timings], [x.rows_per_second for x in report.timings]),
            st.session_state,
        ),
        key=S + "timing",
    )
# The table spans the page: in half of it the last column ("agrees", the correctness check) was cut.
timings = pd.DataFrame(batch_demo.timing_rows(report))
st.dataframe(
    timings,
    hide_index=True,
    column_config={
        "median time (ms)": st.column_config.NumberColumn(format="%.3f"),
        "rows per second": st.column_config.NumberColumn(format="%,.0f"),
        "torch threads": st.column_config.TextColumn(help="torch.get_num_threads() during the timing"),
        # "medium" holds "3 of 16 rows differ"; "large" pushed the column past the table's edge at 150 % zoom
        "agrees": st.column_config.TextColumn(help="same tokens as NumPy on the same uniforms", width="medium"),
    },
)
st.caption(batch_demo.timing_caption(report))

settings = {**values, "B": B, "V": size.V}  # what ran, after the caps
d1, d2 = st.columns(2)
d1.download_button(
    "Download this run (JSON)",
    results.to_json(results.batch_record(report, settings)),
    file_name="specviz-batch.json",
    mime="application/json",
    key=S + "download_json",
    help="settings, summary, timings with threads, and the rows shown",
)
d2.download_button(
    f"Download the first {shown} rows (CSV)",
    results.to_csv(results.batch_rows(report)),
    file_name="specviz-batch-rows.csv",
    mime="text/csv",
    key=S + "download_csv",
)
