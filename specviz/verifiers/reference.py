"""The reference: each verification rule in plain NumPy, read top to bottom; the oracle of the engine.

# B rows, K drafts (padded width), V vocabulary, N nodes per tree (or total drafts, flat layout)

:func:`verify` (the chain rule), :func:`verify_flat`, :func:`verify_block` and :func:`verify_tree`
take the arguments and return the results of :func:`specviz.verify`, :func:`specviz.verify_flat`,
:func:`specviz.verify_block` and :func:`specviz.verify_tree`. With the same explicit uniforms they
return the engine's tokens on every row, bit for bit (tests/test_reference_parity.py checks every
engine path against them); the engine is fast, this module is the statement of the rule.

The chain rule (docs/design.md, "1. The algorithm contract"; the proof that the output follows
the target is in :mod:`specviz.verifiers.verify`), for a row with j = num_draft[b] drafts:

1. coins: one fresh uniform u_i per draft position;
2. accept x_i iff ``u_i * q_i(x_i) < p_i(x_i)`` (q(x) = 1 for a deterministic drafter);
3. the first rejection, by a cumulative product of the accept bits: drafts after it never count;
4. at the rejected position i, a token from the residual max(0, p_i - q_i) (p_i with x_i removed
   for a deterministic drafter), or from p_i when that has no mass;
5. if every draft survives, the bonus from p_j: row num_draft[b], not the padded tensor's last.

The draw of steps 4 and 5 is the engine's, and one grid and one inverse CDF serve every rule
(:func:`inverse_cdf`; the engine's :func:`specviz.verifiers._sample.search`): each weight is
floor(w * 2^48), computed in the weights' float type (the input's for the chain, float32 for half
precision, q cast to p's type before p - q; float64 for block and tree, whose weights are products
w_i p_i - q_i and the tree's unnormalized r) and summed in float64, exact below 16; the token is
the number of running weights <= floor(u * total), clamped to total - 1 (why this grid:
:mod:`specviz.verifiers._sample`). Block and tree masses are the same integer sums, over 2^48.

Mistakes. Each rule is a function of named steps collected in a NamedTuple (:class:`ChainSteps`,
:class:`BlockSteps`, :class:`TreeSteps`); the correct steps are :data:`CHAIN`, :data:`BLOCK` and
:data:`TREE`. :func:`with_step` returns the reference with exactly one step replaced, under a new
name, with the same signature: that is how :mod:`specviz.proof.bugs` builds every classic
mistake, each step defined beside its explanation. The reference takes no mistake flag.

Inputs: NumPy arrays or torch tensors (converted to NumPy at the top; half precision to
float32, which holds bfloat16 and float16 exactly and is the type the engine computes them in;
results go back as torch tensors on the CPU). ``rng`` draws the uniforms in the engine's order
(accept, then sample), so a seeded call gives the engine's draws too. Input errors are the
engine's :class:`~specviz.errors.InputError`, naming the argument (:mod:`specviz.verifiers._validate`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .._types import Array
from ..errors import InputError
from . import _reference_inputs as _in
from . import _validate as check
from ._xp import NumpyOps, is_torch
from .block import QUANT, prepare, quantize
from .tree import TreeVerification, _prepare, _uniforms
from .verify import PAD_TOKEN, Uniforms, Verification

GRID = 2.0**48  # the chain's grid: weights are floor(w * GRID), as specviz.verifiers._sample.GRID
MAX_TOTAL = 2.0**52  # a row of weights must total less than this (16 * GRID): exact float64 sums
_NP = NumpyOps()


# --------------------------------------------------------------------------- the draw (chain)


def on_grid(w: np.ndarray) -> np.ndarray:
    """(R, V) weights floored to multiples of 2^-48, as integers: floor(w * 2^48) in w's dtype, then float64."""
    return np.floor(w * w.dtype.type(GRID)).astype(np.float64, copy=False)


