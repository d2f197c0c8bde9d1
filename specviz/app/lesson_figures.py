"""Figures of the lesson pages beyond :mod:`specviz.app.figures`: one round's coins, twenty histograms to tell
apart, and the Verifiers page's verdict bars.

# K drafts, V vocabulary, M panels

Pure functions returning go.Figure, in the colors of :mod:`specviz.app.figures`; the traces
hold the computed numbers (tests read them back).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from . import plotly_json
from .figures import ACCEPTED, BONUS, EMPIRICAL, FONT, LAW, NOT_REACHED, REPLACED, TARGET, _layout
from .one_round import NOT_YET, STATES
from .results import tv_text

REJECTED = "#c62828"  # the coin landed at or above p/q


def _coin_label(s: Any) -> str:
    if s.state == NOT_YET:
        return f"draft {s.position + 1}: token {s.draft}<br>not tested yet"
    whose = "" if s.coin == s.position else f"<br>(draft {s.coin + 1}'s coin)" if s.coin >= 0 else "<br>(no draft's)"
    return f"draft {s.position + 1}: token {s.draft}<br>u = {s.u:.2f}, {s.state}{whose}"


def coin_lines(steps: Sequence[Any], title: str) -> go.Figure:
    """One number line [0, 1) per draft: green below min(1, p/q) (accept), red above it (reject),
    and the coin u the verifier read as a black diamond (with whose coin it was when it is another
    draft's). Positions the verifier never tested are greyed out: their coins never count; positions
    Step has not reached yet are greyed out with no coin. ``steps`` are
    :class:`specviz.app.one_round.CoinStep`.
    """
    fig = plotly_json.blank()
    rows = list(steps)[::-1]  # draft 1 on top
    labels = [_coin_label(s) for s in rows]
    dim = [s.state in (STATES[2], NOT_YET) for s in rows]
    fig.add_bar(y=labels, x=[s.threshold for s in rows], orientation="h", name="accept: u < p/q",
                marker_color=[NOT_REACHED if d else ACCEPTED for d in dim],
                customdata=[[s.p, s.q] for s in rows],
                hovertemplate="p = %{customdata[0]:.4f}, q = %{customdata[1]:.4f}<br>min(1, p/q) = %{x:.4f}"
                              "<extra></extra>")  # fmt: skip
    fig.add_bar(y=labels, x=[1 - s.threshold for s in rows], orientation="h", name="reject",
                marker_color=[NOT_REACHED if d else REJECTED for d in dim], hoverinfo="skip")  # fmt: skip
    fig.add_scatter(y=labels, x=[None if s.state == NOT_YET else s.u for s in rows], mode="markers", name="coin u",
                    marker=dict(symbol="diamond", size=18, color=TARGET, line=dict(width=2, color="#ffffff")),
                    hovertemplate="u = %{x:.4f}<extra></extra>")  # fmt: skip
    return _layout(fig, title, barmode="stack", xaxis=dict(range=[0, 1], title="coin u"),
                   height=90 + 80 * len(rows), bargap=0.3, showlegend=False)  # fmt: skip


def last_draw(dist: Sequence[float] | None, u: float, token: int, kind: str, title: str | None = None) -> go.Figure:
    """The law the last token is drawn from (the residual or p) cut into one segment per token along
    [0, 1), and the coin that picks the segment it lands in (inverse CDF). ``dist`` None: the
    verifier handed no weights to the inverse CDF (the coin alone is shown, at u when finite);
    ``title`` replaces the default one (a draw not made yet, or none at all)."""
    fig = plotly_json.blank()
    palette = REPLACED if kind == "replacement" else BONUS
    for v, w in enumerate(np.asarray(dist, dtype=np.float64) if dist is not None else []):
        if w <= 0:
            continue
        fig.add_bar(y=["draw"], x=[w], orientation="h", name=f"token {v}", showlegend=False,
                    marker=dict(color=palette if v == token else EMPIRICAL, line=dict(width=2, color="#ffffff")),
                    text=[f"{v}"], textposition="inside", insidetextanchor="middle",
                    hovertemplate=f"token {v}: {w:.4f}<extra></extra>")  # fmt: skip
    if np.isfinite(u):
        fig.add_scatter(y=["draw"], x=[u], mode="markers", name="coin", showlegend=False,
                        marker=dict(symbol="triangle-down", size=20, color=TARGET),
                        hovertemplate="u = %{x:.4f}<extra></extra>")  # fmt: skip
    what = "Residual (p − q)₊" if kind == "replacement" else "Bonus from p"
    return _layout(fig, title or f"{what}: u = {u:.2f} → token {token}", barmode="stack",
                   xaxis=dict(range=[0, 1]), yaxis=dict(showticklabels=False), height=200)  # fmt: skip


def round_histogram(target_probs: Sequence[float], counts: Sequence[int], title: str) -> go.Figure:
    """Frequencies of every token emitted so far (with ±2 standard errors of p) against p."""
    p = np.asarray(target_probs, dtype=np.float64)
    c = np.asarray(counts, dtype=np.float64)
    n = float(c.sum())
    f = c / n if n else np.zeros_like(p)
    x = [f"token {v}" for v in range(p.size)]
    fig = plotly_json.blank()
    half = 2 * np.sqrt(p * (1 - p) / n) if n else np.zeros_like(p)
    fig.add_bar(x=x, y=f, name=f"emitted ({int(n):,} tokens)", marker_color=EMPIRICAL,
                error_y=dict(type="data", array=half, color="#455a64", thickness=1.5),
                hovertemplate="%{x}<br>frequency = %{y:.4f}<extra></extra>")  # fmt: skip
    fig.add_scatter(x=x, y=p, name="target p", mode="markers",
                    marker=dict(symbol="line-ew", size=44, line=dict(width=3, color=TARGET)),
                    hovertemplate="%{x}<br>p = %{y:.4f}<extra></extra>")  # fmt: skip
    return _layout(fig, title, yaxis=dict(title="frequency", range=[0, max(0.05, float(max(p.max(), f.max())) * 1.25)]),
                   height=330)  # fmt: skip


PANEL_COLUMNS = 10  # two rows: each histogram stays tall enough to read under the 340 px projector cap


def panels(target_probs: Sequence[float], counts: np.ndarray, *, marked: int | None = None,
           notes: Sequence[str] | None = None) -> go.Figure:  # fmt: skip
    """M small histograms (counts (M, V)) in rows of five, each with p as ticks; after the reveal
    the ``marked`` panel is drawn in the law's color and each panel's subtitle carries ``notes``."""
    p = np.asarray(target_probs, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    M, V = counts.shape
    rows = -(-M // PANEL_COLUMNS)
    names = [f"{i + 1}" + (f": {notes[i]}" if notes else "") for i in range(M)]
    fig = plotly_json.subplots(rows=rows, cols=PANEL_COLUMNS, subplot_titles=names, shared_yaxes=True,
                        horizontal_spacing=0.015, vertical_spacing=0.2)  # fmt: skip
    x = [str(v) for v in range(V)]
    top = float(max(p.max(), (counts / counts.sum(axis=1, keepdims=True)).max())) * 1.1
    for i in range(M):
        r, col = i // PANEL_COLUMNS + 1, i % PANEL_COLUMNS + 1
        f = counts[i] / counts[i].sum()
        fig.add_bar(x=x, y=f, row=r, col=col, showlegend=False, marker_color=LAW if i == marked else EMPIRICAL,
                    hovertemplate=f"histogram {i + 1}<br>token %{{x}}: %{{y:.4f}}<extra></extra>")  # fmt: skip
        fig.add_scatter(x=x, y=p, row=r, col=col, mode="markers", showlegend=False, name="target p",
                        marker=dict(symbol="line-ew", size=14, line=dict(width=2, color=TARGET)), hoverinfo="skip")
    fig.update_yaxes(range=[0, top], showticklabels=False)
    fig.update_xaxes(showticklabels=False)
    fig.update_annotations(font_size=FONT["size"])
    title = f"{M} histograms of the first token, one of them from a mistake (ticks: p)"
    return _layout(fig, title, height=100 + 140 * rows)


VERDICT_COLOURS = {"lossless": "#2a9d8f", "LOSSY": "#e76f51", "refused": "#9e9e9e"}


def verdict_bars(rows: list[dict]) -> go.Figure:
    """The court's table as bars: each rule's exact tokens per verification, coloured by its verdict, with its TV."""
    # Horizontal bars: rule names read level on a projector (rotated ones ran off the chart), and each bar's TV
    # label sits past its end at full size instead of shrinking to the bar's width and running into the next one.
    fig = plotly_json.blank()
    top = max([r["tokens per step"] for r in rows if not math.isnan(r["tokens per step"])] or [1.0])
    for verdict, colour in VERDICT_COLOURS.items():
        sel = [r for r in rows if r["verdict"] == verdict]
        if not sel:
            continue
        fig.add_bar(
            y=[r["rule"] for r in sel],
            x=[0.0 if math.isnan(r["tokens per step"]) else r["tokens per step"] for r in sel],
            orientation="h",
            name=verdict,
            marker_color=colour,
            text=[f"{verdict}, TV {tv_text(r['TV from target'])}" if verdict != "refused" else "refused"
                  for r in sel],  # fmt: skip
            textposition="outside",
            textfont_size=FONT["size"],
            constraintext="none",
            cliponaxis=False,
        )
    # No legend and no axis title: each bar says its verdict, and at a projector's 340 px every row keeps its label.
    return plotly_json.finish(
        fig,
        title=dict(text="Exact tokens per verification, verdict and TV", x=0, xanchor="left", y=0.98, yanchor="top",
                   yref="container"),  # inside the figure's top edge, as specviz.app.figures places titles
        xaxis_range=[0, top * 1.7],  # room for the labels past the longest bar
        yaxis={"categoryorder": "array", "categoryarray": [r["rule"] for r in rows][::-1], "automargin": True},
        height=30 * len(rows) + 90,
        margin={"t": 60, "b": 10},
        showlegend=False,
        bargap=0.25,
    )
