"""The two draft-tree shapes the Verifiers page compares, with one name each, and a drawing of each.

# N nodes (node 0 is the root: the context; every other node is one drafted token)

- **k chains from the root** (:func:`specviz.verifiers.tree.multi_draft_parents`): k independent
  drafts of K tokens each, sharing only the context. The exact court judges this shape (the
  rows of the side-by-side table).
- **full k-ary tree** (:func:`specviz.verifiers.tree.kary_parents`): k candidates at every node,
  K levels deep, 1 + k + ... + k^K nodes. The tree section measures this shape; it keeps more
  drafts per step than k chains, because every accepted node has k fresh candidates below it.

At k = 1 both are the chain.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ..errors import InputError
from . import plotly_json


def chains_name(k: int) -> str:
    """The name of k independent K-token drafts from one context."""
    return f"{int(k)} chains from the root" if int(k) != 1 else "one chain"


def kary_name(k: int) -> str:
    """The name of the tree with k candidates at every node."""
    return f"full {int(k)}-ary tree" if int(k) != 1 else "one chain"


def court_label(rule: str, k: int) -> str:
    """The side-by-side table's name for a court row: its tree rows are k chains from the root."""
    if rule == f"tree: {int(k)} i.i.d. drafts":
        return f"{chains_name(k)}, i.i.d. from q"
    if rule == f"tree: top-{int(k)} drafts":
        return f"{chains_name(k)}, q's top {int(k)}"
    return rule


def layout(parents: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x, depth), each (N,), for drawing a tree given each node's parent (-1 for the root, parents
    before children): leaves evenly spaced in depth-first order, a parent above its children's middle."""
    par = np.asarray(parents, dtype=np.int64)  # (N,)
    earlier = par.ndim == 1 and par.size > 0 and par[0] == -1 and bool((par[1:] >= 0).all())
    if not earlier or (par[1:] >= np.arange(1, par.size)).any():
        raise InputError("parents", "(N,) with parents[0] = -1 and every other parent an earlier node",
                         str(par.tolist()))  # fmt: skip
    children: list[list[int]] = [[] for _ in range(par.size)]
    for node in range(1, par.size):
        children[int(par[node])].append(node)
    depth = np.zeros(par.size, dtype=np.int64)
    for node in range(1, par.size):
        depth[node] = depth[par[node]] + 1
    x = np.zeros(par.size)
    next_leaf = [0.0]

    def place(node: int) -> float:  # recursion depth is the tree's depth (K <= 16)
        if not children[node]:
            x[node] = next_leaf[0]
            next_leaf[0] += 1
        else:
            x[node] = float(np.mean([place(c) for c in children[node]]))
        return float(x[node])

    place(0)
    return x, depth


def shape_figure(parents: Sequence[int] | np.ndarray, title: str, height: int = 260) -> go.Figure:
    """A drawing of the tree: the root (the context) on top, one marker per drafted token below it."""
    par = np.asarray(parents, dtype=np.int64)
    x, depth = layout(par)
    ex: list[float | None] = []
    ey: list[float | None] = []
    for node in range(1, par.size):
        ex += [x[par[node]], x[node], None]
        ey += [-depth[par[node]], -depth[node], None]
    fig = plotly_json.blank()
    fig.add_scatter(x=ex, y=ey, mode="lines", line={"color": "#9e9e9e", "width": 2}, hoverinfo="skip",
                    showlegend=False)  # fmt: skip
    fig.add_scatter(
        x=x, y=-depth, mode="markers", showlegend=False,
        marker={"size": 14, "color": ["#264653"] + ["#2a9d8f"] * (par.size - 1)},
        hovertext=["context"] + [f"draft node {i}, depth {int(depth[i])}" for i in range(1, par.size)],
        hoverinfo="text",
    )  # fmt: skip
    return plotly_json.finish(
        fig,
        # anchored inside the figure's top edge (as specviz.app.figures does): by default it rose above it
        title=dict(text=f"{title}: {par.size - 1} drafts", x=0, xanchor="left", y=0.98, yanchor="top",
                   yref="container"),
        height=height,
        margin={"t": 48, "b": 10, "l": 10, "r": 10},
        xaxis={"visible": False},
        yaxis={"visible": False},
        font_size=14,
    )