def inverse_cdf(w: np.ndarray, u: np.ndarray) -> np.ndarray:
    """(R,) tokens from non-negative weights (R, V) and uniforms u (R,): the number of running
    weights <= floor(u * total). Refuses rows that are not finite, hold a negative weight or total
    16 or more (the engine's guard, with validate=False too)."""
    W = on_grid(w)  # (R, V)
    C = np.cumsum(W, axis=1)  # (R, V) running weights: exact integers
    total = C[:, -1]  # (R,)
    if not (total < MAX_TOTAL).all() or W.min(initial=0.0) < 0:  # NaN and infinities fail the first
        raise _Refused
    thr = np.floor(u * total)  # (R,)
    thr = np.where(thr < total, thr, total - 1)  # u * total may round up to total
    return np.count_nonzero(C <= thr[:, None], axis=1).astype(np.int64)


class _Refused(Exception):
    """A row the draw refuses; the rule turns it into the InputError naming the argument."""


# --------------------------------------------------------------------------- the chain's steps


class Kept(NamedTuple):
    kept: np.ndarray  # (B, K) bool: drafts emitted (for the rule, those before the first rejection)
    first: np.ndarray  # (B,) int64: the first rejected position, or num_draft
    tested: np.ndarray  # (B, K) bool: positions whose coin was looked at


def coins(ua: np.ndarray) -> np.ndarray:
    """Step 1: one fresh uniform per position (B, K)."""
    return ua


def accept(u: np.ndarray, px: np.ndarray, qx: np.ndarray) -> np.ndarray:
    """Step 2: (B, K) accept iff u * q(x) < p(x); a draft with q(x) = 0 is rejected."""
    return (qx > 0) & (u * qx < px)


def first_rejection(passed: np.ndarray, valid: np.ndarray) -> Kept:
    """Step 3: the first rejection ends the row (a cumulative product of the accept bits)."""
    run = np.logical_and.accumulate(passed & valid, axis=1)  # (B, K) the cumulative product of the bits
    first = run.sum(axis=1)  # (B,) int64
    pos = np.arange(passed.shape[1])
    return Kept(run, first, valid & (pos[None, :] <= first[:, None]))


def residual(p: np.ndarray, q: np.ndarray | None, x: np.ndarray) -> np.ndarray:
    """max(0, p - q) (R, V) in p's dtype; for a deterministic drafter p with the drafted token x removed."""
    if q is None:
        w = p.copy()
        w[np.arange(len(x)), x] = 0
        return w
    return np.maximum(p - q.astype(p.dtype), 0)


def replacement(p: np.ndarray, q: np.ndarray | None, x: np.ndarray, u: np.ndarray, draw: Callable) -> np.ndarray:
    """Step 4: (R,) the token after a rejection, from the residual; from p where it has no mass
    (p == q up to rounding: unreachable in exact arithmetic)."""
    w = residual(p, q, x)  # (R, V)
    empty = on_grid(w).sum(axis=1) <= 0  # (R,) NaN stays False: the draw refuses it
    w[empty] = p[empty]
    return draw(w, u)


def replacement_row(first: np.ndarray, rejected: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray]:
    """Where the replacement is drawn: the rejected position's residual (rows (B,), from-residual (B,))."""
    return first, rejected


def sample_uniform(us: np.ndarray, ua: np.ndarray, first: np.ndarray, rejected: np.ndarray) -> np.ndarray:
    """A separate fresh uniform (B,) for the replacement or bonus draw: never a coin reused."""
    return us


def bonus_row(num_draft: np.ndarray, K: int) -> np.ndarray:
    """Step 5: (B,) the target row of the bonus, num_draft[b] (-1 would mean no bonus)."""
    return num_draft


class ChainSteps(NamedTuple):
    coins: Callable = coins
    accept: Callable = accept
    first_rejection: Callable = first_rejection
    replacement_row: Callable = replacement_row
    replacement: Callable = replacement
    sample_uniform: Callable = sample_uniform
    bonus_row: Callable = bonus_row
    inverse_cdf: Callable = inverse_cdf


CHAIN = ChainSteps()  # the rule


