"""specviz: the Streamlit entry point. Page config, shared sidebar, navigation; no math here."""

from __future__ import annotations

import logging

import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner.script_cache import ScriptCache

from specviz import InputError
from specviz.app import flow, links, presenter, serving, warm

log = logging.getLogger("specviz.app")
warm.start()  # once per process: torch and the court's first enumeration load in the background, not in a click
ESCAPED_KEY = "app.escaped_input_error"
SCRIPTS_WARNED = "app.warned_script_cache"
CLEAR_CACHE_REFUSED = "A visitor sent clear_cache: refused (the caches are every visitor's); their own state cleared"


def refuse_clear_cache() -> None:
    """Stop one visitor from clearing every visitor's caches.

    Streamlit's ``clear_cache`` back-message (the "Clear cache" menu item, hidden here by
    client.toolbarMode but still accepted by the server) clears st.cache_data and
    st.cache_resource for the whole process. No config option turns it off in Streamlit 1.67,
    so the one method that handles it (AppSession._handle_clear_cache_request) is replaced,
    once per process, by one that clears only the sender's session state.
    tests/test_serve.py sends the message over the websocket and checks the caches survive.
    """
    from streamlit.runtime.app_session import AppSession

    if getattr(AppSession._handle_clear_cache_request, "refuses", False):
        return

    def own_state_only(self: AppSession) -> None:
        log.warning(CLEAR_CACHE_REFUSED)
        self._session_state.clear()

    own_state_only.refuses = True  # type: ignore[attr-defined]
    AppSession._handle_clear_cache_request = own_state_only  # type: ignore[method-assign]


refuse_clear_cache()
serving.return_freed_memory()  # once per process (cached): freed NumPy arrays go back to the system
# Compiled page scripts stay compiled when the last visitor leaves (no watcher: an edit needs a restart).
_scripts = getattr(Runtime.instance(), "_script_cache", None) if Runtime.exists() else None
if isinstance(_scripts, ScriptCache):  # not under streamlit.testing's AppTest, which compiles the pages itself
    serving.keep_compiled_pages(_scripts, st.get_option("server.fileWatcherType"))
elif Runtime.exists() and type(Runtime.instance()) is Runtime and not st.session_state.get(SCRIPTS_WARNED):
    st.session_state[SCRIPTS_WARNED] = True  # once per session: Streamlit renamed what keep_compiled_pages needs
    log.warning("Streamlit's Runtime has no _script_cache: page scripts are compiled again for lone visitors")

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
except flow.EndOfPage:  # the page's st.stop(): nothing more from it, the Next link still follows
    pass
except InputError as e:  # a page that let one through: shown like any other input error, and logged
    log.warning("InputError escaped page %s: %s", page.url_path, e)
    st.session_state[ESCAPED_KEY] = str(e)  # the safety tests assert that no page sets this
    st.error(links.error_text(e), icon=":material/error:")
except serving.QueueFull as e:  # more visitors wait for heavy work than the queue holds: come back later
    st.warning(str(e), icon=":material/hourglass_top:")
finally:  # also after st.stop(): the page's modules are imported by now
    # Every page ends with a link to the next lesson (the order lives in specviz/app/flow.py): presenter mode
    # hides the sidebar, so this is the one-click way on.
    lesson = flow.next_lesson(page.url_path)
    following = None if lesson is None else {p.url_path: p for p in PAGES}.get(lesson.url_path)
    if following is not None:
        with st.container(key=presenter.NEXT_KEY):  # last on screen in presenter mode too (see presenter.py)
            st.divider()
            st.page_link(following, label=f"Next: {following.title}", icon=":material/arrow_forward:")
    # Streamlit's collection after every run is off (runner.postScriptGC in .streamlit/config.toml): a full
    # collection walks every visitor's objects, so here it runs at most every serving.GC_INTERVAL_S, and the
    # first run of each page freezes the imported heap out of that walk (specviz/app/serving.py).
    serving.freeze_heap(page.url_path)
    serving.collect_garbage()
# Anything else is Streamlit's: it logs the traceback on the server and, with client.showErrorDetails
# = "none" in .streamlit/config.toml, shows visitors a generic message without paths or code.
