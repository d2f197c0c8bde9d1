"""The project's prose for the tests that check it: README.md, then every page of docs/.

A figure stated anywhere in them is found by the same regex wherever a section moved to; each
page is read whole, so a section's order inside its page is kept.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def text() -> str:
    """Every page, one after the other, as written."""
    return "\n\n".join(p.read_text() for p in PAGES)


def one_line() -> str:
    """:func:`text` with all whitespace runs made one space: wrapping does not matter."""
    return " ".join(text().split())
