"""Home: what speculative sampling is, the rule, and where to start."""

from __future__ import annotations

import streamlit as st

st.title("specviz: lossless speculative sampling")
st.markdown(
    """
A cheap **drafter** proposes a few tokens; the expensive **target** model scores them all in
one pass; a **verifier** keeps a prefix of the drafts and adds one token of its own. Done
right, the text that comes out is distributed *exactly* as if the target had sampled it one
token at a time: speed without changing the model's answer.
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
