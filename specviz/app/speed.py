"""Tokens per step: measured against the closed form, and a speedup model with the drafter's cost.

# K drafts, M values of K, n rows per point

The closed form, E[tokens] = (1 - a^(K+1)) / (1 - a) for a context-free acceptance rate a,
lives in :func:`specviz.proof.theory.expected_tokens`; here the verifier itself is run to measure
it, and the model turns it into a speedup over plain decoding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import plotly.graph_objects as go

from ..errors import InputError
from ..proof import stats, theory
from ..verifiers.verify import verify
from . import figures, results
from .position import draw_iid, preset, verify_context_free
from .presenter import Metric
from .results import Download

MAX_K = 16  # the page's K slider's upper end; a link asking for more falls back to the default
K_RANGE = range(MAX_K + 1)  # the curve's K axis: 0..16 drafts, every value the K slider can take
TEXTBOOK = preset("textbook")  # p = [0.5, 0.3, 0.15, 0.05], q uniform
TEXTBOOK_K = 3
TEXTBOOK_N = 100_000


def two_token_pair(acceptance: float) -> tuple[np.ndarray, np.ndarray]:
    """p = [a, 1 - a] and q one-hot on token 0: ``theory.acceptance_rate(p, q) == a``.

    The drafter always proposes token 0 and the target accepts it with probability p(0) = a,
    independently at every position: the context-free setting of the closed form.
    """
    a = float(acceptance)
    if not 0 <= a <= 1:
        raise InputError("acceptance", "a rate in [0, 1]", str(acceptance))
    return np.array([a, 1 - a]), np.array([1.0, 0.0])


class Measured(NamedTuple):
    K: np.ndarray  # (M,) draft counts
    mean: np.ndarray  # (M,) mean tokens per verification
    se: np.ndarray  # (M,) standard error of the mean
    n: int  # rows per point


def error_bars(m: Measured, expected: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(means, standard errors) of ``m``'s points, the SE NaN (no error bar) where the point cannot speak.

    A point speaks with the power every verdict needs (:func:`specviz.proof.stats.mean_test`'s
    ``conclusive``): below it a standard error of a few rows can read 0 and would be a false promise.
    """
    if len(expected) != len(m.K):
        raise InputError("expected", f"one expectation per point ({len(m.K)})", f"{len(expected)}")
    ok = [stats.mean_test(float(mean), float(e), float(se), m.n).conclusive
          for mean, e, se in zip(m.mean, expected, m.se, strict=True)]  # fmt: skip
    return m.mean, np.where(ok, m.se, np.nan)


def measure_tokens(
    target_probs: np.ndarray, draft_probs: np.ndarray, Ks: Sequence[int], n: int, seed: int, *, bonus: bool = True
) -> Measured:
    """Mean tokens per verification for each K, by running the verifier on n context-free rows.

    ``bonus=False`` counts what :data:`specviz.proof.bugs.BUGS` ``["no_bonus"]`` emits: the rule
    exactly, minus the bonus token. That mistake is the reference with its bonus row swapped, which
    reads the same uniforms in the same order, so its count is the rule's minus the bonus row by row
    (tests/test_reference_parity.py checks it); the rule runs on the engine, several times faster.
    """
    p, q = theory.as_dist(target_probs, "target_probs"), theory.as_dist(draft_probs, "draft_probs")
    if n < 2:
        raise InputError("n", "at least 2 rows per point", str(n))
    means, ses = [], []
    for K in Ks:
        rng = np.random.default_rng([seed, int(K), int(bonus)])
        drafts = draw_iid(q, rng.random((n, K)))  # (n, K)
        res = verify_context_free(p, q, drafts, rng, verify)
        num = np.asarray(res.num_tokens, dtype=np.float64)
        if not bonus:  # BUGS["no_bonus"] on the same uniforms: the same rows without their bonus
            num = num - np.asarray(res.bonus)
        means.append(num.mean())
        ses.append(num.std(ddof=1) / math.sqrt(n))
    return Measured(np.asarray(list(Ks), dtype=np.int64), np.asarray(means), np.asarray(ses), int(n))


def speedup(expected_tokens: float, K: int, draft_cost: float) -> float:
    """Tokens per unit of target time: E[tokens] / (1 + K c).

    One verification costs one target forward pass (scoring K + 1 positions costs about what
    scoring one does while decoding is memory-bound) plus K sequential drafter steps of
    relative cost c each; plain decoding emits 1 token per target pass.
    """
    if draft_cost < 0:
        raise InputError("draft_cost", "a relative cost c >= 0", str(draft_cost))
    return float(expected_tokens) / (1 + int(K) * float(draft_cost))


