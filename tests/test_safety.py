"""Safe to serve to a class: user text never renders as Markdown, no input crashes a page,
visitors see no tracebacks, the server listens on loopback, and every click is bounded.

The browser half (no element points anywhere a user typed, no request leaves for it) is in
tests/test_browser.py; here AppTest reads the Markdown each page sends for hostile links.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from specviz import InputError
from specviz.app import batch_demo, limits, links

pytestmark = pytest.mark.heavy  # hostile links on every page: left out of the quick subset

ROOT = Path(__file__).resolve().parents[1]
HOST = "evil.invalid"  # a reserved name: nothing resolves it, so a test can never reach a real host
PAYLOADS = [
    f"![x](http://{HOST}/pixel.png)",  # an image: the browser would fetch it
    f"[click me](http://{HOST}/a)",  # a link
    f"<img src=http://{HOST}/i.png>",  # raw HTML
    "$\\color{red}{x}$ :red[red] :material/home:",  # LaTeX, a colour directive, an icon
    f"see www.{HOST} or me@{HOST}",  # GFM autolinks need no brackets at all
]
# Markdown that would be live if a payload reached the page unescaped.
LIVE = re.compile(
    r"(?<!\\)!\[|(?<!\\)\]\(|(?<!\\)<img|(?<!\\)\$\\color|(?<!\\):red\[|(?<!\\):material"
    rf"|(?<!\\)://{re.escape(HOST)}|(?i:www)\.{re.escape(HOST)}|(?<!\\)@{re.escape(HOST)}"
)


def live_markdown(body: str) -> list[str]:
    """Markdown constructs from the payloads that are not escaped in ``body``."""
    return LIVE.findall(body)


def test_negative_control_the_check_sees_every_payload_unescaped():
    for payload in PAYLOADS:
        assert live_markdown(f"The link's setting bug={payload!r} is not valid"), payload


@pytest.mark.parametrize("payload", PAYLOADS)
def test_plain_escapes_every_payload_and_keeps_its_text(payload):
    shown = links.plain(payload)
    assert live_markdown(shown) == []
    # CommonMark drops the backslash before ASCII punctuation and the zero-width spaces are invisible:
    # the reader sees exactly what was typed.
    assert re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", shown).replace(links.ZWSP, "") == payload


def test_error_text_escapes_only_what_the_user_typed():
    e = InputError("draft counts", "counts in [0, K = 4]", f"'{PAYLOADS[0]}' for row 0")
    text = links.error_text(e)
    assert text.startswith("draft counts: expected counts in [0, K = 4], got ") and live_markdown(text) == []


# --- every page under hostile links ----------------------------------------------------------------

PAGE_PARAMS = {
    "app_pages/exact.py": ["p", "q", "bug", "K", "seed"],
    "app_pages/batch.py": ["B", "K", "V", "source", "conc", "seed", "backend", "typed"],
    "app_pages/bug_lab.py": ["bug", "scenario", "n", "seed"],
    "app_pages/tokens.py": ["a", "K", "c", "n", "seed"],
    "app_pages/verifiers.py": ["source", "p", "q", "K", "k", "seed"],
    "app_pages/settings.py": ["source", "preset", "seed", "tl", "dl", "rT", "rk", "rp", "dT", "dk", "dp", "K", "knob"],
    "app_pages/interview.py": ["step", "ans", "a", "c", "B", "K"],
    "app_pages/text.py": ["prompt", "K", "T", "seed", "rounds", "n", "bug"],
    "app_pages/one_round.py": ["preset", "K", "seed", "rounds", "event", "compare", "mistake"],
    "app_pages/find_bug.py": ["mistake", "n", "seed"],
}


def rendered_markdown(at: AppTest) -> list[str]:
    """Every text the page sent that the browser renders as Markdown."""
    bodies = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "info", "warning", "error", "success"):
        bodies += [str(e.value) for e in getattr(at, kind)]
    bodies += [f"{m.label}\n{m.value}" for m in at.metric]
    return bodies


def open_page(page: str, query: dict[str, str]) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page(page)
    at.query_params.update(query)
    at.run()
    return at


@pytest.mark.parametrize("page", list(PAGE_PARAMS))
@pytest.mark.parametrize("payload", PAYLOADS)
def test_hostile_link_values_are_shown_as_text_and_crash_nothing(page, payload):
    query = dict.fromkeys(PAGE_PARAMS[page], payload)
    if page == "app_pages/batch.py":
        query["counts"] = "typed"  # the typed counts reach the parser, and its error quotes them
    at = open_page(page, query)
    assert not at.exception, [e.value for e in at.exception]
    assert "app.escaped_input_error" not in at.session_state
    bodies = rendered_markdown(at)
    assert any("is not valid" in b for b in bodies)  # the bad values were seen and reported
    assert [(b, live_markdown(b)) for b in bodies if live_markdown(b)] == []


@pytest.mark.parametrize(
    "page, query, expected",
    [
        ("app_pages/exact.py", {"p": "1e308,1e308,0,0"}, "p: expected"),
        ("app_pages/exact.py", {"q": "nan,inf,-inf,1e400"}, "q: expected"),
        ("app_pages/batch.py", {"counts": "typed", "typed": "1e308,-1,nan,[]", "B": "4"}, "draft counts: expected"),
    ],
)
def test_numbers_out_of_range_are_input_errors_on_the_page(page, query, expected):
    at = open_page(page, query)
    assert not at.exception, [e.value for e in at.exception]
    assert "app.escaped_input_error" not in at.session_state
    assert any(expected in str(e.value) for e in at.error), [e.value for e in at.error]


# --- serving --------------------------------------------------------------------------------------


def test_config_serves_loopback_and_hides_tracebacks():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["address"] == "127.0.0.1"
    assert set(config["server"]["allowedHosts"]) == {"localhost", "127.0.0.1"}
    assert config["client"]["showErrorDetails"] == "none"


@pytest.mark.parametrize("B, K, V", [(20_000_000, 0, 1), (10**9, 16, 10**9), (10**6, 4, 32_000), (3, 16, 10**7)])
def test_batch_caps_bound_rows_and_elements(B, K, V):
    size = batch_demo.cap_batch(B, K, V)
    assert 1 <= size.B <= limits.MAX_BATCH_ROWS and size.B * (K + 1) * size.V <= limits.MAX_BATCH_ELEMENTS
    assert size.notes  # the user is told
    with pytest.raises(InputError, match="batch: expected B <= 10,000"):
        batch_demo.make_batch(B, K, V, np.zeros(B, dtype=np.int64) if B < 10**7 else np.zeros(1), "peaked", 1.0, 0)


def test_every_cached_page_function_has_a_memory_bound():
    """Every st.cache_data / st.cache_resource in a page has max_entries, or takes no argument (one entry)."""
    found = 0
    for path in sorted((ROOT / "app_pages").glob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, ast.FunctionDef):
                continue
            for dec in fn.decorator_list:
                if isinstance(dec, ast.Call) and getattr(dec.func, "attr", None) in ("cache_data", "cache_resource"):
                    found += 1
                    takes_args = bool(fn.args.args or fn.args.kwonlyargs or fn.args.vararg)
                    kw = {k.arg for k in dec.keywords}
                    assert "max_entries" in kw or not takes_args, f"{path.name}:{fn.lineno} {fn.name} is unbounded"
    assert found >= 4


@pytest.mark.parametrize("payload", PAYLOADS)
def test_the_typed_p_entry_shows_hostile_text_as_text(payload):
    at = open_page("app_pages/exact.py", {})
    at.text_input(key="exact.p_text").input(f"0.5 {payload}")
    at.button(key="exact.use_text").click().run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [str(e.value) for e in at.error]
    assert any(e.startswith("p: expected") for e in errors)  # refused, with a message quoting the input
    assert [(e, live_markdown(e)) for e in errors if live_markdown(e)] == []
    # What it says it did echoes only items that parsed as numbers, so no Markdown reaches it.
    assert all(live_markdown(str(s.value)) == [] for s in at.success)


def test_an_input_error_a_page_lets_through_is_shown_and_flagged_not_raised(monkeypatch):
    from specviz.proof import theory

    def broken(*args, **kwargs):
        raise InputError("p", "a distribution", f"'{PAYLOADS[0]}'")

    monkeypatch.setattr(theory, "decompose", broken)  # called by "Why it is exact" outside any try
    at = open_page("app_pages/exact.py", {})
    assert not at.exception  # the visitor sees an error box, not a traceback
    assert "app.escaped_input_error" in at.session_state  # and the hostile-link tests would notice
    errors = [str(e.value) for e in at.error]
    assert any(e.startswith("p: expected a distribution, got") for e in errors)
    assert [(e, live_markdown(e)) for e in errors if live_markdown(e)] == []
