"""specviz: the Streamlit entry point. Page config, shared state, navigation; no math here."""

from __future__ import annotations

import streamlit as st

st.set_page_config(page_title="specviz: lossless speculative sampling", page_icon="🎯", layout="wide")

PAGES = [
    st.Page("pages/home.py", title="Home", icon="🏠", default=True),
]

st.navigation(PAGES).run()
