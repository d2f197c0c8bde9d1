"""specviz: the Streamlit entry point. Page config, shared sidebar, navigation; no math here."""

from __future__ import annotations

import logging

import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.app_session import AppSession

from specviz import InputError
from specviz.app import flow, links, presenter, serving

serving.install(AppSession, Runtime, st.get_option("server.fileWatcherType"))  # once per process, before any page
log = logging.getLogger("specviz.app")
ESCAPED_KEY = "app.escaped_input_error"  # the safety tests assert that no page sets this

links.read_present(st.query_params.to_dict(), st.session_state)  # before the page config: sidebar collapsed?
present = presenter.presenting(st.session_state)
st.set_page_config(
    page_title="specviz: lossless speculative sampling",
    page_icon="🎯",
    layout="wide",
    initial_sidebar_state="collapsed" if present else "auto",
)
PAGES = {p.url_path: st.Page(p.file, **p.page_options()) for p in flow.LESSONS}  # the sidebar: class order
page = st.navigation(list(PAGES.values()))
links.start_run(st.session_state, page.url_path)
with st.sidebar:
    st.toggle("Presenter mode", key=links.PRESENT_KEY, help=presenter.TOGGLE_HELP)
    st.caption(presenter.SIDEBAR_NOTE)
st.html(f"<style>{presenter.stylesheet(present)}</style>")
links.write_present(st.query_params, present)

try:
    page.run()
except flow.EndOfPage:  # the page's st.stop(): nothing more from it, the Next link still follows
    pass
except InputError as e:  # a page that let one through: shown like any other input error, and logged
    log.warning("InputError escaped page %s: %s", page.url_path, e)
    st.session_state[ESCAPED_KEY] = str(e)
    st.error(links.error_text(e), icon=":material/error:")
except serving.QueueFull as e:  # more visitors wait for heavy work than the queue holds: come back later
    st.warning(str(e), icon=":material/hourglass_top:")
finally:  # also after st.stop(). Presenter mode hides the sidebar: the Next link is the one-click way on.
    lesson = flow.next_lesson(page.url_path)
    if lesson is not None:
        with st.container(key=presenter.NEXT_KEY):  # last on screen in presenter mode too (see presenter.py)
            st.divider()
            st.page_link(PAGES[lesson.url_path], label=f"Next: {lesson.title}", icon=":material/arrow_forward:")
    serving.after_run(page.url_path)  # collection rate-limited; the imported heap frozen out of it (serving.py)
# Anything else is Streamlit's: it logs the traceback on the server and, with client.showErrorDetails
# = "none" in .streamlit/config.toml, shows visitors a generic message without paths or code.