def _chain(steps: ChainSteps, P: np.ndarray, Q: np.ndarray | None, x: np.ndarray, j: np.ndarray,
           ua: np.ndarray, us: np.ndarray, validate: bool, tol: tuple[float, float]) -> Verification:  # fmt: skip
    """The chain rule on checked NumPy inputs: P (B, K+1, V), Q (B, K, V) or None, x (B, K), j (B,)."""
    B, K = x.shape
    ar, pos = np.arange(B), np.arange(K)
    valid = pos[None, :] < j[:, None]  # (B, K)
    xs = np.where(valid, x, 0)  # (B, K) safe column indices
    check.check_range("draft_tokens", xs, 0, P.shape[2] - 1, _NP, "token ids at positions < num_draft")
    px = _at(P, ar[:, None], pos[None, :], xs).astype(np.float64)  # (B, K) p_i(x_i)
    qx = np.ones((B, K)) if Q is None else _at(Q, ar[:, None], pos[None, :], xs).astype(np.float64)  # (B, K)
    if validate:
        check.check_probes("target_probs", px[valid], _NP)
        if Q is not None:
            check.check_probes("draft_probs", qx[valid], _NP)

    u = steps.coins(ua)  # (B, K)
    passed = steps.accept(u, px, qx) & valid  # (B, K)
    kept, first, tested = steps.first_rejection(passed, valid)
    rejected = first < j  # (B,)
    n = kept.sum(axis=1).astype(np.int64)  # (B,) drafts emitted

    bonus_at = steps.bonus_row(j, K)  # (B,) -1: no bonus
    rep_at, from_res = steps.replacement_row(first, rejected, K)
    draws = rejected | (bonus_at >= 0)  # (B,) rows that emit one more token
    row = np.where(rejected, rep_at, np.maximum(bonus_at, 0))  # (B,) the target row drawn at
    us_draw = steps.sample_uniform(us, ua, first, rejected)  # (B,)
    token = _draw_rows(steps, P, Q, xs, row, rejected & from_res, draws, us_draw, validate, tol)

    tokens = np.full((B, K + 1), PAD_TOKEN, np.int64)
    tokens[:, :K] = _in_order(x, kept)
    tokens[ar, n] = np.where(draws, token, PAD_TOKEN)
    ratio = np.where(tested & (qx > 0), px / np.where(tested & (qx > 0), qx, 1.0), np.nan)
    return Verification(tokens=tokens, num_tokens=n + draws, num_accepted=n,
                        accept_uniforms=np.where(tested, u, np.nan), ratios=ratio,
                        bonus=~rejected & draws, sample_uniforms=np.where(draws, us_draw, np.nan))  # fmt: skip


def _at(T: np.ndarray, b: np.ndarray, pos: np.ndarray, cols: np.ndarray | None = None) -> np.ndarray:
    """T[b, pos] (rows, a copy) or T[b, pos, cols] (entries), broadcast: one flat take where T is
    contiguous (NumPy's three-index gathers cost several times more at the Bug lab's sizes)."""
    if not T.flags.c_contiguous:
        return T[b, pos] if cols is None else T[b, pos, cols]
    n, V = T.shape[1], T.shape[2]
    if cols is None:
        return T.reshape(-1, V).take(b * n + pos, axis=0)
    return T.reshape(-1).take((b * n + pos) * V + cols)


