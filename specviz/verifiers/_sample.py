"""The replacement-or-bonus draw: inverse CDF from one uniform, one row per batch row.

# B rows, R rows drawn here, V vocabulary, C columns per chunk, BLOCK tokens per block

Row b draws from either its target row p (bonus, or the fallback when the residual has no
mass) or the residual max(0, p - q) (after a rejection; p without the drafted token for a
deterministic drafter). The token is the first index whose running weight exceeds
``u * total``.

Three choices make this fast, reproducible and safe:

- **Exact weights.** Each weight w is floored to a multiple of 2^-48 (``GRID``): the weight
  is the integer floor(w * 2^48), held in the inputs' float type (a power-of-two scaling and
  a floor are exact in float32 and float64) and summed in float64. A row whose weights sum
  to less than 16 has an integer total below 2^52, so every partial sum is an exact float64
  integer whatever the order of addition: NumPy, torch on the CPU and torch on CUDA return
  bit-identical tokens whatever their reduction kernels do. The cost: a token whose weight
  is below 2^-48 (3.6e-15) is never drawn, and the law moves by at most V * 2^-48 in total
  variation (4.6e-10 at V = 128256). We chose 2^-48 over a finer integer grid (2^-58 in
  int64) because float32 probabilities are themselves only good to about 6e-8 relative and
  rows are accepted with a sum error of 1e-4, five orders above the bound; because a NaN or
  an infinity stays NaN or infinite through float sums (an int64 cast turns NaN into
  INT64_MIN, and 256 of those sum to 0); and because it is faster (no int64 conversion).
- **A guard that cannot be skipped.** A row whose total is not finite or reaches 2^52, or
  whose weights come from p alone and hold a NaN, an infinity or a negative entry, raises
  :class:`~specviz.errors.InputError`, with ``validate=False`` too: such a row would make the
  token depend on the library's summation order, or be garbage.
- **Two levels, one read.** The weights are summed per block of ``BLOCK`` tokens; the
  running sum over blocks picks the block, and only that block's weights are computed again
  to pick the token. At large V each row is processed alone, through views of the inputs
  and one reused buffer (no gathered copy, no page faults), so its bytes are read from memory
  once and every later pass runs in cache; at small V the rows are gathered and processed
  together, a chunk of columns at a time; V <= 256 needs one level only. With
  ``validate=True`` the rows read here are checked while they are in cache, not gathered and
  read again (see :func:`draw`).
- **Which kernels.** On the CPU with Numba installed, the block sums (with the row checks)
  run in one compiled loop per row (:mod:`specviz.verifiers._fused`, which says how it keeps
  the same tokens). Torch CPU float32/float64 tensors run this NumPy code on zero-copy views
  (``specviz.verifiers.verify._numpy_twin``); CUDA tensors and half precision run the torch
  code, and CUDA gathers all rows and columns at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._types import Array
from ..errors import InputError, digits
from . import _fused as numba_pass
from . import _validate as check
from .reference import GRID

# Weights are floor(w * GRID): exact integers held in floats, on the reference's grid.
MAX_TOTAL = 16 * GRID  # 2^52: a row total below it keeps every partial sum exact in float64
BLOCK = 256  # tokens per block of the two-level search (V itself when smaller)
ROW_LOOP_V = 8192  # on the CPU, from this V on each row is processed alone through views


def draw(*args: Any) -> Array:
    """:func:`_draw` with NumPy's floating-point warnings off (the guard catches what they flag)."""
    with args[0].quiet():
        return _draw(*args)


