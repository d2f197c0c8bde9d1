"""Plotly figures written as their JSON and validated once, rather than call by call.

No Streamlit here. plotly's object model validates every property as it is set, and parses
every ``update_layout`` argument's path through its property tree: a figure built call by call
cost 20-60 ms here, mostly in that parsing and in copying the default template, where one
construction from the same JSON costs 2-5 ms (benchmarks/load.py --cpu prints what a page load
costs). The builders in figures.py, lesson_figures.py and tree_shapes.py start from
:func:`blank` or :func:`subplots`, add traces as before and end in :func:`finish` (or
``figures._layout``); tests/test_figure_snapshots.py holds every chart the app sends against
what the call-by-call builders sent.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

# Every figure's template, as plotly's default rather than named in each layout: naming it builds and
# validates a copy, 7-8 ms a figure (a third of a page load; benchmarks/load.py --cpu). Same JSON either way.
pio.templates.default = "plotly_white"


_WHOLE = frozenset(p for p in go.Layout()._valid_props if "_" in p)  # paper_bgcolor, plot_bgcolor


def nest(props: dict[str, Any]) -> dict[str, Any]:
    """A layout's magic underscores spelled out: ``{"yaxis_title": "p"}`` -> ``{"yaxis": {"title": "p"}}``.

    A layout property whose own name holds an underscore (``paper_bgcolor``) stays whole.
    """
    out: dict[str, Any] = {}
    for key, value in props.items():
        head = next((w for w in _WHOLE if key == w or key.startswith(w + "_")), None)
        if head is None:
            names = key.split("_")
        else:
            names = [head, *key[len(head) + 1 :].split("_")] if key != head else [head]
        *path, last = names
        node = out
        for part in path:
            node = node.setdefault(part, {})
        merge(node, {last: value})
    return out


def merge(into: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``new`` merged into ``into``, nested dicts key by key (as update_layout merges them)."""
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        elif isinstance(value, dict):
            into[key] = merge({}, value)
        else:
            into[key] = value
    return into


def parts(fig: go.Figure) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The traces and the layout ``fig`` holds so far, as plain JSON, without its template.

    The builders never set one: the finished figure gets plotly's default (figures.py), as a
    figure built by ``go.Figure()`` does. A template set on ``fig`` by hand would be dropped.
    """
    layout = fig.layout.to_plotly_json()
    layout.pop("template", None)
    return [t.to_plotly_json() for t in fig.data], layout


def blank(*traces: Any) -> go.Figure:
    """A figure holding ``traces`` (none: empty) to add more to, finished by :func:`finish`.

    Without plotly's default template: each figure that gets it copies it whole (4 ms here), and
    :func:`finish` gives the finished figure its one copy.
    """
    return go.Figure(data=list(traces), layout={"template": {}})


def finish(fig: go.Figure | tuple[list[dict[str, Any]], dict[str, Any]], **kw: Any) -> go.Figure:
    """``fig.update_layout(**kw)``, rebuilt from its JSON in one validated construction.

    ``fig`` is a figure, or its traces and layout already as plotly's JSON (plain dicts, the
    cheapest way). update_layout parses each argument's path through plotly's property tree: 15 ms
    a figure here (benchmarks/load.py --cpu), where the rebuild takes about 2. The figure comes
    back with plotly's default template, as one built by ``go.Figure()`` has it.
    tests/test_figure_snapshots.py holds every chart against what update_layout made of it.
    """
    data, layout = parts(fig) if isinstance(fig, go.Figure) else fig
    return go.Figure(data=data, layout=merge(layout, nest(kw)))


@functools.lru_cache(maxsize=64)
def _grid(rows: int, cols: int, spec: str) -> tuple[dict[str, Any], Any, Any]:
    """make_subplots' layout (axes, domains, subplot titles) and grid, made once per arrangement."""
    made = make_subplots(rows=rows, cols=cols, **json.loads(spec))
    layout = made.layout.to_plotly_json()
    layout.pop("template", None)
    return layout, made._grid_ref, made._grid_str


def grid(rows: int = 1, cols: int = 1, **kw: Any) -> dict[str, Any]:
    """The layout ``make_subplots(rows, cols, **kw)`` starts with (axes and their domains), as JSON, a fresh copy.

    Traces written as JSON name their axes themselves: ``xaxis="x2", yaxis="y2"`` for row 2.
    """
    return copy.deepcopy(_grid(rows, cols, json.dumps(kw, sort_keys=True))[0])


def subplots(rows: int = 1, cols: int = 1, **kw: Any) -> go.Figure:
    """``make_subplots(rows, cols, **kw)``, its grid computed once per arrangement (24 ms each time here).

    The figure gets the grid plotly's own make_subplots attaches (``_grid_ref``), so that
    ``add_bar(..., row=, col=)`` and ``update_yaxes(row=, col=)`` work on it as on plotly's.
    """
    layout, ref, text = _grid(rows, cols, json.dumps(kw, sort_keys=True))
    fig = go.Figure(layout={**copy.deepcopy(layout), "template": {}})  # the template: see blank()
    fig._grid_ref, fig._grid_str = ref, text  # the two attributes make_subplots sets (plotly 6.5)
    return fig
