"""Helpers the AppTest page tests share: open a page of the app, rerun it, read what it shows."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]


def open_page(page: str | None, query: dict[str, str] | None = None, *, timeout: float = 60) -> AppTest:
    """app.py run once, then ``page`` (None: Home) with ``query`` as its link; no exception allowed."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    at.run()
    if page:
        at.switch_page(page)
        at.query_params.clear()
        at.query_params.update(query or {})
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def rerun(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def metric(at: AppTest, label: str) -> str:
    """The value of the one metric with this label."""
    values = [m.value for m in at.metric if m.label == label]
    assert len(values) == 1, [m.label for m in at.metric]
    return values[0]


def shown_table(at: AppTest, column: str):
    """The one table (st.table or st.dataframe) with this column, as a DataFrame, or None if none shows it.

    Found by what it holds, not by position: a page may draw a short table as either.
    """
    found = [t.value for t in [*at.table, *at.dataframe] if column in t.value.columns]
    assert len(found) <= 1, f"{len(found)} tables have a column {column!r}"
    return found[0] if found else None


def texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def link(at: AppTest) -> dict[str, str]:
    """The address bar's query parameters, one value each."""
    return {k: v[-1] if isinstance(v, list) else v for k, v in at.query_params.items()}


def plotly_array(v) -> np.ndarray:
    """A trace array as Plotly serializes it: a list, or base64 bytes with a dtype (and a shape, if 2-D)."""
    if isinstance(v, dict) and "bdata" in v:
        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"])
        shape = v.get("shape")
        return a.reshape([int(n) for n in str(shape).split(",")]) if shape else a
    return np.asarray(v)
