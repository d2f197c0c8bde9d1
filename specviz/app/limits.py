"""Caps on what a user may ask the app for: inputs that would take minutes or exhaust memory.

Every limit the pages apply is here, with its reason, so that one place says how much the
app accepts. A page lowers a value with :func:`cap` and shows the sentence it returns.
"""

from __future__ import annotations

from typing import NamedTuple

from ..errors import InputError

MAX_TABLE_V = 64  # rows of the editable p/q table: more is unreadable on a projector
MAX_POSITION_K = 8  # drafts per row on the one-position page
# Batch page, per click. The click builds p and q (float32, B*(K+1)*V and B*K*V), verifies them
# once, then times every backend (a reference run, a warm-up and >= 3 repeats each), so its cost
# grows with the elements (memory, generation) and with the rows (per-row work in every call).
# B = 20,000,000 rows at V = 1 took 85-134 s and 6 GB; at these caps a click takes about 1-2 s on
# one quiet core and peaks near 0.4 GB (benchmarks/load.py --batch-cap measures it).
MAX_BATCH_ELEMENTS = 4_000_000  # B*(K+1)*V: 16 MB per float32 tensor
MAX_BATCH_ROWS = 10_000  # B: every timed call pays per row; the results a page caches are per row
MAX_PROVE_N = 1_000_000  # sequences in one Bug-lab test: ~3 s on a laptop core
MAX_TOKENS_N = 200_000  # rows per measured point on the tokens page (17 points, two verifiers)
# Typed text, checked before it is parsed: splitting and reading a 10 MB box took 5.3 s of server
# CPU before the 64-value cap could refuse it. The text inputs carry the same max_chars, which
# Streamlit also enforces on the server (it truncates what a crafted message sends).
MAX_TYPED_CHARS = 2_000  # a typed p, q or logits: MAX_TABLE_V values of up to 30 characters each
MAX_COUNTS_CHARS = 5 * MAX_BATCH_ROWS  # typed draft counts: one per row, "16, " is 4 characters


class Capped(NamedTuple):
    value: int
    note: str | None  # why the value was lowered; None when it was not


def cap(value: int, limit: int, what: str, why: str) -> Capped:
    """``min(value, limit)``, with a sentence saying so when the cap applies."""
    if value <= limit:
        return Capped(int(value), None)
    return Capped(int(limit), f"{what} capped at {limit:,} (you asked for {value:,}): {why}.")


def check_text(text: str, name: str, limit: int = MAX_TYPED_CHARS) -> str:
    """``text`` itself when it has at most ``limit`` characters; an InputError before any parsing otherwise."""
    text = str(text)
    if len(text) > limit:
        raise InputError(name, f"at most {limit:,} characters of text", f"{len(text):,} characters")
    return text
