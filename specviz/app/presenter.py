"""Presenter mode: the app sized for a projector at the back of a classroom.

Pure functions, no Streamlit: :func:`for_projector` restyles a Plotly figure (larger fonts
everywhere, room for them in the margins), :func:`chart` applies it when the session is in
presenter mode, and :func:`stylesheet` is the page CSS the app injects: wrapping instead of
truncating always, and in presenter mode larger text and results before inputs. :func:`plot`,
:func:`metrics` and :func:`say` draw through the ``streamlit`` module or a column the page hands in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import plotly.graph_objects as go

from .links import PRESENT_KEY

SCALE = 1.3  # fonts a figure sets itself, relative to the figure as built for a laptop screen
CHART_FONT_PX = 19  # body text of a chart (figures.FONT is 14 px; Streamlit draws ticks at 12 px)
TICK_FONT_PX = 17  # axis tick labels whose size the figure leaves unset
LEGEND_FONT_PX = 16  # two entries per line under a half-width chart
TITLE_FONT_PX = 20  # long titles ("Kept drafts plus replacements, ...") still fit a half-width chart
MAX_HEIGHT_PX = 340  # the decomposition chart fits under the title, heading and metrics in 720 px
MARGIN_TOP_PX = 48  # the title above the plot at the larger font (the legend goes below)
SUBTITLE_ROOM_PX = 30  # a subplot title's line under the figure's title (they overlapped at 48 px)
ROW_FIGURE_MIN_HEIGHT = 700  # taller figures are lists of rows (token strips): scaled, never capped
ROW_FIGURE = "rows"  # layout.meta = {"kind": "rows"}: a list of rows at any height (16 token strips at 600 px)


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
    # Below the plot: at projector sizes a legend above it wraps onto several lines and runs into the title.
    out.update_layout(
        legend=dict(font_size=_scaled(lay.legend.font.size, LEGEND_FONT_PX), orientation="h", x=0, xanchor="left"),
        legend_yref="container",
        legend_y=0,
        legend_yanchor="bottom",
    )
    out.update_layout(hoverlabel_font_size=_scaled(lay.hoverlabel.font.size, CHART_FONT_PX))
    out.for_each_xaxis(lambda ax: _axis(ax))
    out.for_each_yaxis(lambda ax: _axis(ax))
    for ann in out.layout.annotations:
        ann.font.size = _scaled(ann.font.size, CHART_FONT_PX)
    for trace in out.data:
        font = getattr(trace, "textfont", None)
        if font is not None and font.size is not None:
            font.size = _scaled(font.size, CHART_FONT_PX)
    # Subplot titles sit just above their plots, under the figure's title: give them a line of their own.
    subtitles = any(a.yref == "paper" and a.y is not None and a.y >= 0.99 for a in out.layout.annotations)
    out.update_layout(margin=dict(t=MARGIN_TOP_PX + (SUBTITLE_ROOM_PX if subtitles else 0)))
    height = lay.height
    if height is not None:
        meta = lay.meta if isinstance(lay.meta, dict) else {}
        tall = height > ROW_FIGURE_MIN_HEIGHT or meta.get("kind") == ROW_FIGURE
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


def plot(ui: Any, fig: go.Figure, key: str, where: Any = None) -> None:
    """``fig`` drawn as :func:`chart` styles it, in ``where`` (a column) or on the page (``ui``: streamlit)."""
    (ui if where is None else where).plotly_chart(chart(fig, ui.session_state), key=key)


MESSAGE_ICONS = {"success": ":material/check:", "error": ":material/error:", "info": ":material/functions:"}


def say(ui: Any, messages: Sequence[tuple[str, str]]) -> None:
    """Each (kind, Markdown) as ``ui.success``, ``ui.error`` or ``ui.info`` with its icon (``ui``: streamlit)."""
    for kind, text in messages:
        getattr(ui, kind)(text, icon=MESSAGE_ICONS[kind])


class Metric(NamedTuple):
    """One number as a page shows it (``st.metric``): its label, its value, the line under it (plain), its help."""

    label: str
    value: str
    delta: str | None = None  # a note beside the value, without colour or arrow: not a change
    help: str | None = None


def metrics(columns: Sequence[Any], shown: Sequence[Metric]) -> None:
    """Each metric in the next of ``columns`` (columns of the page), round and round."""
    for i, m in enumerate(shown):
        off = {} if m.delta is None else {"delta_color": "off", "delta_arrow": "off"}
        columns[i % len(columns)].metric(m.label, m.value, m.delta, help=m.help, **off)


# Rules for every session: text never ends in "…" and columns too narrow for their content wrap onto
# the next line (150 % zoom leaves 853 CSS pixels): metric values, button labels and metric labels
# wrap; a column holding a table editor keeps room for its p and q columns.
MIN_COLUMN_PX = 220  # narrower columns wrap onto a new line rather than clip their content
MIN_TABLE_COLUMN_PX = 340  # the p/q editor: index, p and q at their default widths
_BASE_CSS = """
[data-testid="stMetricValue"] > div,
[data-testid="stMetricLabel"] div,
[data-testid="stMetricLabel"] p,
.stButton button p,
.stButton button div { white-space: normal !important; overflow: visible !important;
  text-overflow: clip !important; overflow-wrap: anywhere; }
