"""Presenter mode: the app sized for a projector at the back of a classroom.

Pure functions, no Streamlit: :func:`for_projector` restyles a Plotly figure (larger fonts
everywhere, room for them in the margins), :func:`chart` applies it when the session is in
presenter mode, and :func:`stylesheet` is the page CSS the app injects in that mode (larger
text, wrapping instead of truncating, results before inputs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go

from .links import PRESENT_KEY

SCALE = 1.3  # fonts a figure sets itself, relative to the figure as built for a laptop screen
CHART_FONT_PX = 19  # body text of a chart (figures.FONT is 14 px; Streamlit draws ticks at 12 px)
TICK_FONT_PX = 17  # axis tick labels whose size the figure leaves unset
TITLE_FONT_PX = 20  # long titles ("Kept drafts plus replacements, ...") still fit a half-width chart
MAX_HEIGHT_PX = 470  # a chart and its title fit under a one-line heading in a 720 px tall window
MARGIN_TOP_PX = 110  # the title and a horizontal legend above the plot at the larger fonts
ROW_FIGURE_MIN_HEIGHT = 700  # taller figures are lists of rows (token strips): scaled, never capped


def _scaled(size: float | None, default: float) -> float:
    return default if size is None else round(size * SCALE)


def for_projector(fig: go.Figure) -> go.Figure:
    """A copy of ``fig`` with larger fonts everywhere and a height that fits a 720 px window.

    Unset fonts get the sizes above; fonts the figure sizes itself (e.g. 10 px tick labels
    under 27 rotated categories) are scaled by :data:`SCALE` rather than set to one size, so
    that dense axes stay readable but do not overlap. Figures taller than
    :data:`ROW_FIGURE_MIN_HEIGHT` hold one row per item and grow with their fonts instead of
    being capped.
    """
    out = go.Figure(fig)
    lay = out.layout
    out.update_layout(font_size=_scaled(lay.font.size, CHART_FONT_PX))
    out.update_layout(title_font_size=_scaled(lay.title.font.size, TITLE_FONT_PX), title_automargin=True)
    out.update_layout(legend_font_size=_scaled(lay.legend.font.size, CHART_FONT_PX))
    out.update_layout(hoverlabel_font_size=_scaled(lay.hoverlabel.font.size, CHART_FONT_PX))
    out.for_each_xaxis(lambda ax: _axis(ax))
    out.for_each_yaxis(lambda ax: _axis(ax))
    for ann in out.layout.annotations:
        ann.font.size = _scaled(ann.font.size, CHART_FONT_PX)
    for trace in out.data:
        font = getattr(trace, "textfont", None)
        if font is not None and font.size is not None:
            font.size = _scaled(font.size, CHART_FONT_PX)
    margin = lay.margin
    out.update_layout(margin=dict(t=max(margin.t or 0, MARGIN_TOP_PX)))
    height = lay.height
    if height is not None:
        tall = height > ROW_FIGURE_MIN_HEIGHT
        out.update_layout(height=round(height * SCALE) if tall else min(height, MAX_HEIGHT_PX))
    return out


def _axis(ax: Any) -> None:
    ax.tickfont.size = _scaled(ax.tickfont.size, TICK_FONT_PX)
    ax.title.font.size = _scaled(ax.title.font.size, CHART_FONT_PX)
    ax.automargin = True  # larger tick labels push the plot inwards instead of being clipped


def presenting(state: Mapping[str, Any]) -> bool:
    """Whether the session (``st.session_state``) is in presenter mode."""
    return bool(state.get(PRESENT_KEY, False))


def chart(fig: go.Figure, state: Mapping[str, Any]) -> go.Figure:
    """``fig`` as the session should see it: restyled for a projector in presenter mode."""
    return for_projector(fig) if presenting(state) else fig


# Streamlit draws its elements with rem units; a larger root font scales text, widgets and
# spacing together. Metric values, button labels and column headers wrap instead of ending in
# "…", columns too narrow for their content wrap onto the next line (150 % zoom leaves 853 CSS
# pixels), and on a page with results the block holding the inputs moves after them
# (`order`), so that after a click the verdict and the numbers are the first thing on screen.
ROOT_FONT_PX = 20  # Streamlit's 16 px root; its 14 px text becomes 17.5 px
MIN_COLUMN_PX = 300  # narrower columns wrap onto a new line rather than clip their content
_CSS = """
html { font-size: %(root)dpx; }
[data-testid="stMainBlockContainer"] { padding-top: 4rem; padding-bottom: 2rem; max-width: 100%%; }
h1 { font-size: 2rem !important; padding-top: 0 !important; }
[data-testid="stMetricValue"] > div,
[data-testid="stMetricLabel"] div,
[data-testid="stMetricLabel"] p,
.stButton button p,
.stButton button div { white-space: normal !important; overflow: visible !important;
  text-overflow: clip !important; overflow-wrap: anywhere; }
[data-testid="stMetricValue"] { font-size: 2rem; }
[data-testid="stHorizontalBlock"] { flex-wrap: wrap; row-gap: 0.5rem; }
[data-testid="stColumn"] { min-width: min(%(col)dpx, 100%%); }
[data-testid="stHorizontalBlock"] [data-testid="stHorizontalBlock"] [data-testid="stColumn"]
  { min-width: min(%(inner)dpx, 100%%); }
%(after)s { order: 1; }
"""
# Widgets (by their Streamlit key) whose block holds a page's inputs and goes after its results.
INPUT_KEYS = ("buglab.run", "batch.B", "batch.run")


def _key_class(key: str) -> str:
    """The CSS class Streamlit gives a keyed element: st-key-, then the key with [^a-zA-Z0-9_-] as '-'."""
    return "st-key-" + re.sub(r"[^a-zA-Z0-9_-]", "-", key.strip())


def stylesheet() -> str:
    """The CSS of presenter mode (a ``<style>`` body)."""
    top = '[data-testid="stMainBlockContainer"] > [data-testid="stVerticalBlock"] > '
    after = ",\n".join(f"{top}:has(.{_key_class(k)})" for k in INPUT_KEYS)
    return _CSS % {"root": ROOT_FONT_PX, "col": MIN_COLUMN_PX, "inner": MIN_COLUMN_PX // 2, "after": after}
