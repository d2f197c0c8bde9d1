"""Home: what speculative sampling is, the rule, what each page teaches, and where to start."""

from __future__ import annotations

import streamlit as st

st.title("specviz: lossless speculative sampling")
st.markdown(
    """
1. A cheap **drafter** proposes a few tokens, each sampled from its distribution $q$.
2. The expensive **target** model scores all of them in one forward pass, giving $p$ at every position.
3. A **verifier** keeps drafts while a fresh coin says yes, with probability $\\min(1, p/q)$.
4. At the first rejection it emits one token of its own from what $q$ under-proposes; if every draft survives it adds a
   **bonus** token from $p$.
5. Done right, the text that comes out is distributed *exactly* as if the target had sampled it one token at a time:
   more tokens per target pass, the same answer.
"""
)

st.subheader("The rule")
st.markdown(
    """
For drafts $x_0, \\dots, x_{j-1}$ drawn from $q$ and target distributions $p_0, \\dots, p_j$:

1. accept $x_i$ with probability $\\min\\left(1, p_i(x_i) / q_i(x_i)\\right)$, with a fresh uniform per position;
2. stop at the first rejection;
3. there, emit one token from the residual $\\max(0, p_i - q_i)$, normalized;
4. if every draft survives, emit a **bonus** token from $p_j$.
"""
)

st.subheader("What each page teaches")
left, right = st.columns(2)
with left:
    st.page_link("app_pages/exact.py", label="Why it is exact", icon=":material/balance:")
    st.caption(
        "One position, your own p and q. The accepted part min(p, q) plus the replaced part (1 − a)·residual stack up "
        "to p exactly; switch on a bug and watch the law move; sample 1, 1,000 or 100,000 times and trace one coin."
    )
    st.page_link("app_pages/batch.py", label="Batch", icon=":material/view_column:")
    st.caption(
        "A real batched verifier: rows with their own number of drafts, NumPy against PyTorch (and CUDA where there "
        "is a GPU) on the same uniforms, token strips showing what was accepted, replaced and added."
    )
with right:
    st.page_link("app_pages/bug_lab.py", label="Bug lab", icon=":material/bug_report:")
    st.caption(
        "The classic mistakes, one step swapped each. Predict whether the end-to-end chi-square test will catch it, "
        "then run it; see why a first-token-only test misses the shared-coin bug."
    )
    st.page_link("app_pages/tokens.py", label="Tokens per step", icon=":material/trending_up:")
    st.caption(
        "What the rule buys: expected tokens per target pass against K, with and without the bonus, measured points "
        "beside the closed form, and a speedup model with the drafter's cost."
    )

st.subheader("Where to start")
st.markdown(
    """
- **Teaching or learning it:** *Why it is exact* with the reference preset, then *Bug lab* with `resample_from_p`
  (predict first!), then `shared_uniform` for the lesson about weak tests.
- **Preparing for an interview:** the derivation at the bottom of *Why it is exact*, every bug in *Bug lab* (each
  has the one-paragraph reason it breaks), and the 2.533 tokens of the reference example in *Tokens per step*.
- **Checking an implementation:** *Batch* for ragged rows and backend timings; from Python,
  `specviz.proof.prove.run_case(...)` or `python -m specviz prove` put your own verifier through the same test.
"""
)
