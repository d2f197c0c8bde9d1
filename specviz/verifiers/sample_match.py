"""Sample-and-match verification: lossless for any drafter, and no better than that.

# B rows, K drafts (padded width), V vocabulary

For a row with ``j = num_draft[b]`` drafts x_1 .. x_j and target rows p_0 .. p_j: draw
y_i from p_{i-1} with the i-th draft's own uniform, keep x_i while y_i = x_i, and at the first
mismatch emit y_i in its place; if every draft matches, emit a bonus y_{j+1} from p_j with the
row's sample uniform.

Why it is lossless, for any drafter: the emitted tokens are y_1, y_2, ... up to the first
mismatch, and each y_i was drawn from the target given the tokens before it (which, up to
there, equal the drafts that p_{i-1} was computed after). So the round's output is a prefix of
a plain target sample, cut at a point that depends only on what has been emitted. The drafter's
distribution q is never used: a draft only decides how far the round gets.

What it costs: at one position the draft survives with probability
sum_x q(x) p(x), against sum_x min(p(x), q(x)) for the chain; the first is never larger
(q(x) p(x) <= min(p(x), q(x)) since both are at most 1) and is much smaller unless both
distributions are nearly one-hot. p = q = uniform over V tokens keeps 1/V of the drafts where
the chain keeps all of them. Lossless is not the same as efficient.

Tokens are drawn by the same integer-weight inverse CDF as block verification, so NumPy and
torch return identical tokens for the same uniforms.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._types import Array
from .block import Batch, get_uniforms, inverse_cdf, prepare
from .verify import PAD_TOKEN, Uniforms, Verification


def verify_sample_match(
    target_probs: Array,
    draft_probs: Array | None,
    draft_tokens: Array,
    num_draft: Array,
    *,
    rng: Any = None,
    uniforms: Uniforms | tuple[Array, Array] | None = None,
    validate: bool = True,
) -> Verification:
    """Sample-and-match verification of a padded batch; the output follows the target exactly.

    Parameters
    ----------
    target_probs
        Shape (B, K+1, V). Row b reads positions 0..num_draft[b]; later ones are ignored.
    draft_probs
        Shape (B, K, V) or ``None``: checked when given, otherwise unused (the rule is lossless
        whatever the drafter did).
    draft_tokens
        Shape (B, K) integers; entries at positions >= num_draft[b] are ignored (may be -1).
    num_draft
        Shape (B,) integers in [0, K].
    rng
        ``numpy.random.Generator`` for NumPy inputs, ``torch.Generator`` for torch inputs;
        default a fresh unseeded one. Draws ``accept`` (B, K) first, then ``sample`` (B,).
    uniforms
        Explicit :class:`~specviz.Uniforms`: ``accept`` (B, K) the uniform that draws y_i at
        column i - 1, ``sample`` (B,) the uniform of the bonus draw.
    validate
        Check shapes, ranges and the probability rows that are read.

    Returns
    -------
    Verification
        As from :func:`specviz.verify`, except that ``ratios`` holds p_{i-1}(x_i), the chance
        that y_i matched the i-th draft, at each tested column, and ``sample_uniforms`` is NaN
        where no bonus was drawn (the replacement is the mismatching y itself).
    """
    batch = prepare(target_probs, draft_probs, draft_tokens, num_draft, validate=validate)
    ua, us = get_uniforms(batch, rng, uniforms, validate)
    return _verify(batch, ua, us, validate)


def _verify(batch: Batch, ua: Array, us: Array, validate: bool) -> Verification:
    ops, B, K = batch.ops, batch.B, batch.K
    ar, pos = ops.arange(B), ops.arange(K)
    j, valid, xs = batch.num_draft, batch.valid, batch.tokens
    y = ops.full((B, K), PAD_TOKEN, np.int64)  # (B, K) the target's own draws
    for k in range(K):  # one (B, V) draw per position, vectorized over rows
        rows = ops.nonzero(valid[:, k])
        if int(rows.shape[0]):
            kk = ops.full((int(rows.shape[0]),), k, np.int64)
            p = ops.to_float64(batch.target[rows, kk])  # (R, V)
            y[rows, k] = inverse_cdf(ops, p, ua[rows, k], validate)
    match = valid & (y == xs)  # (B, K)
    n = ops.run_length(match)  # (B,) drafts kept
    bonus = n == j
    bonus_tok = inverse_cdf(ops, ops.to_float64(batch.target[ar, j]), us, validate)  # (B,) from p_j
    last = y[ar, ops.where(bonus, 0, n)] if K else bonus_tok  # (B,) the mismatching y
    tested = valid & (pos[None, :] <= n[:, None])  # (B, K)
    x = ops.where(valid, xs, PAD_TOKEN)
    tokens = ops.full((B, K + 1), PAD_TOKEN, np.int64)
    tokens[:, :K] = ops.where(pos[None, :] < n[:, None], x, PAD_TOKEN)
    tokens[ar, n] = ops.where(bonus, bonus_tok, last)
    px = ops.to_float64(batch.target[ar[:, None], pos[None, :], xs])  # (B, K)
    nan = float("nan")
    return Verification(
        tokens=tokens,
        num_tokens=n + 1,
        num_accepted=n,
        accept_uniforms=ops.where(tested, ua, nan),
        ratios=ops.where(tested, px, nan),
        bonus=bonus,
        sample_uniforms=ops.where(bonus, us, nan),
    )
