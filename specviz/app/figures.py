"""Plotly figure builders for the app: pure functions of their inputs, returning go.Figure.

# B rows, K drafts (padded width), V vocabulary, L sequence length

No Streamlit here, and nothing drawn that was not computed by the package: the traces hold
the exact numbers (tests read them back), the layout only arranges them. No web fonts or
MathJax: figures render offline.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from ..proof import theory
from ..verifiers.verify import Verification
from . import plotly_json

# One color per meaning, the same on every page.
ACCEPTED = "#2e7d32"  # a draft that survived: min(p, q)
REPLACED = "#ef6c00"  # the token drawn after a rejection: (1 - a) * residual
BONUS = "#1565c0"  # the extra token when every draft survived
TARGET = "#212121"  # p, the law everything must reproduce
LAW = "#8e24aa"  # the exact law of what is being run (the rule or a bug)
EMPIRICAL = "#90a4ae"  # sampled frequencies
DRAFT = "#00838f"  # q, the law the drafts were drawn from
NOT_REACHED = "#d7dbdd"  # drafts after the first rejection: their coins never count
NO_DRAFT = "#f4f6f7"  # padding past num_draft[b]

FONT = dict(family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size=14)


def _layout(fig: go.Figure | tuple[list[dict[str, Any]], dict[str, Any]], title: str, **kw: Any) -> go.Figure:
    """``fig`` (a figure, or its JSON parts) with the shared title, font, margins and legend, and ``kw``."""
    return plotly_json.finish(
        fig,
        title=dict(text=title, x=0, xanchor="left", y=0.98, yanchor="top", yref="container"),
        font=FONT,
        margin=dict(l=10, r=10, t=84, b=10),
        legend=dict(orientation="h", yanchor="bottom", y=1.01, xanchor="left", x=0),
        **kw,
    )


def _tokens(V: int) -> list[str]:
    return [f"token {i}" for i in range(V)]


# --- one position ------------------------------------------------------------------------------


def decomposition_bar(target_probs: Sequence[float], draft_probs: Sequence[float]) -> go.Figure:
    """Stacked bars: min(p, q) (accepted) plus (1 - a) * residual (replaced) builds p exactly.

    Traces: "accepted: min(p, q)", "replaced: (1 − a)·residual" (their sum is the output
    law), "target p" as a tick on each bar, and "draft q" as a diamond: where q is above p the
    accepted part stops at p, where it is below the residual fills the gap.
    """
    d = theory.decompose(target_probs, draft_probs)
    p = np.asarray(target_probs, dtype=np.float64)
    x = _tokens(len(p))
    fig = plotly_json.blank()
    fig.add_bar(
        x=x,
        y=d.accepted,
        name="accepted: min(p, q)",
        marker_color=ACCEPTED,
        hovertemplate="%{x}<br>min(p, q) = %{y:.6f}<extra></extra>",
    )
    fig.add_bar(
        x=x,
        y=d.replaced,
        name="replaced: (1 − a)·residual",
        marker_color=REPLACED,
        hovertemplate="%{x}<br>(1 − a)·residual = %{y:.6f}<extra></extra>",
    )
    fig.add_scatter(
        x=x,
        y=p,
        name="target p",
        mode="markers",
        marker=dict(symbol="line-ew", size=44, line=dict(width=3, color=TARGET)),
        hovertemplate="%{x}<br>p = %{y:.6f}<extra></extra>",
    )
    fig.add_scatter(
        x=x,
        y=np.asarray(draft_probs, dtype=np.float64),
        name="draft q",
        mode="markers",
        marker=dict(symbol="diamond-wide", size=12, color=DRAFT, line=dict(width=1, color="#ffffff")),
        hovertemplate="%{x}<br>q = %{y:.6f}<extra></extra>",
    )
    fig.update_layout(legend_traceorder="normal")
    return _layout(
        fig,
        f"Kept drafts plus replacements, token by token (a = {d.acceptance_rate:.4f})",
        barmode="stack",
        yaxis_title="probability",
        height=380,
    )


def law_comparison(
    target_probs: Sequence[float],
    law: Sequence[float] | None,
    empirical: Sequence[float] | None = None,
    *,
    n: int | None = None,
    law_name: str = "exact output law",
    single: int | None = None,
) -> go.Figure:
    """Grouped bars: target p, the exact law of what runs, and sampled frequencies.

    ``law`` (V,) or None (a bug with no single-position law); ``empirical`` (V,) frequencies
    of ``n`` samples, drawn with ±2 standard errors of the exact law (of p without one),
    clipped to [0, 1] where a frequency lives. One sample is not a histogram: with n = 1 (or
    ``single``, the token of the last single draw) the drawn token is marked instead.
    """
    p = np.asarray(target_probs, dtype=np.float64)
    x = _tokens(len(p))
    fig = plotly_json.blank()
    fig.add_bar(x=x, y=p, name="target p", marker_color=TARGET, hovertemplate="%{x}<br>p = %{y:.6f}<extra></extra>")
    if law is not None:
        fig.add_bar(
            x=x,
            y=np.asarray(law, dtype=np.float64),
            name=law_name,
            marker_color=LAW,
            hovertemplate="%{x}<br>exact = %{y:.6f}<extra></extra>",
        )
    if empirical is not None and n == 1:
        single = int(np.argmax(np.asarray(empirical)))  # the one token drawn
        empirical = None
    if empirical is not None:
        f = np.asarray(empirical, dtype=np.float64)
        ref = p if law is None else np.asarray(law, dtype=np.float64)
        err = None
        if n:
            half = 2 * np.sqrt(ref * (1 - ref) / n)
            err = dict(
                type="data",
                symmetric=False,
                array=np.minimum(half, 1 - f),
                arrayminus=np.minimum(half, f),
                color="#455a64",
                thickness=1.5,
            )
        fig.add_bar(
            x=x,
            y=f,
            name=f"sampled ({n:,} rows)" if n else "sampled",
            marker_color=EMPIRICAL,
            error_y=err,
            hovertemplate="%{x}<br>frequency = %{y:.6f}<extra></extra>",
        )
    if single is not None:  # a star just above the drawn token's bars
        top = float(max(p.max(), 0 if law is None else np.max(law)))
        bar = float(max(p[single], 0 if law is None else np.asarray(law)[single]))
        fig.add_scatter(
            x=[x[single]],
            y=[bar + 0.06 * top],
            name=f"one sample: token {single}",
            mode="markers",
            marker=dict(symbol="star", size=20, color=REPLACED, line=dict(width=1, color="#ffffff")),
            hovertemplate=f"the single verification emitted token {single}<extra></extra>",
        )
    return _layout(fig, "Output law of the first emitted token", barmode="group", yaxis_title="probability", height=380)


# --- batches -----------------------------------------------------------------------------------

STATES = ("accepted", "replaced", "bonus", "not reached", "no draft")  # codes 0..4 of strip_states
_STATE_COLORS = (ACCEPTED, REPLACED, BONUS, NOT_REACHED, NO_DRAFT)


def strip_states(verification: Verification, num_draft: np.ndarray) -> np.ndarray:
    """(B, K+1) codes into :data:`STATES` for each row's K + 1 output slots.

    Slots before the first rejection hold accepted drafts; the slot of the rejection holds
    the replacement, or, when every draft survived, slot num_draft[b] holds the bonus; drafts
    after a rejection were never reached; slots past the row's drafts are padding.
    """
    n_acc = np.asarray(verification.num_accepted)[:, None]  # (B, 1)
    n_tok = np.asarray(verification.num_tokens)[:, None]
    bonus = np.asarray(verification.bonus)[:, None]
    j = np.asarray(num_draft)[:, None]
    B, K1 = np.asarray(verification.tokens).shape
    pos = np.arange(K1)[None, :]  # (1, K+1)
    codes = np.where(pos < j, 3, 4)  # drafts not reached, padding
    drew = (pos == n_acc) & (n_tok > n_acc)  # the slot of the replacement or bonus
    codes = np.where(drew & ~bonus, 1, codes)
    codes = np.where(drew & bonus, 2, codes)
    return np.where(pos < n_acc, 0, codes)  # (B, K+1)


def token_strips(
    verification: Verification,
    num_draft: np.ndarray,
    draft_tokens: np.ndarray | None = None,
    *,
    max_rows: int = 32,
) -> go.Figure:
    """One strip of K + 1 cells per batch row (the first ``max_rows``), colored by :data:`STATES`.

    Cells show the emitted token (or the unreached draft in grey); hover shows the coin u and
    p/q at tested positions and the sampling uniform of the replacement or bonus.
    """
    codes = strip_states(verification, num_draft)[:max_rows]  # (R, K+1)
    tokens = np.asarray(verification.tokens)[:max_rows]
    R, K1 = codes.shape
    K = K1 - 1
    u = np.asarray(verification.accept_uniforms, dtype=np.float64)[:max_rows]
    ratio = np.asarray(verification.ratios, dtype=np.float64)[:max_rows]
    su = np.asarray(verification.sample_uniforms, dtype=np.float64)[:max_rows]
    drafts = None if draft_tokens is None else np.asarray(draft_tokens)[:max_rows]
    text = [["" for _ in range(K1)] for _ in range(R)]
    hover = [["" for _ in range(K1)] for _ in range(R)]
    for b in range(R):  # at most max_rows x (K+1) cells: labels only
        for i in range(K1):
            c = int(codes[b, i])
            lines = [f"row {b}, slot {i}: {STATES[c]}"]
            if drafts is not None and i < K and c != 4:
                lines.append(f"draft x = {int(drafts[b, i])}")
            if i < K and not np.isnan(u[b, i]):
                lines.append(f"u = {u[b, i]:.4f}, p/q = {ratio[b, i]:.4f} → {'accept' if c == 0 else 'reject'}")
            if c in (1, 2):
                lines.append(f"emitted {int(tokens[b, i])} (sampling u = {su[b]:.4f})")
            if c in (0, 1, 2):
                text[b][i] = str(int(tokens[b, i]))
            elif c == 3 and drafts is not None:
                text[b][i] = f"({int(drafts[b, i])})"
            hover[b][i] = "<br>".join(lines)
    scale = []
    for k, color in enumerate(_STATE_COLORS):
        scale += [[k / len(STATES), color], [(k + 1) / len(STATES), color]]
    fig = plotly_json.blank(
        go.Heatmap(
            z=codes,
            x=[f"slot {i}" for i in range(K1)],
            y=[f"row {b}" for b in range(R)],
            text=text,
            texttemplate="%{text}",
            textfont=dict(size=FONT["size"]),  # unset, Plotly shrinks the text to the cell (9 px on a projector)
            customdata=hover,
            hovertemplate="%{customdata}<extra></extra>",
            colorscale=scale,
            zmin=-0.5,
            zmax=len(STATES) - 0.5,
            xgap=3,
            ygap=3,
            colorbar=dict(tickvals=list(range(len(STATES))), ticktext=list(STATES), title=""),
        )
    )
    fig.update_yaxes(autorange="reversed", dtick=1)  # every row labelled
    # meta "rows" (presenter.ROW_FIGURE): a projector scales it with its fonts rather than capping its height
    return _layout(fig, f"Token strips (first {R} rows)", height=120 + 30 * R, meta={"kind": "rows"})


def accepted_histogram(num_accepted: np.ndarray, K: int, num_draft: np.ndarray | None = None) -> go.Figure:
    """Counts of rows by accepted drafts 0..K (beside the rows' draft counts, if given)."""
    k = np.arange(K + 1)
    acc = np.bincount(np.asarray(num_accepted, dtype=np.int64), minlength=K + 1)[: K + 1]
    fig = plotly_json.blank()
    fig.add_bar(
        x=k,
        y=acc,
        name="accepted drafts",
        marker_color=ACCEPTED,
        hovertemplate="%{y} rows accepted %{x}<extra></extra>",
    )
    if num_draft is not None:
        drafted = np.bincount(np.asarray(num_draft, dtype=np.int64), minlength=K + 1)[: K + 1]
        fig.add_bar(
            x=k,
            y=drafted,
            name="drafts per row",
            marker_color=EMPIRICAL,
            hovertemplate="%{y} rows drafted %{x}<extra></extra>",
        )
    fig.update_xaxes(tickmode="array", tickvals=k, title="drafts")
    return _layout(fig, "Accepted length per row", barmode="group", yaxis_title="rows", height=340)


def timing_bar(backends: Sequence[str], rows_per_second: Sequence[float]) -> go.Figure:
    """Rows verified per second, one bar per backend."""
    fig = plotly_json.blank(
        go.Bar(
            x=list(backends),
            y=list(rows_per_second),
            marker_color=BONUS,
            hovertemplate="%{x}: %{y:,.0f} rows/s<extra></extra>",
        )
    )
    return _layout(fig, "Rows verified per second", yaxis_title="rows / s", height=300)


# --- the proof ---------------------------------------------------------------------------------


def sequence_labels(V: int, L: int) -> list[str]:
    """Cell names of the joint law in base-V order: "0 0 0", "0 0 1", ..."""
    idx = np.indices((V,) * L).reshape(L, -1).T  # (V**L, L)
    return [" ".join(str(t) for t in row) for row in idx]


def joint_comparison(observed: np.ndarray, law: np.ndarray, V: int, L: int) -> go.Figure:
    """Observed frequency against the exact probability of every L-token sequence.

    ``observed`` (V**L,) counts in base-V order; ``law`` (V,) * L or (V**L,). The lower panel
    shows the Pearson residuals (o - e) / sqrt(e) whose squares make the chi-square statistic.
    """
    obs = np.asarray(observed, dtype=np.float64).ravel()
    p0 = np.asarray(law, dtype=np.float64).ravel()
    n = obs.sum()
    labels = sequence_labels(V, L)
    expected = n * p0
    with np.errstate(divide="ignore", invalid="ignore"):
        resid = np.where(expected > 0, (obs - expected) / np.sqrt(expected), np.nan)
    # Written as plotly's JSON (the hot chart: each student's own run draws it): the same figure as
    # make_subplots + add_bar(row=, col=) + update_yaxes, at a third of the cost (test_figure_snapshots.py).
    layout = plotly_json.grid(rows=2, cols=1, shared_xaxes=True, row_heights=[0.65, 0.35], vertical_spacing=0.06)
    data = [
        dict(type="bar", x=labels, y=p0, name="exact target law", marker=dict(color=TARGET), xaxis="x", yaxis="y",
             hovertemplate="%{x}<br>exact %{y:.5f}<extra></extra>"),
        dict(type="bar", x=labels, y=obs / n if n else obs, name="observed frequency", marker=dict(color=EMPIRICAL),
             xaxis="x", yaxis="y", hovertemplate="%{x}<br>observed %{y:.5f}<extra></extra>"),
        dict(type="bar", x=labels, y=resid, name="Pearson residual", marker=dict(color=LAW), xaxis="x2", yaxis="y2",
             showlegend=False, hovertemplate="%{x}<br>(o − e)/√e = %{y:.2f}<extra></extra>"),
    ]  # fmt: skip
    plotly_json.merge(layout, {
        "yaxis": {"title": {"text": "probability"}},
        # The residuals' axis on the right: stacked on the left, the two titles ran together ("(o − e)/√e probability").
        "yaxis2": {"title": {"text": "(o − e)/√e"}, "side": "right"},
        # 11 px here is 14 px in presenter mode (presenter.SCALE), where every chart label is at least 14 px.
        "xaxis2": {"tickangle": -90, "tickfont": {"size": 11}},
    })  # fmt: skip
    fig = (data, layout)
    return _layout(fig, f"Joint law of the first {L} tokens ({int(n):,} sequences)", barmode="group", height=520)


# --- tokens per step ---------------------------------------------------------------------------


def tokens_curve(
    Ks: Sequence[int],
    with_bonus: Sequence[float],
    without_bonus: Sequence[float],
    *,
    measured: tuple[Sequence[float], Sequence[float]] | None = None,
    measured_without: tuple[Sequence[float], Sequence[float]] | None = None,
    K_mark: int | None = None,
) -> go.Figure:
    """Expected tokens per verification against K, with and without the bonus token.

    ``measured`` / ``measured_without``: (mean, standard error) per K, drawn as points with
    ±2 SE error bars.
    """
    k = np.asarray(list(Ks))
    fig = plotly_json.blank()
    fig.add_scatter(
        x=k,
        y=list(with_bonus),
        name="theory, with bonus",
        mode="lines",
        line=dict(color=BONUS, width=3),
        hovertemplate="K = %{x}: %{y:.4f}<extra>with bonus</extra>",
    )
    fig.add_scatter(
        x=k,
        y=list(without_bonus),
        name="theory, no bonus",
        mode="lines",
        line=dict(color=REPLACED, width=3, dash="dash"),
        hovertemplate="K = %{x}: %{y:.4f}<extra>no bonus</extra>",
    )
    for pts, name, color in (
        (measured, "measured, with bonus", BONUS),
        (measured_without, "measured, no bonus", REPLACED),
    ):
        if pts is not None:
            mean, se = (np.asarray(v, dtype=np.float64) for v in pts)
            fig.add_scatter(
                x=k,
                y=mean,
                name=name,
                mode="markers",
                marker=dict(color=color, size=9, symbol="circle-open", line=dict(width=2)),
                error_y=dict(type="data", array=2 * se, color=color),
                hovertemplate="K = %{x}: %{y:.4f}<extra>" + name + "</extra>",
            )
    if K_mark is not None:
        fig.add_vline(x=K_mark, line=dict(color="#9e9e9e", dash="dot"))
    fig.update_xaxes(title="K (drafts per verification)", range=[k.min() - 0.5, k.max() + 0.5])
    return _layout(fig, "Expected tokens per verification", yaxis_title="tokens", height=400)


def speedup_curve(Ks: Sequence[int], speedups: Sequence[float], best_K: int | None = None) -> go.Figure:
    """Modelled speedup over plain decoding against K, the best K marked."""
    k = np.asarray(list(Ks))
    s = np.asarray(list(speedups), dtype=np.float64)
    fig = plotly_json.blank()
    fig.add_scatter(
        x=k,
        y=s,
        mode="lines+markers",
        name="speedup",
        line=dict(color=ACCEPTED, width=3),
        hovertemplate="K = %{x}: ×%{y:.3f}<extra></extra>",
    )
    fig.add_hline(y=1, line=dict(color="#9e9e9e", dash="dot"), annotation_text="plain decoding")
    if best_K is not None:
        i = int(np.flatnonzero(k == best_K)[0])
        fig.add_scatter(
            x=[best_K],
            y=[s[i]],
            mode="markers",
            name=f"best K = {best_K}",
            marker=dict(color=REPLACED, size=14, symbol="star"),
        )
    fig.update_xaxes(title="K (drafts per verification)", range=[k.min() - 0.5, k.max() + 0.5])
    return _layout(fig, "Speedup model: E[tokens] / (1 + K·c)", yaxis_title="× plain decoding", height=360)


# --- sampling settings ---------------------------------------------------------------------------


def settings_bars(p_raw: Sequence[float], p: Sequence[float], q_raw: Sequence[float], q: Sequence[float],
                  removed_p: Sequence[bool], removed_q: Sequence[bool]) -> go.Figure:  # fmt: skip
    """Grouped bars per token: raw and processed target, raw and processed draft.

    The processed bars of tokens a side's settings removed are drawn empty with an "✕" above
    them (their height is 0; the raw bar beside shows what was taken away), each side's marks in a
    row of their own: a token both sides removed shows both, neither hiding the other.
    """
    V = len(p)
    x = _tokens(V)
    fig = plotly_json.blank()
    for y, name, color, opacity in (
        (p_raw, "target raw", TARGET, 0.35),
        (p, "p (request's settings)", TARGET, 1.0),
        (q_raw, "draft raw", DRAFT, 0.35),
        (q, "q (drafter's settings)", DRAFT, 1.0),
    ):
        fig.add_bar(x=x, y=np.asarray(y, dtype=np.float64), name=name, marker_color=color, opacity=opacity,
                    hovertemplate="%{x}<br>" + name + " = %{y:.4f}<extra></extra>")  # fmt: skip
    top = float(max(np.max(p_raw), np.max(p), np.max(q_raw), np.max(q)))
    marks = ((removed_p, "removed by the request", TARGET, 1.14), (removed_q, "removed by the drafter", DRAFT, 1.05))
    for mask, name, color, height in marks:
        idx = np.flatnonzero(np.asarray(mask, dtype=bool))
        if idx.size:
            fig.add_scatter(x=[x[i] for i in idx], y=[top * height] * idx.size, mode="markers", name=name,
                            marker=dict(symbol="x", size=10, color=color),
                            hovertemplate="%{x}: " + name + "<extra></extra>")  # fmt: skip
    return _layout(fig, "Raw and processed target and draft", barmode="group", yaxis_title="probability", height=380)


def sweep_curve(values: Sequence[float], acceptance: Sequence[float], tokens_per_step: Sequence[float], knob: str,
                current: float | None = None, K: int | None = None) -> go.Figure:  # fmt: skip
    """Acceptance rate (left axis) and expected tokens per step (right axis) against one of
    the drafter's settings, the target fixed; the current value marked."""
    v = np.asarray(list(values), dtype=np.float64)
    fig = plotly_json.subplots(specs=[[{"secondary_y": True}]])
    fig.add_scatter(x=v, y=list(acceptance), name="acceptance rate", mode="lines+markers",
                    line=dict(color=ACCEPTED, width=3),
                    hovertemplate=knob + " = %{x}: a = %{y:.4f}<extra></extra>")  # fmt: skip
    fig.add_scatter(x=v, y=list(tokens_per_step), name=f"tokens per step (K = {K})" if K else "tokens per step",
                    mode="lines+markers", line=dict(color=BONUS, width=3, dash="dash"),
                    hovertemplate=knob + " = %{x}: %{y:.4f} tokens<extra></extra>", secondary_y=True)  # fmt: skip
    if current is not None:
        fig.add_vline(x=current, line=dict(color=REPLACED, dash="dot", width=2), annotation_text="current")
    fig.update_xaxes(title=f"drafter's {knob}")
    fig.update_yaxes(title_text="acceptance rate", range=[0, 1.02], dtick=0.2, secondary_y=False)
    # Tokens per step run from 1 (a = 0) to K + 1 (a = 1): the right axis spans exactly that, scaled like the
    # left one, with round ticks of its own (left to itself, it picks ticks like 1.351, 1.847 to match the grid).
    k = float(K) if K else max(1.0, float(np.ceil(max(tokens_per_step))) - 1.0)
    step = 1.0 if k >= 3 else 0.5 if k >= 2 else 0.25
    fig.update_yaxes(title_text="tokens per step", range=[1.0, 1.0 + 1.02 * k], tickmode="linear", tick0=1.0,
                     dtick=step, showgrid=False, secondary_y=True)  # fmt: skip
    return _layout(fig, f"Acceptance, tokens per step vs {knob}", height=380)


# --- interview ---------------------------------------------------------------------------------


def roofline_chart(tokens: Sequence[float], seconds: Sequence[float], ridge_tokens: float,
                   mark: float | None = None) -> go.Figure:  # fmt: skip
    """Time of one forward pass against the tokens in it (log-log), the ridge point marked."""
    t = np.asarray(list(tokens), dtype=np.float64)
    s = np.asarray(list(seconds), dtype=np.float64) * 1e3
    fig = plotly_json.blank()
    fig.add_scatter(x=t, y=s, name="max(memory, compute) time", mode="lines", line=dict(color=TARGET, width=3),
                    hovertemplate="%{x:.0f} tokens: %{y:.3f} ms<extra></extra>")  # fmt: skip
    # The ridge as a trace, not a shape: shapes on a log axis take log10 coordinates.
    fig.add_scatter(x=[ridge_tokens, ridge_tokens], y=[s.min(), s.max()], mode="lines",
                    name=f"ridge: {ridge_tokens:.0f} tokens", line=dict(color="#9e9e9e", dash="dot"),
                    hoverinfo="skip")  # fmt: skip
    if mark is not None:
        y = float(np.interp(mark, t, s))
        fig.add_scatter(x=[mark], y=[y], mode="markers", name=f"this pass: {mark:.0f} tokens",
                        marker=dict(color=REPLACED, size=14, symbol="star"))  # fmt: skip
    fig.update_xaxes(title="tokens in one forward pass (B·(K+1))", type="log", dtick=1)  # 1, 10, 100, ...
    # Decades only, from the one under the flat memory-bound floor (log axes otherwise label minor ticks "2", "5").
    lo = float(np.floor(np.log10(s.min())))
    fig.update_yaxes(title="time per pass (ms)", type="log", dtick=1, range=[lo - 0.05, np.log10(s.max()) + 0.05])
    return _layout(fig, "Roofline: a pass is flat in tokens until the ridge", height=340)


# --- real text ---------------------------------------------------------------------------------


def continuation_comparison(law: np.ndarray, counts: np.ndarray, labels: Sequence[str], top: int = 24) -> go.Figure:
    """Exact probability against observed frequency for the most likely continuations.

    ``law`` and ``counts`` (C,) over the same cells, ``labels`` (C,). Shown: the ``top`` cells
    by exact probability together with the ``top`` by observed count (a bug's drift shows as
    a cell the law ranks low), ordered by exact probability.
    """
    p0 = np.asarray(law, dtype=np.float64).ravel()
    c = np.asarray(counts, dtype=np.float64).ravel()
    n = c.sum()
    cells = np.union1d(np.argsort(-p0, kind="stable")[:top], np.argsort(-c, kind="stable")[:top])
    cells = cells[np.argsort(-p0[cells], kind="stable")]
    x = [labels[i] for i in cells]
    fig = plotly_json.blank()
    fig.add_bar(x=x, y=p0[cells], name="exact target law", marker_color=TARGET,
                hovertemplate="%{x}<br>exact %{y:.5f}<extra></extra>")  # fmt: skip
    fig.add_bar(x=x, y=c[cells] / n if n else c[cells], name="observed frequency", marker_color=EMPIRICAL,
                hovertemplate="%{x}<br>observed %{y:.5f}<extra></extra>")  # fmt: skip
    fig.update_xaxes(tickangle=-60)
    return _layout(fig, f"Next characters: exact against observed ({int(n):,} sequences)", barmode="group",
                   yaxis_title="probability", height=400)  # fmt: skip


# --- block verification, one step at a time ----------------------------------------------------


def block_steps(trace: Any) -> go.Figure:
    """One block verification (a :class:`specviz.proof.block_trace.BlockTrace`): per draft its threshold
    h_i (bars) and the uniform eta_i compared with it (diamonds), then the distribution the last
    token came from. Threshold bars are green for the kept drafts x_1 .. x_tau (a pass at i keeps
    every draft up to i, even those whose own uniform failed) and grey after tau; in the right
    panel the drawn token is purple, the rest blue for the bonus row p_j or orange for the residual."""
    j = len(trace.thresholds)
    names = [f"x{i + 1} = {int(t)}" for i, t in enumerate(trace.draft_tokens)]
    kept = [ACCEPTED if i < trace.tau else NOT_REACHED for i in range(j)]
    fig = plotly_json.subplots(rows=1, cols=2, column_widths=[0.6, 0.4], horizontal_spacing=0.12,
                        subplot_titles=(f"h_i and eta_i: tau = {trace.tau}", "the last token's row"))  # fmt: skip
    fig.add_bar(x=names, y=trace.thresholds, marker_color=kept, name="threshold h_i",
                customdata=trace.weights[1:], row=1, col=1,
                hovertemplate="%{x}<br>h = %{y:.4f}<br>w = %{customdata:.4f}<extra></extra>")  # fmt: skip
    fig.add_scatter(x=names, y=trace.uniforms, mode="markers", marker=dict(symbol="diamond", size=14, color=TARGET),
                    name="uniform eta_i (passes when below h_i)", row=1, col=1)  # fmt: skip
    V = len(trace.source_row)
    colors = [BONUS if trace.bonus else REPLACED if v != trace.token else LAW for v in range(V)]
    fig.add_bar(x=_tokens(V), y=trace.source_row, marker_color=colors, name=trace.source, row=1, col=2,
                hovertemplate="%{x}<br>%{y:.4f}<extra></extra>")  # fmt: skip
    fig.update_yaxes(range=[0, 1.05], row=1, col=1)
    fig.update_yaxes(range=[0, 1.05], row=1, col=2)
    # Short titles: the page says where the last token came from in words; long ones ran off a projector at 150 %.
    return _layout(fig, f"Block verification: kept {trace.tau} of {j}, then token {trace.token}", height=420)
