"""specviz: the Streamlit entry point. Page config, shared sidebar, navigation; no math here."""

from __future__ import annotations

import streamlit as st

st.set_page_config(page_title="specviz: lossless speculative sampling", page_icon="🎯", layout="wide")

# Titles and url paths are part of the app's interface: shared links and the browser tests use them.
# The page files live in app_pages/, not pages/: Streamlit treats a folder named pages/ beside the
# entry point as a legacy multipage app and answers a shared link such as /bug-lab with a
# "Page not found" dialog (over a correct page) before st.navigation has run.
PAGES = [
    st.Page("app_pages/home.py", title="Home", icon=":material/home:", default=True),
    st.Page("app_pages/exact.py", title="Why it is exact", icon=":material/balance:", url_path="why-exact"),
    st.Page("app_pages/batch.py", title="Batch", icon=":material/view_column:", url_path="batch"),
    st.Page("app_pages/bug_lab.py", title="Bug lab", icon=":material/bug_report:", url_path="bug-lab"),
    st.Page("app_pages/tokens.py", title="Tokens per step", icon=":material/trending_up:", url_path="tokens-per-step"),
]

page = st.navigation(PAGES)
with st.sidebar:
    st.caption(
        "Every page keeps its settings, seed included, in the address bar: copy the link to reproduce a demo exactly."
    )
page.run()