class SpeedupTable(NamedTuple):
    K: np.ndarray  # (M,)
    tokens: np.ndarray  # (M,) expected tokens per verification, with the bonus
    speedup: np.ndarray  # (M,)
    best_K: int  # the K with the largest modelled speedup (the smallest on ties)


def speedup_table(acceptance: float, Ks: Sequence[int], draft_cost: float) -> SpeedupTable:
    """:func:`speedup` over K for a context-free acceptance rate a."""
    k = np.asarray(list(Ks), dtype=np.int64)
    tokens = np.array([theory.expected_tokens(acceptance, int(K)) for K in k])
    s = np.array([speedup(t, int(K), draft_cost) for t, K in zip(tokens, k, strict=True)])
    return SpeedupTable(k, tokens, s, int(k[int(np.argmax(s))]))


class TokensView(NamedTuple):
    """The page's curve of tokens per step over K, what it says at the chosen K, and its points to download."""

    figure: go.Figure  # the closed form with and without the bonus, and the measured points
    captions: list[str]  # the measured points at K; why a point may not speak (none before a measurement)
    downloads: list[Download]  # the points as CSV and JSON (none before a measurement)


def tokens_view(a: float, K: int, n: int, seed: int, with_bonus: Measured | None,
                without_bonus: Measured | None) -> TokensView:  # fmt: skip
    """The curve over :data:`K_RANGE` at acceptance rate ``a``, measured with ``n`` rows a point (None: not yet)."""
    theory_with, theory_without = ([theory.expected_tokens(a, k, bonus=b) for k in K_RANGE] for b in (True, False))
    bars: list[Any] = [None if m is None else error_bars(m, t)
            for m, t in ((with_bonus, theory_with), (without_bonus, theory_without))]  # fmt: skip
    fig = figures.tokens_curve(list(K_RANGE), theory_with, theory_without, measured=bars[0], measured_without=bars[1],
                               K_mark=K)  # fmt: skip
    if with_bonus is None or without_bonus is None:
        return TokensView(fig, [], [])
    t_with = results.tokens_point(with_bonus.mean[K], with_bonus.se[K], n, theory_with[K])
    t_without = results.tokens_point(without_bonus.mean[K], without_bonus.se[K], n, theory_without[K])
    captions = [f"Points: mean over {n:,} verifications each, error bars ±2 standard errors. At K = {K}: measured "
                f"{results.point_text(t_with)} with the bonus, {results.point_text(t_without)} without (± 1 SE)."]
    if not t_with.conclusive:
        captions.append(f"A point speaks only after {stats.MIN_ROUNDS} rows and when ±SE is small enough to see a "
                        f"shift of {stats.MIN_TOKENS:g} tokens with {t_with.power:.0%} probability; below that a "
                        "standard error of a few rows can read 0 and would be a false promise, so no error bar is "
                        "drawn.")  # fmt: skip
    rows = results.tokens_rows(list(K_RANGE), a, with_bonus, without_bonus, theory_with, theory_without)
    record = {"a": a, "rows_per_point": n, "seed": int(seed), "points": rows}
    return TokensView(fig, captions, [
        Download("Download the points (CSV)", results.to_csv(rows), f"specviz-tokens-a{a:g}.csv", "text/csv",
                 "download_csv"),
        Download("Download the points (JSON)", results.to_json(record), f"specviz-tokens-a{a:g}.json",
                 "application/json", "download_json"),
    ])  # fmt: skip


def textbook_metrics(m: Measured) -> list[Metric]:
    """The textbook example (p = [0.5, 0.3, 0.15, 0.05], q uniform, K = 3): a, the closed form, ``m``'s measurement."""
    a = theory.acceptance_rate(*TEXTBOOK)
    expected = theory.expected_tokens(a, TEXTBOOK_K)
    point = results.tokens_point(m.mean[0], m.se[0], TEXTBOOK_N, expected)
    return [
        Metric("p = [0.5, 0.3, 0.15, 0.05], q uniform: a", f"{a:.2f}"),
        Metric(f"theory, K = {TEXTBOOK_K}", f"{expected:.3f}"),
        # The SE goes under the value: "2.537 ± 0.004 (1 SE)" ran into the next metric on a projector.
        Metric(f"measured ({TEXTBOOK_N:,} rows)", f"{m.mean[0]:.3f}" if point.conclusive else results.point_text(point),
               f"± {m.se[0]:.3f} (1 SE)" if point.conclusive else None),
        Metric("without the bonus (theory)", f"{theory.expected_tokens(a, TEXTBOOK_K, bonus=False):.3f}"),
    ]  # fmt: skip