def _draw(
    ops: Any,
    P: Any,
    Q: Any,
    xs: Array,
    sp: Array,
    residual: Array,
    u: Array,
    V: int,
    validate: bool = False,
    compiled: bool = False,
) -> Array:
    """One token per row (B,).

    ``P``/``Q``: row accessors (``specviz.verifiers.verify._Rows``; Q None for a deterministic drafter).
    ``xs`` (B, K) draft tokens, ``sp`` (B,) the position each row draws at, ``residual`` (B,)
    bool: draw from the residual at that position rather than from p; ``u`` (B,) uniforms.
    ``compiled``: the call's choice (``specviz.verifiers._fused.compiled``) to run the compiled
    loops on NumPy tables that fit them.

    With ``validate``, every full row read here is checked as it is read: each entry finite
    and in [0, 1] (one max over the entries' bit patterns), and the row summing to 1 within
    :func:`specviz.verifiers._validate.sum_atol` (a row drawn from p: its integer total, which is its sum
    to within V * 2^-48; a residual row: the sums of its p and q rows, taken in cache).
    """
    B = int(sp.shape[0])
    if V <= BLOCK:
        return _draw_one_block(ops, P, Q, xs, sp, residual, u, V, validate, compiled)
    ar = ops.arange(B)
    bs = min(BLOCK, V)
    nb = -(-V // bs)
    groups = [(ops.nonzero(~residual), False), (ops.nonzero(residual), True)]
    S = ops.full((B, nb), 0.0, np.float64)  # (B, nb) weight of each block
    drawn = ops.full((B,), -1, np.int64) if ops.name == "numpy" else None  # tokens the Numba pass drew
    for rows, use_res in groups:
        if int(rows.shape[0]):
            S[rows], tok = _block_sums(ops, P, Q, xs, rows, sp[rows], use_res, V, bs, validate, u[rows], compiled)
            if tok is None:
                drawn = None
            elif drawn is not None:
                drawn[rows] = tok
    total = S.sum(-1)  # (B,) exact
    empty = ops.nonzero(total <= 0)  # no residual mass (p == q up to rounding): draw from p
    if drawn is not None and not int(empty.shape[0]):
        return drawn  # the same two-level search below, run inside the Numba pass
    if int(empty.shape[0]):
        S[empty], _ = _block_sums(ops, P, Q, xs, empty, sp[empty], False, V, bs, validate, u[empty], compiled)
        residual = residual & (total > 0)
        groups = [(ops.nonzero(~residual), False), (ops.nonzero(residual), True)]
        total = S.sum(-1)
    C = ops.cumsum64(S)  # (B, nb) running weight at the end of each block: exact integers
    thr = ops.floor64(u * total)  # (B,) in [0, total)
    thr = ops.where(thr < total, thr, total - 1)  # float rounding of u * total may reach it
    blk = ops.count_le(C, thr)  # (B,) first block whose running weight exceeds thr
    before = ops.where(blk > 0, C[ar, ops.where(blk > 0, blk - 1, 0)], 0.0)  # (B,) weight before it
    cols = blk[:, None] * bs + ops.arange(bs)[None, :]  # (B, bs)
    w = ops.full((B, bs), 0.0, np.float64)
    for rows, use_res in groups:
        if int(rows.shape[0]):
            w[rows] = ops.to_float64(_block_weights(ops, P, Q, xs, rows, sp[rows], use_res, cols[rows], V))
    inner = ops.count_le(ops.cumsum64(w), thr - before)  # (B,) index inside the block
    return blk * bs + inner


def _draw_one_block(
    ops: Any, P: Any, Q: Any, xs: Array, sp: Array, residual: Array, u: Array, V: int, validate: bool,
    compiled: bool,
) -> Array:
    """V <= BLOCK: one level and one group of rows (the small vocabularies of the lab).

    The same float operations on the same values as the two-level search with a single
    block (whose running sum is the total), so the tokens are the same; it only skips the
    second pass over the block and the split of rows into groups. Rows drawn from p use
    max(0, p - 0) = p (the guard below has already refused negative and non-finite p there).
    """
    B = int(sp.shape[0])
    loop = compiled and ops.name == "numpy" and not validate and B and (Q is None or int(Q.table.shape[0]))
    if loop and numba_pass.fits(P.table, None if Q is None else Q.table):
        q_table, q_start = (None, None) if Q is None else (Q.table, Q.start)
        tokens = numba_pass.draw_small(P.table, P.start, q_table, q_start, xs, sp, residual, u, V)
        if tokens is not None:
            return tokens
    ar = ops.arange(B)
    p = ops.upcast_half(P.at(ar, sp, None, ops))  # (B, V) a private copy
    has_res = bool(residual.any()) if B else False
    # Rows drawn from p alone (p with the drafted token removed too, as at V > 256) need a finite,
    # non-negative p; with validate every row read does.
    if B and bool(ops.outside_unit_rows(p.reshape(1, -1))[0]):
        flagged = ops.outside_unit_rows(p)
        if not validate and Q is not None:
            flagged = flagged & ~residual
        _precise(ops, P, ar, sp, flagged, "target_probs")
    w = ops.empty((B, V), ops.compute_dtype(P.table))
    if not has_res:
        ops.copy_into(w, p)
    elif Q is None:  # one-hot q: the residual is p with the drafted token removed
        x = xs[ar, ops.where(residual, sp, 0)]  # (B,)
        drop = residual[:, None] & (ops.arange(V)[None, :] == x[:, None])  # (B, V)
        ops.copy_into(w, ops.where(drop, 0, p))
    else:
        q = Q.at(ar, ops.where(residual, sp, 0), None, ops)  # (B, V)
        q = ops.where(residual[:, None], q, 0)  # rows drawn from p subtract 0
        ops.sub_clamp0_into(w, p, q)
        if validate:
            rq = ops.nonzero(residual)
            qr = ops.upcast_half(q[rq])
            if int(rq.shape[0]) and bool(ops.outside_unit_rows(qr.reshape(1, -1))[0]):
                _precise(ops, Q, ar[rq], sp[rq], ops.outside_unit_rows(qr), "draft_probs")
            _check_sums(ops, "draft_probs", ops.to_float64(ops.sum_rows(qr)), Q.table,
                        exact=lambda i: _exact_sums(ops, Q, ar[rq][i], sp[rq][i]))  # fmt: skip
    if validate:
        _check_sums(ops, "target_probs", ops.to_float64(ops.sum_rows(p)), P.table,
                    exact=lambda i: _exact_sums(ops, P, ar[i], sp[i]))  # fmt: skip
    C = ops.cumsum64(ops.quantize_(w, GRID))  # (B, V) running weights: exact integers
    total = C[:, -1] if V else C.sum(-1)  # (B,)
    over = ~(total < MAX_TOTAL)
    if B and bool(over.any()):
        _precise(ops, P, ar, sp, over, "target_probs")
        if Q is not None and has_res:
            _precise(ops, Q, ar, sp, over & residual, "draft_probs")
        raise InputError("target_probs", "probability rows (each summing to less than 16)",
                         "a row whose weights sum to 16 or more")  # fmt: skip
    empty = ops.nonzero(total <= 0)  # no residual mass (p == q up to rounding): draw from p
    if int(empty.shape[0]):
        pe = p[empty]  # (E, V) these rows are drawn from p now: the guard rows drawn from p get
        if not validate and bool(ops.outside_unit_rows(pe.reshape(1, -1))[0]):
            _precise(ops, P, ar[empty], sp[empty], ops.outside_unit_rows(pe), "target_probs")
        C[empty] = ops.cumsum64(ops.quantize_(ops.to_compute(pe, w), GRID))
        total = C[:, -1]
    return search(ops, C, u)


def search(ops: Any, C: Array, u: Array) -> Array:
    """(R,) the inverse CDF every verifier draws with: the number of running weights C (R, V) (exact
    float64 integers on the :data:`GRID`) <= floor(u * total), the threshold clamped to total - 1
    (float rounding of u * total may reach it). The two-level search of :func:`_draw` runs the same
    comparisons a block at a time; block and tree verification (:func:`specviz.verifiers.block.inverse_cdf`)
    call this one."""
    total = C[:, -1] if int(C.shape[1]) else C.sum(-1)  # (R,)
    thr = ops.floor64(u * total)  # (R,) in [0, total)
    thr = ops.where(thr < total, thr, total - 1)
    return ops.count_le(C, thr)


def _quantized(ops: Any, w: Array, q: Array | None, drop: Any, out: Array | None) -> Array:
    """floor(GRID * weight) for (R, C) rows ``w`` of p: max(0, p - q) when ``q`` is given.

    ``drop``: None, or (rows, cols) entries to zero (the drafted token of a one-hot q).
    ``out``: a buffer to write into, or None to work in place on ``w`` (then a private copy).
    The same elementwise float operations run at both levels of the search, so they agree.
    """
    if out is None:
        out = w
    if q is not None:
        ops.sub_clamp0_into(out, w, q)  # max(0, p - q), q in the weights' dtype first
    elif out is not w:
        ops.copy_into(out, w)
    if drop is not None:
        out[drop] = 0
    return ops.quantize_(out, GRID)


def _block_weights(
    ops: Any, P: Any, Q: Any, xs: Array, b: Array, sp: Array, use_res: bool, cols: Array, V: int
) -> Array:
    """(R, bs) weights of rows b at positions sp for an (R, bs) index array (0 past V)."""
    safe = ops.where(cols < V, cols, V - 1)
    w = ops.upcast_half(P.at(b[:, None], sp[:, None], safe, ops))
    q = None
    if use_res and Q is None:  # one-hot q: the residual is p with the drafted token removed
        w = ops.where(cols == xs[b, sp][:, None], 0, w)
    elif use_res:
        q = Q.at(b[:, None], sp[:, None], safe, ops)
    w = _quantized(ops, w, q, None, None)
    return ops.where(cols < V, w, 0)


class _Checks:
    """Per-row facts gathered during the block-sum pass, judged once at its end."""

    def __init__(self, ops: Any, R: int, sums: bool) -> None:
        self.p_bad = ops.full((R,), False, bool)  # an entry of p outside [+0, 1] or not finite
        self.q_bad = ops.full((R,), False, bool) if sums else None
        self.p_sum = ops.full((R,), 0.0, np.float64) if sums else None
        self.q_sum = ops.full((R,), 0.0, np.float64) if sums else None


def _block_sums(
    ops: Any, P: Any, Q: Any, xs: Array, b: Array, sp: Array, use_res: bool, V: int, bs: int, validate: bool, u: Array,
    compiled: bool,
) -> tuple[Array, Array | None]:
    """(R, ceil(V / bs)) float64 weight of each block of bs tokens, with the row checks; and the
    (R,) tokens drawn with uniforms ``u`` when the Numba pass ran (which searches while the rows
    are at hand), else None."""
    R = int(b.shape[0])
    S = ops.full((R, -(-V // bs)), 0.0, np.float64)
    tok = None
    sampled_res = use_res and Q is not None
    # Weights from p alone must be finite and non-negative (checked even with validate=False);
    # residual weights max(0, p - q) are never negative, and a NaN or infinity shows in the total.
    bits = validate or not sampled_res
    chk = _Checks(ops, R, validate and sampled_res)
    if compiled and ops.name == "numpy" and numba_pass.fits(P.table, Q.table if sampled_res else None):
        tok = _numba_pass(P, Q, xs, b, sp, use_res, V, bs, S, chk, u)  # None: it could not be loaded
    if tok is None and ops.device_type == "cpu" and V >= ROW_LOOP_V:
        _row_loop(ops, P, Q, xs, b, sp, use_res, V, bs, S, chk, bits)
    elif tok is None:
        _chunk_loop(ops, P, Q, xs, b, sp, use_res, V, bs, S, chk, bits)
    total = S.sum(-1)  # (R,)
    # Precise checks (and a message naming the argument) only where the fast ones failed.
    if bits and bool(chk.p_bad.any()):
        _precise(ops, P, b, sp, chk.p_bad, "target_probs")
    if chk.q_bad is not None and bool(chk.q_bad.any()):
        _precise(ops, Q, b, sp, chk.q_bad, "draft_probs")
    over = ~(total < MAX_TOTAL)  # NaN, infinite, or too large for exact sums
    if R and bool(over.any()):
        _precise(ops, P, b, sp, over, "target_probs")
        if sampled_res:
            _precise(ops, Q, b, sp, over, "draft_probs")
        raise InputError("target_probs", "probability rows (each summing to less than 16)",
                         "a row whose weights sum to 16 or more")  # fmt: skip
    if validate:
        if sampled_res:  # float sums: rows near the tolerance are summed again exactly
            _check_sums(ops, "target_probs", chk.p_sum, P.table, exact=lambda i: _exact_sums(ops, P, b[i], sp[i]))
            _check_sums(ops, "draft_probs", chk.q_sum, Q.table, exact=lambda i: _exact_sums(ops, Q, b[i], sp[i]))
        elif not use_res:  # the integer total is the row's exact sum on the grid
            _check_sums(ops, "target_probs", total / GRID, P.table)
        else:  # p without the drafted token: its weight added back
            dropped = ops.to_float64(ops.quantize_(ops.upcast_half(P.at(b, sp, xs[b, sp], ops)), GRID))
            _check_sums(ops, "target_probs", (total + dropped) / GRID, P.table)
    return S, tok


def _numba_pass(
    P: Any, Q: Any, xs: Array, b: Array, sp: Array, use_res: bool, V: int, bs: int, S: Array, chk: _Checks, u: Array
) -> Array | None:
    """:func:`specviz.verifiers._fused.block_sums` (Numba) on the rows in place: one read per row.

    None when the compiled loop could not be loaded (a warning said why): the NumPy code runs."""
    Q_table = Q_start = drop = None
    if use_res and Q is not None:
        Q_table, Q_start = Q.table, Q.start
    elif use_res:
        drop = xs[b, sp]
    out = numba_pass.block_sums(P.table, P.start, Q_table, Q_start, b, sp, drop, V, bs, S, chk.q_bad is not None, u)
    if out is None:  # the compiled loop could not be loaded: the caller runs the NumPy code
        return None
    chk.p_bad = out.p_bad
    if chk.q_bad is not None:
        chk.q_bad, chk.p_sum, chk.q_sum = out.q_bad, out.p_sum, out.q_sum
    return out.tokens


def _row_loop(ops, P, Q, xs, b, sp, use_res, V, bs, S, chk, bits) -> None:
    """Each row alone: views of its p (and q) row, one reused buffer, every pass in cache."""
    bl, sl = ops.tolist(b), ops.tolist(sp)
    buf = ops.empty((V,), ops.compute_dtype(P.table))
    drop_tok = ops.tolist(xs[b, sp]) if use_res and Q is None else None
    sums = chk.q_bad is not None
    p_stats, q_stats, p_sums, q_sums = [], [], [], []  # per row, judged after the loop
    for r, (bb, ss) in enumerate(zip(bl, sl, strict=True)):
        p = P.row(bb, ss)  # (V,) a view
        q = Q.row(bb, ss) if use_res and Q is not None else None
        if bits:
            p_stats.append(ops.unit_stat(p))
        if sums:
            q_stats.append(ops.unit_stat(q))
            p_sums.append(ops.sum_all(p))
            q_sums.append(ops.sum_all(q))
        drop = None
        if drop_tok is not None and 0 <= drop_tok[r] < V:
            drop = drop_tok[r]
        ops.block_sums_into(S[r], _quantized(ops, p, q, drop, buf), bs)
    if bits:
        chk.p_bad = ops.unit_bad(p_stats, P.table)
    if sums:
        chk.q_bad = ops.unit_bad(q_stats, Q.table)
        chk.p_sum, chk.q_sum = ops.stack64(p_sums), ops.stack64(q_sums)


def _chunk_loop(ops, P, Q, xs, b, sp, use_res, V, bs, S, chk, bits) -> None:
    """All rows together, gathered a chunk of columns at a time (small V, or CUDA)."""
    R = int(b.shape[0])
    step = V if ops.device_type != "cpu" else max(bs, ops.chunk_elems // R // bs * bs)
    x = xs[b, sp] if use_res and Q is None else None  # (R,) drafted tokens to remove
    for c0 in range(0, V, step):  # a few chunks, each vectorized over rows and columns
        c1 = min(c0 + step, V)
        p = ops.upcast_half(P.cols(b, sp, slice(c0, c1), ops))  # (R, c1 - c0) private copy
        q = None
        if use_res and Q is not None:
            q = Q.cols(b, sp, slice(c0, c1), ops)
        if bits:
            chk.p_bad |= ops.outside_unit_rows(p)
        if chk.q_bad is not None:
            chk.q_bad |= ops.outside_unit_rows(q)
            chk.p_sum += ops.to_float64(ops.sum_rows(p))
            chk.q_sum += ops.to_float64(ops.sum_rows(q))
        drop = None
        if x is not None:
            x_col = x - c0
            hit = ops.nonzero((x_col >= 0) & (x_col < c1 - c0))
            drop = (hit, x_col[hit])
        w = _quantized(ops, p, q, drop, None)
        S[:, c0 // bs : -(-c1 // bs)] = ops.block_sums(w, bs)


def _precise(ops: Any, rows: Any, b: Array, sp: Array, flagged: Array, name: str) -> None:
    """Re-read the flagged rows: raise for a NaN, an infinity or a negative entry."""
    idx = ops.nonzero(flagged)
    for i in ops.tolist(idx):
        row = rows.row(int(b[i]), int(sp[i]))
        if not ops.isfinite_all(row):
            raise InputError(name, "finite probabilities", "NaN or infinite entries")
        lo = ops.scalar(row.min())
        if lo < 0:
            raise InputError(name, "non-negative probabilities", f"minimum {lo:.6g}")


# How far a float sum of a row (float32 blocks of 256, pairwise, or a GPU tree) can be from the row's
# exact sum on the grid: at most 256 * 2^-24 = 1.5e-5 relative, plus V * 2^-48. Rows whose float sum
# is this close to the tolerance, or past it, are summed again exactly.
SUM_MARGIN = 4e-5


def _exact_sums(ops: Any, rows: Any, b: Array, sp: Array) -> Array:
    """(n,) float64 exact sums on the grid, sum(floor(p * 2^48)) / 2^48, of rows (b[i], sp[i]).

    The same number whatever the library or the order of addition (integers below 2^53), so a
    row near the tolerance gets the same verdict from NumPy, torch, CUDA and the Numba pass.
    """
    out = []
    for bi, si in zip(ops.tolist(b), ops.tolist(sp), strict=True):
        w = ops.upcast_half(rows.row(int(bi), int(si))) * 1.0  # a copy in the compute dtype
        out.append(ops.scalar(ops.to_float64(ops.quantize_(w, GRID)).sum()))
    return ops.asarray(out, ops.float64) / GRID


def _check_sums(ops: Any, name: str, sums: Array, table: Array, exact: Any = None) -> None:
    """Rows summing to 1 within the tolerance; the verdict and the message use exact sums on the grid.

    ``sums``: exact already (``exact`` None), or float sums, within :data:`SUM_MARGIN` of the exact
    ones; then ``exact(i)`` gives the exact sums of rows i, for the rows near or past the tolerance.
    """
    if int(sums.shape[0]) == 0:
        return
    tol = check.sum_atol(table)
    if exact is not None:
        near = ops.nonzero(abs(sums - 1.0) > tol - SUM_MARGIN)
        if not int(near.shape[0]):
            return
        sums = exact(near)
    err = abs(sums - 1.0)
    worst = int(ops.argmax_last(err))
    if ops.scalar(err[worst]) > tol:
        raise InputError(
            name,
            f"rows summing to 1 (tolerance {tol:g}); pass probabilities, not logits",
            f"a row summing to {digits(ops.scalar(sums[worst]))}",
        )
