"""Caps on what a user may ask the app for: inputs that would take minutes or exhaust memory.

Every limit the pages apply is here, with its reason, so that one place says how much the
app accepts. A page lowers a value with :func:`cap` and shows the sentence it returns.
"""

from __future__ import annotations

from typing import NamedTuple

MAX_TABLE_V = 64  # rows of the editable p/q table: more is unreadable on a projector
MAX_POSITION_K = 8  # drafts per row on the one-position page
MAX_BATCH_ELEMENTS = 20_000_000  # B*(K+1)*V: 80 MB per float32 tensor, a few seconds to generate
MAX_PROVE_N = 1_000_000  # sequences in one Bug-lab test: ~3 s on a laptop core
MAX_TOKENS_N = 200_000  # rows per measured point on the tokens page (17 points, two verifiers)


class Capped(NamedTuple):
    value: int
    note: str | None  # why the value was lowered; None when it was not


def cap(value: int, limit: int, what: str, why: str) -> Capped:
    """``min(value, limit)``, with a sentence saying so when the cap applies."""
    if value <= limit:
        return Capped(int(value), None)
    return Capped(int(limit), f"{what} capped at {limit:,} (you asked for {value:,}): {why}.")