[data-testid="stHorizontalBlock"] { flex-wrap: wrap; row-gap: 0.5rem; }
[data-testid="stColumn"] { min-width: min(%(col)dpx, 100%%); }
[data-testid="stHorizontalBlock"] [data-testid="stHorizontalBlock"] [data-testid="stColumn"]
  { min-width: min(%(inner)dpx, 100%%); }
[data-testid="stColumn"]:has([data-testid="stDataFrame"]) { min-width: min(%(table)dpx, 100%%); }
"""
# Presenter mode: Streamlit draws its elements with rem units, so a larger root font scales text,
# widgets and spacing together; on a page with results the block holding the inputs moves after
# them (`order`), so that after a click the verdict and the numbers are the first thing on screen.
ROOT_FONT_PX = 20  # Streamlit's 16 px root; its 14 px text becomes 17.5 px
_PRESENTER_CSS = """
html { font-size: %(root)dpx; }
[data-testid="stMainBlockContainer"] { padding-top: 4rem; padding-bottom: 2rem; max-width: 100%%; }
h1 { font-size: 1.8rem !important; padding-top: 0 !important; padding-bottom: 0.25rem !important; }
h2, h3 { padding-top: 0.25rem !important; padding-bottom: 0.25rem !important; }
[data-testid="stMetricValue"] { font-size: 2rem; }
%(after)s { order: 1; }
%(last)s { order: 2; }
"""
# Widgets (by their Streamlit key) whose block holds a page's inputs and goes after its results.
INPUT_KEYS = ("buglab.run", "batch.B")  # Batch keeps its Run button (a lone element) on top
TOGGLE_HELP = "Larger text and charts for a projector, results before inputs; kept in the link as ?present=1."
SIDEBAR_NOTE = (
    "Every page keeps its settings while you move between pages, and shows them in the address bar, seed "
    "included: copy the link to reproduce a demo exactly."
)
NEXT_KEY = "app.next"  # the container of the "Next: ..." link app.py puts under every page: it stays last


def _key_class(key: str) -> str:
    """The CSS class Streamlit gives a keyed element: st-key-, then the key with [^a-zA-Z0-9_-] as '-'."""
    return "st-key-" + re.sub(r"[^a-zA-Z0-9_-]", "-", key.strip())


def stylesheet(present: bool) -> str:
    """The page CSS (a ``<style>`` body): the no-truncation rules, and the presenter rules when ``present``."""
    css = _BASE_CSS % {"col": MIN_COLUMN_PX, "inner": MIN_COLUMN_PX // 2, "table": MIN_TABLE_COLUMN_PX}
    if present:
        top = '[data-testid="stMainBlockContainer"] > [data-testid="stVerticalBlock"] > '
        after = ",\n".join(f"{top}:has(.{_key_class(k)})" for k in INPUT_KEYS)
        last = f"{top}.{_key_class(NEXT_KEY)}, {top}:has(.{_key_class(NEXT_KEY)})"
        css += _PRESENTER_CSS % {"root": ROOT_FONT_PX, "after": after, "last": last}
    return css
