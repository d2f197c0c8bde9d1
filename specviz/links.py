"""Settings in the link: each page's settings as query parameters, decoded safely.

A page lists its settings as :class:`Param` objects, seeds its widgets from the link with
:func:`init_state`, and writes what is shown back with :func:`encode_params`, so a shared
link reproduces a demo, seed included. A bad value in a link never stops a page: it falls
back to the default with a note saying what was wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .limits import MAX_TABLE_V

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
            shown = text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"
            notes.append(
                f"The link's setting {p.name}={shown!r} is not valid (expected {p.expected}); "
                f"using the default {p.fmt(p.default)}."
            )
    return Decoded(values, notes)


def encode_params(values: Mapping[str, Any], params: Sequence[Param]) -> dict[str, str]:
    """Query parameters that reproduce ``values`` (every setting, so defaults may change safely)."""
    return {p.name: p.fmt(values[p.name]) for p in params if p.name in values}


def init_state(
    query: Mapping[str, Any], state: MutableMapping[str, Any], params: Sequence[Param], prefix: str
) -> list[str]:
    """Seed ``state[prefix + name]`` from the link for settings the session does not hold yet.

    Returns the notes about bad link values that were used. Settings already in ``state``
    (the user has been on the page this session) are left alone.
    """
    notes = []
    for p in params:
        if prefix + p.name in state:
            continue
        decoded = decode_params(query, [p])
        state[prefix + p.name] = decoded.values[p.name]
        notes += decoded.notes
    return notes
