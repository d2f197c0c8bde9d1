"""A negative control for tests/test_browser_projector.py: grids whose text is cut, and one that fits.

Each cut grid is exactly as wide as its columns, so that none grows to fill the page.
"""

import streamlit as st

Text, Number = st.column_config.TextColumn, st.column_config.NumberColumn
HEAD = "a header far wider than its column"

st.title("Cut tables")
# 30 rows in a grid 8 rows tall: the cut cell (row 25) is below the rows the grid draws.
rows = [{"n": i, "text": "a sentence far wider than its column" if i == 25 else "short"} for i in range(30)]
st.dataframe(rows, hide_index=True, height=300, width=402,
             column_config={"n": Number(width=300), "text": Text(width=100)})  # fmt: skip
st.dataframe([{HEAD: 1, "n": 2}], hide_index=True, width=402,
             column_config={HEAD: Number(width=60), "n": Number(width=340)})  # fmt: skip
st.dataframe([{f"column {i}": i for i in range(12)}], hide_index=True,
             column_config={f"column {i}": Number(width="large") for i in range(12)})  # fmt: skip
st.dataframe([{"fits": "yes", "also fits": 2}], hide_index=True)
