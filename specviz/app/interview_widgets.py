"""The interview walkthrough's link and the live widget under each reveal: what it shows for its controls.

# K drafts, V vocabulary

Each function takes the values of a widget's controls and returns a :class:`View`: the metrics
(label, value, and a note beside the value), a caption, and the charts by name. The page draws
the controls and lays the view out; every number and sentence is computed here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import plotly.graph_objects as go

from ..proof import block_trace, court, theory
from ..verifiers import tree
from . import figures, links, position, tree_shapes
from . import interview as iv
from . import interview_topics as topics
from .presenter import Metric

EXAMPLE_PARAMS = 7e9  # the roofline chart's model size; the verification cost does not depend on it
K_RANGE = range(1, 17)


def _answers(text: str) -> str:
    iv.decode_answers(text)  # raises InputError (a ValueError) on a malformed entry
    return text


def link_params(questions: int) -> list[links.Param]:
    """The walkthrough's settings in the link, in the order it shows them: the step (``questions``: the
    summary), the answers, then every widget's controls."""
    return [
        links.int_param("step", 0, 0, questions),
        links.Param("ans", "", _answers, "comma-separated answers: a choice's index or a number per question"),
        links.float_param("a", 0.8, 0.0, 0.99),
        links.float_param("c", 0.05, 0.0, 1.0),
        links.int_param("B", 8, 1, 4096),
        links.int_param("K", 4, 0, 16),
        links.int_param("Kt", 3, 1, 16),
        links.int_param("Kr", 3, 1, 8),
        links.int_param("L", iv.KV_EXAMPLE[0], 1, 256),
        links.int_param("Kv", iv.KV_EXAMPLE[1], 1, 16),
        links.int_param("j", iv.KV_EXAMPLE[2], 0, 16),
        links.int_param("pg", iv.KV_EXAMPLE[3], 1, 64),
        links.int_param("k", iv.TREE_EXAMPLE[0], 1, 4),
        links.int_param("d", iv.TREE_EXAMPLE[1], 1, 4),
        links.int_param("bs", 0, 0, 2**32 - 1),
        links.float_param("T", topics.SETTINGS_REQUEST.temperature, 0.05, 2.0),
        links.float_param("tp", topics.SETTINGS_REQUEST.top_p, 0.05, 1.0),
        links.choice_param("up", topics.unclamped().preset, position.PRESETS),
        links.int_param("nd", iv.RAGGED_EXAMPLE[0], 0, iv.RAGGED_EXAMPLE[1]),
    ]


def _law(p: Sequence[float], q: Sequence[float], mistake: str, K: int) -> list[float] | None:
    """The first token's exact law with ``mistake``, as the figures take it (None: no single-position law)."""
    law = theory.position_law(p, q, mistake, K=K)
    return None if law is None else law.tolist()


class View(NamedTuple):
    """What a widget shows for its controls."""

    metrics: list[Metric]
    charts: dict[str, go.Figure]  # by the name the page keys it with
    caption: str | None = None


def one_position(key: str) -> View:
    """The acceptance and residual questions' decomposition, or the typical question's exact law."""
    p, q = iv.REFERENCE_P, iv.UNIFORM_Q
    if key == "typical":
        law = iv.typical_acceptance_law(p, q, 0.3, 0.6)
        return View([], {"fig." + key: figures.law_comparison(p, law.tolist(), law_name="typical acceptance, exact")})
    return View([], {"fig." + key: figures.decomposition_bar(p, q)})


def speedup(a: float, c: float) -> View:
    best = iv.best_K(a, c, max(K_RANGE))
    fig = figures.speedup_curve(list(K_RANGE), [iv.speedup(a, k, c) for k in K_RANGE], best)
    return View([Metric("best K", f"{best}", f"×{iv.speedup(a, best, c):.3f}"),
                 Metric("speedup at K = 1: (1 + a)/(1 + c)", f"×{iv.speedup(a, 1, c):.3f}",
                        "a > c: faster" if a > c else "a ≤ c: not faster")], {"speedup_chart": fig})  # fmt: skip


def roofline(B: int, K: int) -> View:
    tokens = B * (K + 1)
    ridge = iv.EXAMPLE_PEAK_FLOPS / iv.EXAMPLE_BANDWIDTH
    grid = np.unique(np.concatenate([np.geomspace(1, 2**16, 200).round(), [tokens]]))
    roof = iv.roofline(EXAMPLE_PARAMS, grid.tolist())
    fig = figures.roofline_chart(roof.tokens.tolist(), roof.seconds.tolist(), roof.ridge_tokens, float(tokens))
    return View([Metric("verification cost (decode steps of this batch)", f"{iv.verify_cost(B, K):.2f}")],
                {"roofline_chart": fig},
                f"{tokens:,} tokens in the pass; the ridge is at {ridge:.0f} tokens "
                f"({iv.EXAMPLE_PEAK_FLOPS / 1e12:.0f} TFLOP/s over {iv.EXAMPLE_BANDWIDTH / 1e12:.2f} TB/s). "
                f"Chart: a {EXAMPLE_PARAMS / 1e9:.0f}-billion-parameter model in 16-bit weights (the cost ratio does "
                "not depend on the size).")  # fmt: skip


