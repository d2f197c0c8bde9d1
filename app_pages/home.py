"""Home: what speculative sampling is, the rule, what each page teaches, and where to start."""

from __future__ import annotations

import streamlit as st

from specviz.app import flow

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

st.subheader("What each page teaches, in class order")
lessons = flow.LESSONS[1:]  # every page but this one; each page ends with a "Next" link in this order
half = (len(lessons) + 1) // 2
for column, part in zip(st.columns(2), (lessons[:half], lessons[half:]), strict=True):
    with column:
        for lesson in part:
            st.page_link(lesson.file)
            st.caption(lesson.teaches)

st.subheader("Where to start")
st.markdown(
    """
- **Teaching or learning it:** *One round, step by step*, then *Why it is exact* with the textbook preset, then
  *Bug lab* with `resample_from_p` (predict first!), then `shared_uniform` for the lesson about weak tests.
- **Preparing for an interview:** the derivation at the bottom of *Why it is exact*, every bug in *Bug lab* (each
  has the one-paragraph reason it breaks), and the 2.533 tokens of the textbook example in *Tokens per step*.
- **Checking an implementation:** *Batch* for ragged rows and backend timings; from Python,
  `specviz.proof.prove.run_case(...)` or `python -m specviz prove` put your own verifier through the same test.
"""
)