def _in_order(x: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """(B, K) the kept drafts in order, then -1 (for the rule, kept is already a prefix)."""
    prefix = np.arange(x.shape[1])[None, :] < kept.sum(axis=1)[:, None]  # (B, K)
    if np.array_equal(kept, prefix):
        return np.where(kept, x, PAD_TOKEN)
    out = np.full(x.shape, PAD_TOKEN, np.int64)
    rows, cols = np.nonzero(kept)
    out[rows, np.cumsum(kept, axis=1)[rows, cols] - 1] = x[rows, cols]
    return out


def _draw_rows(steps: ChainSteps, P: np.ndarray, Q: np.ndarray | None, xs: np.ndarray, row: np.ndarray,
               res: np.ndarray, draws: np.ndarray, u: np.ndarray, validate: bool,
               tol: tuple[float, float]) -> np.ndarray:  # fmt: skip
    """(B,) the replacement (rows ``res``) or bonus token of each drawing row; -1 where none."""
    out = np.full(P.shape[0], PAD_TOKEN, np.int64)
    rr, rp = np.flatnonzero(draws & res), np.flatnonzero(draws & ~res)  # from a residual, from p
    p_res, p = _compute(_at(P, rr, row[rr])), _compute(_at(P, rp, row[rp]))  # (R, V) copies
    q_res = None if Q is None else _compute(_at(Q, rr, row[rr]))  # residual rows are below K
    if validate:
        _in.check_rows("target_probs", p_res, tol[0])
        _in.check_rows("target_probs", p, tol[0])
        if q_res is not None:
            _in.check_rows("draft_probs", q_res, tol[1])
    try:
        if len(rr):
            out[rr] = steps.replacement(p_res, q_res, xs[rr, row[rr]], u[rr], steps.inverse_cdf)
        if len(rp):
            out[rp] = steps.inverse_cdf(p, u[rp])
    except _Refused:
        _in.name_refusal(np.concatenate([p_res, p]), q_res)
    return out


def _compute(rows: np.ndarray) -> np.ndarray:
    """Rows (a private copy) in the engine's compute dtype: float32 for half precision, else as given."""
    return rows.astype(np.float32) if rows.dtype == np.float16 else rows


class _Rule:
    """A reference rule: its steps and the function that runs them, with the public signature."""

    def __init__(self, run: Callable, steps: NamedTuple, name: str, doc: str) -> None:
        self.run, self.steps, self.__name__, self.__doc__ = run, steps, name, doc
        self.__qualname__ = name
        sig = inspect.signature(run)  # the public signature: run's without its steps
        self.__signature__ = sig.replace(parameters=list(sig.parameters.values())[1:])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.run(self.steps, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<reference verifier {self.__name__}>"


def _verify(steps: ChainSteps, target_probs: Array, draft_probs: Array | None, draft_tokens: Array, num_draft: Array,
            *, rng: Any = None, uniforms: Any = None, validate: bool = True) -> Verification:  # fmt: skip
    P, Q, x, j, ua, us, tol, torch_in = _in.chain_inputs(
        target_probs, draft_probs, draft_tokens, num_draft, rng, uniforms, validate)
    with np.errstate(invalid="ignore", over="ignore"):
        return _in.back(_chain(steps, P, Q, x, j, ua, us, validate, tol), torch_in)


def _verify_flat(steps: ChainSteps, target_probs: Array, draft_probs: Array | None, draft_tokens: Array,
                 draft_indptr: Array, *, rng: Any = None, uniforms: Any = None,
                 validate: bool = True) -> Verification:  # fmt: skip
    """The flat layout turned into the padded one (specviz.verifiers.layout), uniforms included."""
    P, Q, x, j, ua, us, tol, torch_in = _in.flat_inputs(
        target_probs, draft_probs, draft_tokens, draft_indptr, rng, uniforms, validate)
    with np.errstate(invalid="ignore", over="ignore"):
        return _in.back(_chain(steps, P, Q, x, j, ua, us, validate, tol), torch_in)


verify = _Rule(_verify, CHAIN, "verify", """The chain rule, padded layout: :func:`specviz.verify`'s signature, result.

    target_probs (B, K+1, V), draft_probs (B, K, V) or None (a deterministic drafter), draft_tokens
    (B, K), num_draft (B,); ``rng`` or ``uniforms`` (accept (B, K), sample (B,)); ``validate``.""")
verify_flat = _Rule(_verify_flat, CHAIN, "verify_flat", """The chain rule, flat layout: :func:`specviz.verify_flat`'s
    signature and result (target_probs (N+B, V), draft_probs (N, V), draft_tokens (N,), draft_indptr (B+1,)).""")


# --------------------------------------------------------------------------- block verification


def block_weights(ratio: np.ndarray, valid: np.ndarray, cap: bool = True) -> np.ndarray:
    """(B, K+1) w_0 = 1, w_i = min(1, w_{i-1} p(x_i) / q(x_i)); ratio 0 where q(x) = 0.
    ``cap=False``: the uncapped running product (the lossy variant's last threshold reads it)."""
    B, K = ratio.shape
    w = np.ones((B, K + 1))
    for k in range(K):
        t = np.where(w[:, k] > 0, w[:, k] * ratio[:, k], 0.0)  # 0 * inf would be NaN
        w[:, k + 1] = np.where(valid[:, k], np.where(t < 1, t, 1.0) if cap else t, w[:, k])
    return w


def block_residual(w: np.ndarray, p: np.ndarray, q: np.ndarray | None, x: np.ndarray) -> np.ndarray:
    """(R, V) max(0, w p - q) in float64; q one-hot on x for a deterministic drafter."""
    r = p * w[:, None]
    if q is None:
        r[np.arange(len(x)), x] -= 1.0
    else:
        r = r - q
    return np.maximum(r, 0.0)


def block_mass(r: np.ndarray) -> np.ndarray:
    """(R,) the residual mass on the grid: the integer sum of floor(r * 2^48), over 2^48."""
    return quantize(_NP, r, False).sum(axis=1) / QUANT  # quantize refuses NaN, infinite, negative rows


def block_threshold(m: np.ndarray, w: np.ndarray) -> np.ndarray:
    """h_i = m_i / (m_i + 1 - w_i); 1 when that is 0 / 0."""
    den = m + (1.0 - w)
    return np.where(den > 0, m / np.where(den > 0, den, 1.0), 1.0)


def block_last_threshold(w: np.ndarray, product: np.ndarray) -> np.ndarray:
    """h_j = w_j: the capped running ratio (the uncapped product is the lossy variant's)."""
    return w


def block_stop(passed: np.ndarray) -> np.ndarray:
    """(B,) tau: the largest i whose uniform passes, 0 if none (every uniform is looked at)."""
    K = passed.shape[1]
    return np.where(passed, np.arange(1, K + 1)[None, :], 0).max(axis=1, initial=0).astype(np.int64)


def block_extra(p: np.ndarray, res: np.ndarray, m: np.ndarray) -> np.ndarray:
    """(R, V) the row the extra token after a stop comes from: the residual; p where it has no mass."""
    return np.where((m > 0)[:, None], res, p)


def _draw_or_refuse(draw: Callable, w: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Block and tree: the draw, a refused row raising the engine's InputError (block.quantize's)."""
    try:
        return draw(w, u)
    except _Refused:
        quantize(_NP, w, False)  # raises for the rows the draw refuses
        raise InputError("target_probs", "probability rows (each summing to less than 16)", "a refused row") from None


class BlockSteps(NamedTuple):
    weights: Callable = block_weights
    residual: Callable = block_residual
    mass: Callable = block_mass
    threshold: Callable = block_threshold
    last_threshold: Callable = block_last_threshold
    stop: Callable = block_stop
    extra: Callable = block_extra
    inverse_cdf: Callable = inverse_cdf


BLOCK = BlockSteps()  # the rule


def _verify_block(steps: BlockSteps, target_probs: Array, draft_probs: Array | None, draft_tokens: Array,
                  num_draft: Array, *, rng: Any = None, uniforms: Any = None,
                  validate: bool = True) -> Verification:  # fmt: skip
    torch_in = is_torch(target_probs)
    checked = prepare(target_probs, draft_probs, draft_tokens, num_draft, validate=validate)  # the engine's checks
    r = _in.engine_rng(rng, torch_in, target_probs, uniforms)
    if uniforms is not None and isinstance(uniforms, tuple):
        uniforms = tuple(_in.to_numpy(u) for u in uniforms)
    ua, us = check.get_uniforms(_NP, r, uniforms, (checked.B, checked.K), checked.B, validate)
    T = np.asarray(_in.to_numpy(target_probs)).astype(np.float64)  # (B, K+1, V)
    Q = None if draft_probs is None else np.asarray(_in.to_numpy(draft_probs)).astype(np.float64)  # (B, K, V)
    x = np.asarray(_in.to_numpy(checked.tokens))  # (B, K) 0 past num_draft
    j = np.asarray(_in.to_numpy(checked.num_draft))
    B, K = x.shape
    ar, pos = np.arange(B), np.arange(K)
    valid = pos[None, :] < j[:, None]
    T = np.where((np.arange(K + 1)[None, :] <= j[:, None])[:, :, None], T, 0.0)  # unread rows may be NaN
    px = np.where(valid, T[ar[:, None], pos[None, :], x], 0.0)  # (B, K)
    qx = np.where(valid, 1.0 if Q is None else Q[ar[:, None], pos[None, :], x], 0.0)
    ratio = np.where(qx > 0, px / np.where(qx > 0, qx, 1.0), 0.0)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        w = steps.weights(ratio, valid)  # (B, K+1)
        product = block_weights(ratio, valid, cap=False)  # (B, K+1)
        m = np.zeros((B, K))
        res = np.zeros((B, K, T.shape[2]))
        for k in range(K):
            qk = None if Q is None else np.where(valid[:, k, None], Q[:, k], 0.0)
            res[:, k] = np.where(valid[:, k, None], steps.residual(w[:, k], T[:, k], qk, x[:, k]), 0.0)
            m[:, k] = steps.mass(res[:, k])
        h = steps.threshold(m, w[:, :K])  # (B, K) h_i at column i
        H = np.full((B, K), np.nan)  # (B, K) the i-th draft's threshold at column i - 1
        H[:, : max(K - 1, 0)] = h[:, 1:]
        H = np.where(pos[None, :] == (j - 1)[:, None], steps.last_threshold(w[ar, j], product[ar, j])[:, None], H)
        H = np.where(valid, H, np.nan)
        tau = steps.stop(valid & (ua < H))  # (B,)
        bonus = tau == j
        tq = np.where(bonus, 0, tau)  # a safe draft position
        p = T[ar, tau]  # (B, V)
        row = p if not K else np.where(bonus[:, None], p, steps.extra(p, res[ar, tq], m[ar, tq]))
        token = _draw_or_refuse(steps.inverse_cdf, row, us)
    tokens = np.full((B, K + 1), PAD_TOKEN, np.int64)
    tokens[:, :K] = np.where(pos[None, :] < tau[:, None], np.where(valid, x, PAD_TOKEN), PAD_TOKEN)
    tokens[ar, tau] = token
    out = Verification(tokens=tokens, num_tokens=tau + 1, num_accepted=tau, accept_uniforms=np.where(valid, ua, np.nan),
                       ratios=H, bonus=bonus, sample_uniforms=us + 0.0)  # fmt: skip
    return _in.back(out, torch_in)


verify_block = _Rule(_verify_block, BLOCK, "verify_block", """Block verification (Sun et al.):
    :func:`specviz.verify_block`'s signature and result; the derivation is in :mod:`specviz.verifiers.block`.""")


# --------------------------------------------------------------------------- tree verification


def tree_accept(u: np.ndarray, ry: np.ndarray, qy: np.ndarray, M: np.ndarray) -> np.ndarray:
    """(R,) accept candidate y iff u < r(y) / (q(y) M), r unnormalized with mass M: u q(y) M < r(y)."""
    return (qy > 0) & (u * qy * M < ry)


def tree_residual(r: np.ndarray, q: np.ndarray | None, y: np.ndarray, M: np.ndarray, p: np.ndarray) -> np.ndarray:
    """(R, V) after a rejection: (r - M q)^+ (r with y removed for deterministic candidates)."""
    if q is None:
        new = r.copy()
        new[np.arange(len(y)), y] = 0.0
        return new
    return np.maximum(r - M[:, None] * q, 0.0)


class TreeSteps(NamedTuple):
    accept: Callable = tree_accept
    residual: Callable = tree_residual
    mass: Callable = block_mass
    inverse_cdf: Callable = inverse_cdf


TREE = TreeSteps()  # the rule


def _verify_tree(steps: TreeSteps, target_probs: Array, draft_probs: Array | None, node_tokens: Array,
                 parents: Array, num_nodes: Array, *, rng: Any = None, uniforms: Any = None,
                 validate: bool = True) -> TreeVerification:  # fmt: skip
    torch_in = is_torch(target_probs)
    t = _prepare(target_probs, draft_probs, node_tokens, parents, num_nodes, validate)  # the engine's checks
    if torch_in and uniforms is None:
        ua, us = (np.asarray(a) for a in _uniforms(t, rng, None, validate))
    else:
        if uniforms is not None and isinstance(uniforms, tuple):
            uniforms = tuple(_in.to_numpy(u) for u in uniforms)
        t_np = t._replace(ops=_NP)
        ua, us = _uniforms(t_np, rng, uniforms, validate)
    ua, us = _in.to_numpy(ua), _in.to_numpy(us)
    T = np.asarray(_in.to_numpy(t.target)).astype(np.float64)  # (B, N, V)
    Q = None if t.draft is None else np.asarray(_in.to_numpy(t.draft)).astype(np.float64)
    tok, par, has_child = (np.asarray(_in.to_numpy(a)) for a in (t.tokens, t.parents, t.has_child))
    B, N = tok.shape
    ar = np.arange(B)
    cur = np.zeros(B, np.int64)  # (B,) the current node
    depth = np.zeros(B, np.int64)
    path = np.full((B, max(N - 1, 0)), PAD_TOKEN, np.int64)
    thr = np.full((B, max(N - 1, 0)), np.nan)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        r = T[:, 0].copy()  # (B, V) the unnormalized law at the current node
        M = steps.mass(r)  # (B,)
        for i in range(1, N):  # topological order: children come after their parent
            b = np.flatnonzero(par[:, i] == cur)  # rows whose current node is node i's parent
            if not len(b):
                continue
            y = tok[b, i]
            q = None if Q is None else Q[b, cur[b]]  # (R, V)
            ry, qy = r[b, y], np.ones(len(b)) if q is None else q[np.arange(len(b)), y]
            acc = steps.accept(ua[b, i - 1], ry, qy, M[b])
            den = qy * M[b]
            thr[b, i - 1] = np.minimum(np.where(den > 0, ry / np.where(den > 0, den, 1.0), 0.0), 1.0)
            a, rej = b[acc], np.flatnonzero(~acc)
            path[a, depth[a]] = i
            depth[a] += 1
            cur[a] = i
            r[a] = T[a, i]
            M[a] = steps.mass(r[a])
            if len(rej):
                br = b[rej]
                new = steps.residual(r[br], None if q is None else q[rej], y[rej], M[br], T[br, cur[br]])
                m = steps.mass(new)
                empty = m <= 0  # rejection had probability 0 up to rounding: the node's target row
                new[empty] = T[br[empty], cur[br[empty]]]
                r[br], M[br] = new, np.where(empty, steps.mass(new), m)
        token = _draw_or_refuse(steps.inverse_cdf, r, us)
    tokens = np.full((B, N), PAD_TOKEN, np.int64)
    if N > 1:
        tokens[:, : N - 1] = np.where(path >= 0, tok[ar[:, None], np.maximum(path, 0)], PAD_TOKEN)
    tokens[ar, depth] = token
    out = TreeVerification(tokens=tokens, num_tokens=depth + 1, num_accepted=depth.copy(), path=path, last_node=cur,
                           bonus=~has_child[ar, cur], accept_uniforms=np.where(thr == thr, ua, np.nan),
                           thresholds=thr, sample_uniforms=us + 0.0)  # fmt: skip
    return _in.back(out, torch_in)


verify_tree = _Rule(_verify_tree, TREE, "verify_tree", """Tree verification (recursive rejection sampling):
    :func:`specviz.verify_tree`'s signature and result; the derivation is in :mod:`specviz.verifiers.tree`.""")


# --------------------------------------------------------------------------- mistakes


def with_step(rule: _Rule, name: str, **swapped: Callable) -> _Rule:
    """The reference ``rule`` with exactly one step replaced, called ``name``, of the same signature.

    ``with_step(verify, "resample_from_p", replacement=draw_from_p)``: the chain rule whose
    replacement is drawn from p. The step names are the fields of the rule's steps
    (:class:`ChainSteps`, :class:`BlockSteps`, :class:`TreeSteps`).
    """
    if not isinstance(rule, _Rule):
        raise InputError("rule", "a reference rule (reference.verify, verify_flat, verify_block, verify_tree)",
                         type(rule).__name__)  # fmt: skip
    if len(swapped) != 1:
        raise InputError("swapped", "exactly one step to replace", f"{len(swapped)}: {sorted(swapped)}")
    (step,) = swapped
    if step not in rule.steps._fields:
        raise InputError("swapped", "one of " + ", ".join(rule.steps._fields), repr(step))
    out = _Rule(rule.run, rule.steps._replace(**swapped), name,
                f"{rule.__name__} with its step {step!r} replaced by {getattr(swapped[step], '__name__', '?')}.")
    out.swapped = (step, swapped[step])  # type: ignore[attr-defined]
    return out


def swapped_step(verifier: Any) -> tuple[str, Callable] | None:
    """(step name, function) of a verifier made by :func:`with_step`; None for anything else."""
    return getattr(verifier, "swapped", None)


__all__ = ["BLOCK", "CHAIN", "TREE", "BlockSteps", "ChainSteps", "Kept", "TreeSteps", "Uniforms", "inverse_cdf",
           "on_grid", "swapped_step", "verify", "verify_block", "verify_flat", "verify_tree", "with_step"]