def tokens(K: int) -> View:
    a = theory.acceptance_rate(iv.REFERENCE_P, iv.UNIFORM_Q)
    return View([Metric(f"tokens per target pass, a = {a:.2f}", f"{theory.expected_tokens(a, K):.4f}"),
                 Metric("accepted drafts alone", f"{iv.accepted_drafts(a, K):.4f}"),
                 Metric("limit as K grows: 1/(1 − a)", f"{1 / (1 - a):.4f}")], {})  # fmt: skip


def first_rejection(K: int) -> View:
    p, q = iv.REFERENCE_P, iv.UNIFORM_Q
    law = _law(p, q, "count_after_rejection", K)
    return View([Metric("TV from p when passing drafts after a rejection count",
                        f"{topics.count_after_rejection_tv(K):.4f}")],
                {"first_rejection_chart": figures.law_comparison(p, law, law_name="count_after_rejection, exact")},
                "At K = 1 no draft comes after the first: nothing to count, nothing wrong.")  # fmt: skip


def kv_rollback(L: int, K: int, j: int, page: int) -> View:
    r = topics.kv_rollback(L, K, j, page)
    return View([Metric("target keeps (positions)", f"{r.target_kept}", f"−{r.target_dropped} dropped"),
                 Metric("pages freed", f"{r.pages_freed}", f"{r.pages_kept} of {r.pages_held} kept"),
                 Metric("drafter keeps", f"{r.drafter_kept}", f"of {r.drafter_written} fed"),
                 Metric("the drafter feeds next round", f"{r.next_drafter_feed} token(s)")], {},
                f"The target fed L + K = {r.target_written} positions; the token this round emits is in no cache "
                "until the next pass feeds it.")  # fmt: skip


def trees(k: int, depth: int) -> View:
    sh = topics.tree_shapes(k, depth)
    chains, kary = tree_shapes.chains_name(k), tree_shapes.kary_name(k)
    return View([Metric("a node accepts one of k (recursive residual)", f"{sh.node_acceptance:.4f}"),
                 Metric(f"{chains}: drafts kept", f"{sh.chains:.4f}"),
                 Metric(f"{kary}: drafts kept", f"{sh.kary:.4f}")],
                {"shape." + chains: tree_shapes.shape_figure(tree.multi_draft_parents(k, depth), chains),
                 "shape." + kary: tree_shapes.shape_figure(tree.kary_parents(k, depth), kary)})  # fmt: skip


def block(seed: int) -> View:
    toy = topics.block_toy()
    trace = block_trace.seeded_block_trace(court.TOY_P, court.TOY_Q, toy.K, int(seed))
    return View([Metric("token verification: drafts kept per step", f"{toy.token:.4f}"),
                 Metric("block verification: drafts kept per step", f"{toy.block:.4f}")],
                {"block_chart": figures.block_steps(trace)})  # fmt: skip


def settings(T: float, top_p: float) -> View:
    p_raw, q = np.array(iv.REFERENCE_P), np.array(iv.UNIFORM_Q)
    p, tv = topics.request_target(T, top_p)  # the question's text reads the same function
    fig = figures.settings_bars(p_raw.tolist(), p.tolist(), q.tolist(), q.tolist(), ((p == 0) & (p_raw > 0)).tolist(),
                                [False] * q.size)
    return View([Metric("acceptance against the processed p", f"{theory.acceptance_rate(p, q):.4f}"),
                 Metric("TV(raw p, processed p): what the raw target gets wrong", f"{tv:.4f}")],
                {"settings_chart": fig})  # fmt: skip


def unclamped(preset: str) -> View:
    p, q = position.preset(preset)
    law = _law(p, q, "unclamped_residual", 1)
    return View([Metric("TV from p, unclamped residual (K = 1)", f"{theory.total_variation(np.asarray(law), p):.4f}")],
                {"unclamped_chart": figures.law_comparison(p, law, law_name="unclamped residual, exact")})  # fmt: skip


def ragged(num_draft: int) -> View:
    rb = topics.ragged_bonus(num_draft, iv.RAGGED_EXAMPLE[1])
    return View([Metric("bonus from specviz.verify (token = row)", f"{rb.rule}"),
                 Metric("bonus from wrong_bonus_row", f"{rb.mistake}")], {})  # fmt: skip
