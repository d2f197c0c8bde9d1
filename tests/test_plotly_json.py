"""specviz.app.plotly_json: magic underscores spelled out, merges as update_layout merges, fresh grids."""

from __future__ import annotations

import plotly.graph_objects as go

from specviz.app import plotly_json


def test_nest_spells_out_magic_underscores_and_keeps_whole_names() -> None:
    assert plotly_json.nest({"yaxis_title_text": "p", "font_size": 14}) == {
        "yaxis": {"title": {"text": "p"}},
        "font": {"size": 14},
    }
    assert plotly_json.nest({"paper_bgcolor": "white"}) == {"paper_bgcolor": "white"}  # not {"paper": ...}


def test_finish_equals_update_layout() -> None:
    def built() -> go.Figure:
        fig = plotly_json.blank()
        fig.add_bar(x=["a", "b"], y=[0.25, 0.75], name="p", marker_color="#123456")
        return fig

    kw = dict(yaxis_title="probability", height=300, legend=dict(x=0), paper_bgcolor="white", barmode="group")
    slow = go.Figure()
    slow.add_bar(x=["a", "b"], y=[0.25, 0.75], name="p", marker_color="#123456")
    slow.update_layout(**kw)
    assert plotly_json.finish(built(), **kw).to_dict() == slow.to_dict()
    assert plotly_json.finish(built(), height=301).to_dict() != slow.to_dict()  # negative control


def test_grids_are_fresh_copies() -> None:
    a = plotly_json.grid(rows=2, cols=1, shared_xaxes=True)
    a["yaxis"]["title"] = {"text": "changed"}
    b = plotly_json.grid(rows=2, cols=1, shared_xaxes=True)
    assert "title" not in b["yaxis"]  # the cached grid was not touched through a
    fig = plotly_json.subplots(rows=2, cols=1, shared_xaxes=True)
    fig.add_bar(x=[1], y=[1], row=2, col=1)
    assert fig.data[0].xaxis == "x2" and fig.data[0].yaxis == "y2"
