"""Settings in the link: each page's settings as query parameters, decoded safely.

A page lists its settings as :class:`Param` objects, seeds its widgets from the link with
:func:`init_state`, and writes what is shown back with :func:`show_in_link`, so a shared
link reproduces a demo, seed included, and the page shows the same settings when the user
comes back to it in the same session. A bad value in a link never stops a page: it falls
back to the default with a note saying what was wrong. Text that came from a user is shown
through :func:`plain` (Markdown-escaped), never as Markdown.

A page does all of that through :func:`open_page`, its preamble: the link read into session state,
its notes shown where the page wants them (:meth:`PageLink.show_notes`), caps applied with a note
(:meth:`PageLink.cap`), and the settings shown written back (:meth:`PageLink.show_in_link`).

The rule for links (docs/tour.md): a link reproduces everything the page showed, results
included, except a result that answers a prediction the visitor has not made yet. A page names
the results a click shows as :class:`Result` objects; :meth:`PageLink.show_in_link` marks each
one shown with ``?name=1``, and :meth:`PageLink.restores` says whether the link this run arrived
with asks for it. A result with ``answers_prediction`` is never marked, so a link to it restores
the settings and the prediction step, and the result appears once the visitor runs it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from ..errors import InputError
from .limits import MAX_TABLE_V
from .limits import cap as _cap

SHOWN_CHARS = 40  # a bad link value is quoted up to this length in its note


@dataclass(frozen=True)
class Param:
    """One setting of a page that lives in the link as ``?name=text``."""

    name: str
    default: Any
    parse: Callable[[str], Any]  # text -> value; raises ValueError when the text is not valid
    expected: str  # what a valid value looks like, for the note shown on a bad link
    fmt: Callable[[Any], str] = str


def int_param(name: str, default: int, low: int, high: int | None = None) -> Param:
    def parse(text: str) -> int:
        v = int(text)
        if v < low or (high is not None and v > high):
            raise ValueError(text)
        return v

    where = f"in [{low}, {high}]" if high is not None else f">= {low}"
    return Param(name, default, parse, f"an integer {where}")


def float_param(name: str, default: float, low: float, high: float) -> Param:
    def parse(text: str) -> float:
        v = float(text)
        if not low <= v <= high:  # also rejects NaN
            raise ValueError(text)
        return v

    return Param(name, default, parse, f"a number in [{low:g}, {high:g}]", lambda v: f"{v:g}")


def choice_param(name: str, default: str, choices: Sequence[str]) -> Param:
    options = tuple(choices)

    def parse(text: str) -> str:
        if text not in options:
            raise ValueError(text)
        return text

    return Param(name, default, parse, "one of " + ", ".join(repr(c) for c in options))


def format_floats(values: Sequence[float]) -> str:
    """Comma list with enough digits to round-trip what a user typed; NaN for empty cells."""
    return ",".join("nan" if v is None or v != v else f"{float(v):.12g}" for v in values)


def parse_floats(text: str) -> list[float]:
    """A comma list of numbers (``nan`` or an empty item for an empty cell)."""
    items = [s.strip() for s in str(text).split(",")]
    if len(items) > MAX_TABLE_V:
        raise ValueError(text)
    return [float(s) if s else float("nan") for s in items]


def floats_param(name: str, default: Sequence[float]) -> Param:
    return Param(name, list(default), parse_floats, f"a comma list of at most {MAX_TABLE_V} numbers", format_floats)


def int_list_param(name: str, allowed: Sequence[int], max_items: int) -> Param:
    """A comma list of at most ``max_items`` integers, each one of ``allowed`` (e.g. the sample sizes clicked)."""
    options = tuple(allowed)

    def parse(text: str) -> list[int]:
        items = [int(s) for s in text.split(",")] if text.strip() else []
        if len(items) > max_items or any(v not in options for v in items):
            raise ValueError(text)
        return items

    what = f"a comma list of at most {max_items} of " + ", ".join(str(v) for v in options)
    return Param(name, [], parse, what, lambda v: ",".join(str(int(x)) for x in v))


def text_param(name: str, default: str, max_len: int = 2000) -> Param:
    def parse(text: str) -> str:
        if len(text) > max_len:
            raise ValueError(text)
        return text

    return Param(name, default, parse, f"text of at most {max_len} characters")


class Decoded(NamedTuple):
    values: dict[str, Any]
    notes: list[str]  # one sentence per link setting that was not valid and fell back to its default


def decode_params(query: Mapping[str, Any], params: Sequence[Param]) -> Decoded:
    """Settings from a link's query parameters; bad or missing ones take their defaults."""
    values, notes = {}, []
    for p in params:
        raw = query.get(p.name)
        if isinstance(raw, list):  # a repeated key: the last one wins, as in st.query_params
            raw = raw[-1] if raw else None
        if raw is None:
            values[p.name] = p.default
            continue
        try:
            values[p.name] = p.parse(str(raw))
        except (ValueError, TypeError, OverflowError):
            values[p.name] = p.default
            text = str(raw)
            shown = plain(repr(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"))
            notes.append(  # Markdown, with the link's text escaped: st.warning shows it as typed
                f"The link's setting {p.name}={shown} is not valid (expected {p.expected}); "
                f"using the default {p.fmt(p.default)}."
            )
    return Decoded(values, notes)


def encode_params(values: Mapping[str, Any], params: Sequence[Param]) -> dict[str, str]:
    """Query parameters that reproduce ``values`` (every setting, so defaults may change safely)."""
    return {p.name: p.fmt(values[p.name]) for p in params if p.name in values}


# --- one session: settings kept across navigation -------------------------------------------------
#
# Streamlit forgets a widget's value (and deletes its session-state key) at the end of a run in
# which the widget was not drawn, so a page's settings would reset every time the user visits
# another page. A page's shown settings are therefore also kept under a key no widget owns
# (KEPT + prefix + name), written by show_in_link each run, and put back by init_state when the
# user arrives on the page again. The app calls start_run once per run so that a page can tell
# an arrival from a rerun of itself.

PAGE_KEY = "links.page"  # the url path of the page this run shows
ARRIVED_KEY = "links.arrived"  # whether the previous run showed another page
WRITTEN_KEY = "links.written"  # the query parameters the app last put in the address bar
KEPT = "links.kept."  # + prefix + name: the value last shown, kept while the page is not drawn
PRESENT = "present"  # the app-wide presenter setting: ?present=1
PRESENT_KEY = "app.present"  # its session-state key (the sidebar toggle)


def bool_param(name: str, default: bool) -> Param:
    def parse(text: str) -> bool:
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off", ""):
            return False
        raise ValueError(text)

    return Param(name, default, parse, "1 or 0", lambda v: "1" if v else "0")


APP_PARAMS = [bool_param(PRESENT, False)]  # settings of the whole app, in every page's link


def read_present(query: Mapping[str, Any], state: MutableMapping[str, Any]) -> None:
    """Seed the presenter toggle from the link (``?present=1``) the first time a session runs."""
    if PRESENT_KEY not in state:
        state[PRESENT_KEY] = decode_params(query, APP_PARAMS).values[PRESENT]


def write_present(query: MutableMapping[str, Any], present: bool) -> None:
    """Keep ``?present=1`` in the address bar while presenting (pages without settings keep it too)."""
    if query.get(PRESENT) != ("1" if present else None):
        if present:
            query[PRESENT] = "1"
        else:
            query.pop(PRESENT, None)


def start_run(state: MutableMapping[str, Any], page: str) -> None:
    """Record which page this run shows; call once per run, before the page runs."""
    state[ARRIVED_KEY] = state.get(PAGE_KEY) != page
    state[PAGE_KEY] = page


def init_state(
    query: Mapping[str, Any],
    state: MutableMapping[str, Any],
    params: Sequence[Param],
    prefix: str,
    keep: Sequence[str] = (),
) -> list[str]:
    """Seed ``state[prefix + name]`` for each setting; returns notes about bad link values used.

    Within a page (reruns of it), settings the session holds are left alone. When the user
    arrives on the page (after :func:`start_run` saw another page), the page shows what it
    showed last time in this session, kept by :func:`show_in_link`, unless the address bar
    carries a link other than the one the app wrote itself (a link from another page or
    ``st.switch_page`` with query parameters): then the link wins, as in a fresh session.
    ``keep`` names further state keys (widgets that are not in the link, e.g. a prediction)
    kept across navigation the same way. Without :func:`start_run` (no app around the page)
    only settings missing from ``state`` are seeded from the link.
    """
    tracked = PAGE_KEY in state
    arrived = tracked and bool(state.get(ARRIVED_KEY, True))
    given = link_given(query, state, params)
    query = dict(query) if given or not arrived else {}  # not the link the app wrote for another page
    notes = []
    for p in params:
        key = prefix + p.name
        if arrived and not given and KEPT + key in state:
            state[key] = state[KEPT + key]
        elif given or key not in state:
            decoded = decode_params(query, [p])
            state[key] = decoded.values[p.name]
            notes += decoded.notes
    for name in keep:
        key = prefix + name
        if arrived and not given and KEPT + key in state:
            state[key] = state[KEPT + key]
        elif tracked and key in state:
            state[KEPT + key] = state[key]
    return notes


def link_given(query: Mapping[str, Any], state: Mapping[str, Any], params: Sequence[Param]) -> bool:
    """Whether this run arrives on the page with a link of its own (not the one the app last wrote).

    True for a fresh session opened from a link naming any of ``params``, and for navigation
    that carries query parameters (``st.page_link``/``st.switch_page`` with ``query_params``);
    False within a page and for plain sidebar navigation.
    """
    arrived = PAGE_KEY in state and bool(state.get(ARRIVED_KEY, True))
    return arrived and dict(query) != state.get(WRITTEN_KEY) and any(p.name in query for p in params)


def seen(state: Mapping[str, Any], key: str) -> bool:
    """Whether this session has shown the setting ``key`` (drawn now, or kept while away)."""
    return key in state or KEPT + key in state


def show_in_link(
    query_params: MutableMapping[str, Any],
    state: MutableMapping[str, Any],
    values: Mapping[str, Any],
    params: Sequence[Param],
    prefix: str,
) -> dict[str, str]:
    """Put what the page shows in the address bar (with the app-wide settings) and keep it.

    ``query_params`` is ``st.query_params`` (anything with ``to_dict`` and ``from_dict``, or a
    plain dict); ``values`` are the settings as shown, e.g. the table as typed. Returns the link.
    """
    link = encode_params(values, params)
    if state.get(PRESENT_KEY):
        link[PRESENT] = "1"
    current = query_params.to_dict() if hasattr(query_params, "to_dict") else dict(query_params)
    if current != link:  # the address bar reproduces what is shown, typos included
        if hasattr(query_params, "from_dict"):
            query_params.from_dict(link)
        else:
            query_params.clear()
            query_params.update(link)
    state[WRITTEN_KEY] = dict(link)
    for p in params:
        if p.name in values:
            state[KEPT + prefix + p.name] = values[p.name]
    return link


# --- user text, shown safely -----------------------------------------------------------------------

# Every character that can start Markdown syntax in the middle of a line, as Streamlit renders it:
# links and images ([ ] ( ) !), HTML (< > &), LaTeX ($), colour directives and icons (: [ ] { }),
# code, emphasis and strike (` * _ ~), tables (|), headings (#) and the escape itself.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#!|~$:@&])")
# GFM autolinks are found in the parsed text, after escapes are resolved, so "http\://host",
# "www\.host" and "me\@host" would still become links. An invisible zero-width space before each
# ':' and '@' and after "www" breaks the patterns (scheme:, www., local@domain) without changing
# what the reader sees.
ZWSP = "\u200b"
_AUTOLINK = re.compile(r"(?i)(?=\\[:@])|(?<=www)")


def plain(text: Any) -> str:
    """``text`` shown as typed by Streamlit's Markdown: no links, images, HTML, LaTeX or colours."""
    return _AUTOLINK.sub(ZWSP, _MARKDOWN_SPECIAL.sub(r"\\\1", str(text)))


def error_text(error: BaseException) -> str:
    """An error's message for ``st.error``, with what the user typed shown as plain text."""
    if isinstance(error, InputError):
        return f"{error.argument}: expected {error.expected}, got {plain(error.got)}"
    return plain(str(error))


@dataclass(frozen=True)
class Result:
    """A result a page shows after a click (a test run, a measurement), and whether a link restores it."""

    name: str  # its mark in the link, ?name=1, while the page shows it
    answers_prediction: bool = False  # a link never shows it: the visitor predicts, then runs

    @property
    def marked(self) -> bool:
        """Whether a link carries this result (the one rule: every result but a prediction's answer)."""
        return not self.answers_prediction


def result_marks(results: Sequence[Result]) -> list[Param]:
    """The link's marks of the results a link carries, as settings (``?name=1``, absent when not shown)."""
    return [bool_param(r.name, False) for r in results if r.marked]


# --- a page's preamble ---------------------------------------------------------------------------

LINK_ICON = ":material/link:"  # beside a note about a value in the link
CUT_ICON = ":material/content_cut:"  # beside a note about a cap


class Ui(Protocol):
    """What the preamble uses of the ``streamlit`` module, which the page hands in (specviz never imports it)."""

    query_params: Any
    session_state: Any

    def warning(self, body: str, *, icon: str | None = None) -> Any: ...


@dataclass
class PageLink:
    """One run of a page with settings: where they came from, and the notes to show about them."""

    ui: Ui
    params: Sequence[Param]
    prefix: str
    query: dict[str, Any]  # the link this run arrived with
    from_link: bool  # arrived with a link of its own (see :func:`link_given`)
    notes: list[str]  # about bad values in the link, each replaced by its default
    results: Sequence[Result] = ()  # the results a click shows on this page

    def restores(self, result: Result) -> bool:
        """Whether this run arrived with a link that showed ``result``: the page shows it again without a click.

        Never for a result that answers a prediction (:attr:`Result.answers_prediction`).
        """
        if result not in self.results:
            raise InputError("result", "one of the results given to open_page", result.name)
        marks = decode_params(self.query, result_marks([result])).values
        return self.from_link and bool(marks.get(result.name, False))

    def show_notes(self) -> None:
        """The link's notes, as warnings, where the page calls this (under its title, usually)."""
        for note in self.notes:
            self.ui.warning(note, icon=LINK_ICON)

    def cap(self, value: int, limit: int, what: str, why: str) -> int:
        """``min(value, limit)``, with a warning saying so where the cap applies (:func:`limits.cap`)."""
        capped, note = _cap(int(value), limit, what, why)
        if note:
            self.ui.warning(note, icon=CUT_ICON)
        return capped

    def show_caps(self, notes: Sequence[str]) -> None:
        """Warnings for caps applied elsewhere (e.g. :func:`specviz.app.batch_demo.cap_batch`'s notes)."""
        for note in notes:
            self.ui.warning(note, icon=CUT_ICON)

    def show_in_link(self, values: Mapping[str, Any], shown: Sequence[Result] = ()) -> None:
        """Write the settings shown, and a mark for each result ``shown``, into the address bar (:func:`show_in_link`).

        A result that answers a prediction gets no mark: a link to it shows the settings, not the answer.
        """
        unknown = [r.name for r in shown if r not in self.results]
        if unknown:
            raise InputError("shown", "results given to open_page", ", ".join(unknown))
        marks = {r.name: True for r in shown if r.marked}
        params = [*self.params, *(p for p in result_marks(self.results) if p.name in marks)]
        show_in_link(self.ui.query_params, self.ui.session_state, {**values, **marks}, params, self.prefix)


def open_page(
    ui: Ui, params: Sequence[Param], prefix: str, keep: Sequence[str] = (), results: Sequence[Result] = ()
) -> PageLink:
    """A page's preamble: its settings seeded from the link into session state (:func:`init_state`).

    Call it before the page draws a widget of its settings; show the notes with
    :meth:`PageLink.show_notes`. ``results`` are the results a click shows on the page
    (:meth:`PageLink.restores` tells whether the link asks for one).
    """
    query = ui.query_params.to_dict()
    from_link = link_given(query, ui.session_state, params)  # before init_state records the link
    notes = init_state(query, ui.session_state, params, prefix, keep)
    return PageLink(ui, params, prefix, query, from_link, notes, tuple(results))
