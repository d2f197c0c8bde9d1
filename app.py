"""specviz: the Streamlit entry point. Page config, shared sidebar, navigation; no math here."""

from __future__ import annotations

import logging

import streamlit as st

from specviz import InputError
from specviz.app import links, presenter, serving

log = logging.getLogger("specviz.app")
ESCAPED_KEY = "app.escaped_input_error"

# Presenter mode is read before the page config: it decides whether the sidebar starts collapsed.
if links.PRESENT_KEY not in st.session_state:
    st.session_state[links.PRESENT_KEY] = links.decode_params(st.query_params.to_dict(), links.APP_PARAMS).values[
        links.PRESENT
    ]
present = presenter.presenting(st.session_state)
st.set_page_config(
    page_title="specviz: lossless speculative sampling",
    page_icon="🎯",
    layout="wide",
    initial_sidebar_state="collapsed" if present else "auto",
)

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
    st.Page("app_pages/verifiers.py", title="Verifiers", icon=":material/gavel:", url_path="verifiers"),
    st.Page("app_pages/settings.py", title="Sampling settings", icon=":material/tune:", url_path="sampling-settings"),
    st.Page("app_pages/interview.py", title="Interview walkthrough", icon=":material/school:", url_path="interview"),
    st.Page("app_pages/text.py", title="Real text", icon=":material/edit_note:", url_path="real-text"),
    st.Page("app_pages/one_round.py", title="One round, step by step", icon=":material/casino:", url_path="one-round"),
    st.Page("app_pages/find_bug.py", title="Find the bug", icon=":material/search:", url_path="find-the-bug"),
]

page = st.navigation(PAGES)
links.start_run(st.session_state, page.url_path)
with st.sidebar:
    st.toggle(
        "Presenter mode",
        key=links.PRESENT_KEY,
        help="Larger text and charts for a projector, results before inputs; kept in the link as ?present=1.",
    )
    st.caption(
        "Every page keeps its settings while you move between pages, and shows them in the address bar, seed "
        "included: copy the link to reproduce a demo exactly."
    )
st.html(f"<style>{presenter.stylesheet(present)}</style>")
if st.query_params.get(links.PRESENT) != ("1" if present else None):  # pages without settings keep it too
    if present:
        st.query_params[links.PRESENT] = "1"
    else:
        st.query_params.pop(links.PRESENT, None)

try:
    page.run()
except InputError as e:  # a page that let one through: shown like any other input error, and logged
    log.warning("InputError escaped page %s: %s", page.url_path, e)
    st.session_state[ESCAPED_KEY] = str(e)  # the safety tests assert that no page sets this
    st.error(links.error_text(e), icon=":material/error:")
finally:  # also after st.stop(): the page's modules are imported by now
    # Streamlit collects garbage after every run, walking every object of the process (0.2 s here):
    # the first run of each page freezes the imported heap out of that walk (specviz/app/serving.py).
    serving.freeze_heap(page.url_path)
# Anything else is Streamlit's: it logs the traceback on the server and, with client.showErrorDetails
# = "none" in .streamlit/config.toml, shows visitors a generic message without paths or code.
