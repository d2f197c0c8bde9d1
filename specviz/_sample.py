"""The replacement-or-bonus draw: inverse CDF from one uniform, one row per batch row.

# B rows, R rows drawn here, V vocabulary, C columns per chunk, BLOCK tokens per block

Row b draws from either its target row p (bonus, or the fallback when the residual has no
mass) or the residual max(0, p - q) (after a rejection; p without the drafted token for a
deterministic drafter). The token is the first index whose running weight exceeds
``u * total``.

Two choices make this fast and reproducible:

- **Integer weights.** Each weight is floored to a multiple of 2^-58 (``QUANT``) and held as
  an int64. Sums of integers do not depend on the order of addition, so NumPy, torch on the
  CPU and torch on CUDA produce bit-identical tokens whatever their reduction kernels do.
  The cost is a token whose weight is below 3.5e-18 is never drawn, and the law moves by at
  most V * 2^-58 in total variation (4.5e-13 at V = 128256); float32 probabilities are
  themselves only good to about 6e-8. Rows must sum to less than 16 (probabilities sum to 1).
- **Two levels.** The weights are summed per block of ``BLOCK`` tokens, a chunk of columns
  at a time so the work stays in cache; the running sum over blocks picks the block, and
  only that block's ``BLOCK`` weights are summed again to pick the token. Each probability
  is read from memory once, plus one block per row.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import InputError

Array = Any

QUANT = 2.0**58  # weights are floored to multiples of 1 / QUANT
BLOCK = 256  # tokens per block of the two-level search (V itself when smaller)


def draw(
    ops: Any,
    P: Any,
    Q: Any,
    xs: Array,
    sp: Array,
    residual: Array,
    u: Array,
    V: int,
) -> Array:
    """One token per row (B,).

    ``P``/``Q``: row accessors (``specviz.verify._Rows``; Q None for a deterministic drafter).
    ``xs`` (B, K) draft tokens, ``sp`` (B,) the position each row draws at, ``residual`` (B,)
    bool: draw from the residual at that position rather than from p; ``u`` (B,) uniforms.
    """
    B = int(sp.shape[0])
    ar = ops.arange(B)
    bs = min(BLOCK, V)
    # Rows drawing from p and rows drawing from the residual are handled as two dense groups.
    groups = [(ops.nonzero(~residual), False), (ops.nonzero(residual), True)]
    S = ops.full((B, -(-V // bs)), 0, np.int64)  # (B, nb) weight of each block
    for rows, use_res in groups:
        if int(rows.shape[0]):
            S[rows] = _block_sums(ops, P, Q, xs, rows, sp[rows], use_res, V, bs)
    total = S.sum(-1)  # (B,) exact
    empty = ops.nonzero(total <= 0)  # no residual mass (p == q up to rounding): draw from p
    if int(empty.shape[0]):
        S[empty] = _block_sums(ops, P, Q, xs, empty, sp[empty], False, V, bs)
        residual = residual & (total > 0)
        groups = [(ops.nonzero(~residual), False), (ops.nonzero(residual), True)]
        total = S.sum(-1)
    C = ops.cumsum_int(S)  # (B, nb) running weight at the end of each block
    thr = ops.floor_int(u * ops.to_float64(total))  # (B,) in [0, total)
    thr = ops.where(thr < total, thr, total - 1)  # float rounding of total may reach it
    blk = ops.count_le(C, thr)  # (B,) first block whose running weight exceeds thr
    before = ops.where(blk > 0, C[ar, ops.where(blk > 0, blk - 1, 0)], 0)  # (B,) weight before it
    cols = blk[:, None] * bs + ops.arange(bs)[None, :]  # (B, bs)
    w = ops.full((B, bs), 0, np.int64)
    for rows, use_res in groups:
        if int(rows.shape[0]):
            w[rows] = _weights(ops, P, Q, xs, rows, sp[rows], use_res, cols[rows], V)
    inner = ops.count_le(ops.cumsum_int(w), thr - before)  # (B,) index inside the block
    return blk * bs + inner


def _weights(ops: Any, P: Any, Q: Any, xs: Array, b: Array, sp: Array, use_res: bool, cols: Any, V: int) -> Array:
    """Integer weights (R, C) of rows b at positions sp, for a column slice or index array.

    ``cols`` is a ``slice`` (the block-sum pass) or an (R, C) index array (the chosen blocks;
    columns >= V get weight 0). The same elementwise float operations run in both cases,
    so the two levels agree exactly.
    """
    sliced = isinstance(cols, slice)
    safe = cols if sliced else ops.where(cols < V, cols, V - 1)
    w = ops.upcast_half(P.cols(b, sp, safe, ops) if sliced else P.at(b[:, None], sp[:, None], safe))
    if use_res and Q is None:  # one-hot q: the residual is p with the drafted token removed
        x = xs[b, sp]  # (R,)
        if sliced:
            x_col = x - cols.start
            hit = ops.nonzero((x_col >= 0) & (x_col < int(w.shape[1])))
            w[hit, x_col[hit]] = 0
        else:
            w = ops.where(cols == x[:, None], 0, w)
    elif use_res:
        q = Q.cols(b, sp, safe, ops) if sliced else Q.at(b[:, None], sp[:, None], safe)
        w = ops.sub_clamp0_(w, ops.upcast_half(q))  # max(0, p - q), in place
    if not sliced:
        w = ops.where(cols < V, w, 0)
    return ops.quantize(w, QUANT)


def _block_sums(ops: Any, P: Any, Q: Any, xs: Array, b: Array, sp: Array, use_res: bool, V: int, bs: int) -> Array:
    """(R, ceil(V / bs)) int64 weight of each block of bs tokens, computed chunk by chunk."""
    R = int(b.shape[0])
    S = ops.full((R, -(-V // bs)), 0, np.int64)
    step = V if ops.device_type == "cuda" else max(bs, ops.chunk_elems // R // bs * bs)
    for c0 in range(0, V, step):  # a few dozen chunks, each vectorized over rows and columns
        c1 = min(c0 + step, V)
        wq = _weights(ops, P, Q, xs, b, sp, use_res, slice(c0, c1), V)  # (R, c1 - c0)
        full = (c1 - c0) // bs * bs
        S[:, c0 // bs : (c0 + full) // bs] = wq[:, :full].reshape(R, -1, bs).sum(-1)
        if full < c1 - c0:  # the tail block of the vocabulary
            S[:, -1] = wq[:, full:].sum(-1)
    # A weight of 16 or more (or an overflowing sum) is no probability: validate=False let it in.
    if R and (ops.scalar(S.min()) < 0 or ops.scalar(ops.to_float64(S).sum(-1).max()) >= 16 * QUANT):
        raise InputError("target_probs", "probability rows (each summing to less than 16)",
                         "values too large or not finite (validate=False skipped the checks)")  # fmt: skip
    return S
