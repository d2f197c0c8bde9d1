"""The reference: chain, block and tree verification in plain float64 NumPy, read top to bottom; the oracle.

# B rows, K drafts (padded width), V vocabulary, N nodes per tree

:func:`verify`, :func:`verify_block` and :func:`verify_tree` take the arguments of the engine's functions
of the same names and, on the same uniforms, return their results bit for bit (tests/test_reference_parity.py).
Nothing here comes from the engine. The chain rule (docs/design.md), for a row with j = num_draft[b] drafts:
accept draft x_i iff ``u_i * q_i(x_i) < p_i(x_i)`` (q(x) = 1 for a deterministic drafter); the first
rejection ends the row; there a token from the residual max(0, p_i - q_i) (p_i without x_i for a
deterministic drafter), or from p_i when that has no mass; if every draft survives, the bonus from p_j.

One draw serves every rule (:func:`inverse_cdf`): each weight floored to the grid, floor(w * GRID) in the
weights' float type, summed in float64 (exact integers while a row totals less than 16); the token is the
number of running weights <= floor(u * total), at most total - 1. Block and tree masses are the same
integer sums over GRID. Half precision is computed in float32, which holds it exactly.

Mistakes: each rule runs named steps (:class:`ChainSteps`, :class:`BlockSteps`, :class:`TreeSteps`);
:func:`with_step` gives the reference with exactly one step swapped.
"""

from __future__ import annotations

import inspect
import sys
from collections import namedtuple
from collections.abc import Callable
from functools import partial
from typing import Any, NoReturn

import numpy as np

from ..errors import InputError, digits

GRID = 2.0**48  # weights are floor(w * GRID): exact integers in float64 while a row totals < 16 * GRID
PAD = -1  # outputs are padded with -1

# The engine's result fields, in its order (specviz.verify and specviz.verifiers.tree.verify_tree document them).
Verification = namedtuple("Verification", "tokens num_tokens num_accepted accept_uniforms ratios bonus sample_uniforms")
TreeVerification = namedtuple("TreeVerification", "tokens num_tokens num_accepted path last_node bonus "
                              "accept_uniforms thresholds sample_uniforms")  # fmt: skip


def on_grid(w: np.ndarray) -> np.ndarray:
    """(R, V) floor(w * GRID) in w's float type, as float64 integers."""
    return np.floor(w * w.dtype.type(GRID)).astype(np.float64)


def mass(r: np.ndarray) -> np.ndarray:
    """(R,) the mass of weights r (R, V) on the grid: their integer sum over GRID."""
    return on_grid(r).sum(axis=1) / GRID


class _Refused(Exception):
    """Weights the draw cannot read: not finite, negative, or a row totalling 16 or more."""


def inverse_cdf(w: np.ndarray, u: np.ndarray) -> np.ndarray:
    """(R,) one token per row of non-negative weights w (R, V), from uniforms u (R,)."""
    W = on_grid(w)
    C = np.cumsum(W, axis=1)  # (R, V) running weights: exact integers
    if not (C[:, -1] < 16 * GRID).all() or (W < 0).any():  # NaN fails the first test
        raise _Refused
    thr = np.minimum(np.floor(u * C[:, -1]), C[:, -1] - 1)  # u * total may round up to total
    return np.count_nonzero(C <= thr[:, None], axis=1).astype(np.int64)


def _refuse(p: np.ndarray, q: np.ndarray | None = None) -> NoReturn:
    """The engine's InputError for a draw refused on target rows p (R, V) and draft rows q (validate=False too)."""
    for name, a in (("target_probs", p), ("draft_probs", q)):
        if a is not None and not np.isfinite(a).all():
            raise InputError(name, "finite probabilities", "NaN or infinite entries")
    if p.min() < 0:
        raise InputError("target_probs", "non-negative probabilities", f"minimum {p.min():.6g}")
    raise InputError("target_probs", "probability rows (each summing to less than 16)", "a row summing to 16 or more")


# --------------------------------------------------------------------------- the chain rule


Coins = namedtuple("Coins", "u passed")  # (B, K): the coin each position is tested with; whether it passed
Kept = namedtuple("Kept", "kept first tested")  # (B, K) drafts emitted; (B,) first rejection or num_draft; (B, K)
Draw = namedtuple("Draw", "row residual u")  # (B,) the last token's target row (-1: none), from its residual?, uniform


def accept(ua: np.ndarray, px: np.ndarray, qx: np.ndarray) -> Coins:
    """A fresh coin per position; accept iff u * q(x) < p(x) (q(x) = 0 rejects)."""
    return Coins(ua, (qx > 0) & (ua * qx < px))


def first_rejection(passed: np.ndarray, valid: np.ndarray) -> Kept:
    """The drafts before the first rejection (a running AND of the accept bits) are kept."""
    run = np.logical_and.accumulate(passed & valid, axis=1)  # (B, K)
    first = run.sum(axis=1)  # (B,)
    return Kept(run, first, valid & (np.arange(valid.shape[1]) <= first[:, None]))


def last_draw(first: np.ndarray, rejected: np.ndarray, j: np.ndarray, ua: np.ndarray, us: np.ndarray) -> Draw:
    """Where the last token comes from: the rejected position's residual, else (the bonus) p at row
    num_draft, not the padded tensor's last; drawn with the row's own sample uniform, never a coin."""
    return Draw(np.where(rejected, first, j), rejected, us)


def residual(p: np.ndarray, q: np.ndarray | None, x: np.ndarray) -> np.ndarray:
    """(R, V) max(0, p - q) in p's type; p with the drafted token x removed when q is None."""
    if q is None:
        w = p.copy()
        w[np.arange(len(x)), x] = 0
        return w
    return np.maximum(p - q.astype(p.dtype), 0)


def replacement(p: np.ndarray, q: np.ndarray | None, x: np.ndarray, u: np.ndarray) -> np.ndarray:
    """(R,) the token after a rejection, from the residual; from p where it has no mass."""
    w = residual(p, q, x)
    empty = mass(w) <= 0  # p == q up to rounding (NaN stays False: the draw refuses it)
    w[empty] = p[empty]
    return inverse_cdf(w, u)


ChainSteps = namedtuple("ChainSteps", "accept first_rejection last_draw replacement",
                        defaults=(accept, first_rejection, last_draw, replacement))  # fmt: skip


def _chain(s: ChainSteps, P: np.ndarray, Q: np.ndarray | None, x: np.ndarray, j: np.ndarray, ua: np.ndarray,
           us: np.ndarray, validate: bool, tol: tuple[float, float]) -> Verification:  # fmt: skip
    """The chain rule on P (B, K+1, V), Q (B, K, V) or None, x (B, K), j (B,), ua (B, K), us (B,)."""
    B, K = x.shape
    b, k = np.arange(B), np.arange(K)
    valid = k < j[:, None]  # (B, K)
    xs = np.where(valid, x, 0)  # (B, K) a column to read past num_draft
    px = P[b[:, None], k, xs].astype(np.float64)  # (B, K) p_i(x_i)
    qx = np.ones((B, K)) if Q is None else Q[b[:, None], k, xs].astype(np.float64)  # (B, K) q_i(x_i)
    if validate:
        _check_probs("target_probs", px[valid], None)
        _check_probs("draft_probs", None if Q is None else qx[valid], None)
    u, passed = s.accept(ua, px, qx)
    kept, first, tested = s.first_rejection(passed, valid)
    row, from_residual, u_last = s.last_draw(first, first < j, j, ua, us)
    token = np.full(B, PAD)
    for res in (True, False):  # the rows drawing from a residual, then those drawing from p
        r = np.flatnonzero((row >= 0) & (from_residual == res))
        p, q = P[r, row[r]], None if Q is None or not res else Q[r, row[r]]  # (R, V) copies
        if validate:
            _check_probs("target_probs", p, tol[0])
            _check_probs("draft_probs", q, tol[1])
        try:
            token[r] = s.replacement(p, q, xs[r, row[r]], u_last[r]) if res else inverse_cdf(p, u_last[r])
        except _Refused:
            _refuse(p, q)
    n = kept.sum(axis=1)  # (B,) drafts emitted
    tokens = np.full((B, K + 1), PAD)
    r, i = np.nonzero(kept)
    tokens[r, np.cumsum(kept, axis=1)[r, i] - 1] = x[r, i]  # the kept drafts, in order
    tokens[b, n] = token
    ok = tested & (qx > 0)
    return Verification(tokens, n + (row >= 0), n, np.where(tested, u, np.nan),
                        np.where(ok, px / np.where(ok, qx, 1.0), np.nan), (first == j) & (row >= 0),
                        np.where(row >= 0, u_last, np.nan))  # fmt: skip


# --------------------------------------------------------------------------- block verification (Sun et al.)


def block_weights(ratio: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """(B, K+1) w_0 = 1, w_i = min(1, w_{i-1} p(x_i) / q(x_i)); kept past num_draft."""
    w = np.ones((ratio.shape[0], ratio.shape[1] + 1))
    for k in range(ratio.shape[1]):
        t = np.where(w[:, k] > 0, w[:, k] * ratio[:, k], 0.0)  # 0 * inf would be NaN
        w[:, k + 1] = np.where(valid[:, k], np.minimum(t, 1.0), w[:, k])
    return w


def block_residual(w: np.ndarray, p: np.ndarray, q: np.ndarray | None, x: np.ndarray) -> np.ndarray:
    """(R, V) max(0, w p - q); q one-hot on x for a deterministic drafter."""
    r = p * w[:, None]
    if q is None:
        r[np.arange(len(x)), x] -= 1.0
        return np.maximum(r, 0.0)
    return np.maximum(r - q, 0.0)


def block_threshold(m: np.ndarray, w: np.ndarray) -> np.ndarray:
    """h_i = m_i / (m_i + 1 - w_i), m_i the residual's mass; 1 where that is 0 / 0."""
    den = m + (1.0 - w)
    return np.where(den > 0, m / np.where(den > 0, den, 1.0), 1.0)


def block_stop(passed: np.ndarray) -> np.ndarray:
    """(B,) tau: the last position whose uniform passes its threshold, 0 if none (all are looked at)."""
    return np.where(passed, np.arange(1, passed.shape[1] + 1), 0).max(axis=1, initial=0)


def block_extra(p: np.ndarray, res: np.ndarray, m: np.ndarray) -> np.ndarray:
    """(R, V) the row of the token after a stop before num_draft: the residual; p where it has no mass."""
    return np.where((m > 0)[:, None], res, p)


BlockSteps = namedtuple("BlockSteps", "weights residual threshold stop extra",
                        defaults=(block_weights, block_residual, block_threshold, block_stop, block_extra))  # fmt: skip


def _block(s: BlockSteps, P: np.ndarray, Q: np.ndarray | None, x: np.ndarray, j: np.ndarray, ua: np.ndarray,
           us: np.ndarray, validate: bool, tol: tuple[float, float]) -> Verification:  # fmt: skip
    """Block verification on the chain's arrays: every uniform compared with its threshold h_i, the
    last pass tau kept, the token after it from the residual (a stop) or p_j (the bonus)."""
    B, K = x.shape
    b, valid = np.arange(B), np.arange(K) < j[:, None]  # (B, K)
    xs = np.where(valid, x, 0)
    read = np.arange(K + 1) <= j[:, None]  # (B, K+1) the target rows read
    if validate:
        _check_probs("target_probs", P[read], tol[0])
        _check_probs("draft_probs", None if Q is None else Q[valid], tol[1])
    T = np.where(read[:, :, None], P, 0.0).astype(np.float64)  # unread rows may hold anything
    Q = None if Q is None else np.where(valid[:, :, None], Q, 0.0).astype(np.float64)
    px = T[b[:, None], np.arange(K), xs]  # (B, K)
    qx = np.where(valid, 1.0 if Q is None else Q[b[:, None], np.arange(K), xs], 0.0)
    w = s.weights(np.where(qx > 0, px / np.where(qx > 0, qx, 1.0), 0.0), valid)  # (B, K+1)
    res, m = np.zeros((B, K, T.shape[2])), np.zeros((B, K))  # max(0, w_i p_i - q_i) and its mass
    for k in range(K):
        r = s.residual(w[:, k], T[:, k], None if Q is None else Q[:, k], xs[:, k])  # (B, V)
        res[:, k] = np.where(valid[:, k, None], r, 0.0)
        m[:, k] = mass(res[:, k])
    h = np.full((B, K), np.nan)  # (B, K) at column i - 1 the threshold of draft i: h_i, and w_j for the last
    h[:, : max(K - 1, 0)] = s.threshold(m, w[:, :K])[:, 1:]
    h = np.where(valid, np.where(np.arange(K) == (j - 1)[:, None], w[b, j][:, None], h), np.nan)
    tau = s.stop(valid & (ua < h))  # (B,)
    bonus = tau == j
    p, at = T[b, tau], np.where(bonus, 0, tau)  # (B, V), a safe draft position
    last = np.where(bonus[:, None], p, s.extra(p, res[b, at], m[b, at])) if K else p
    tokens = np.where(np.arange(K + 1) < tau[:, None], np.pad(x, ((0, 0), (0, 1))), PAD)
    try:
        tokens[b, tau] = inverse_cdf(last, us)
    except _Refused:
        _refuse(last)
    return Verification(tokens, tau + 1, tau, np.where(valid, ua, np.nan), h, bonus, us + 0.0)


# --------------------------------------------------------------------------- tree verification


def tree_accept(u: np.ndarray, ry: np.ndarray, qy: np.ndarray, M: np.ndarray) -> np.ndarray:
    """(R,) accept candidate y iff u < r(y) / (q(y) M), r unnormalized with mass M: u q(y) M < r(y)."""
    return (qy > 0) & (u * qy * M < ry)


def tree_residual(r: np.ndarray, q: np.ndarray | None, y: np.ndarray, M: np.ndarray, p: np.ndarray) -> np.ndarray:
    """(R, V) r after a rejected candidate y: (r - M q)^+ (r with y removed for deterministic candidates)."""
    if q is None:
        r = r.copy()
        r[np.arange(len(y)), y] = 0.0
        return r
    return np.maximum(r - M[:, None] * q, 0.0)


TreeSteps = namedtuple("TreeSteps", "accept residual", defaults=(tree_accept, tree_residual))


def _tree(s: TreeSteps, T: np.ndarray, Q: np.ndarray | None, tok: np.ndarray, par: np.ndarray, leaf: np.ndarray,
          ua: np.ndarray, us: np.ndarray) -> TreeVerification:  # fmt: skip
    """Down each row's tree (nodes in topological order), r the unnormalized law at the current node."""
    B, N = tok.shape
    b, cur, depth = np.arange(B), np.zeros(B, np.int64), np.zeros(B, np.int64)  # (B,) the current node, its depth
    path, thr = np.full((B, N - 1), PAD), np.full((B, N - 1), np.nan)
    r = T[:, 0].copy()  # (B, V)
    M = mass(r)  # (B,)
    for i in range(1, N):
        c = np.flatnonzero(par[:, i] == cur)  # rows where node i is a child of the current node
        y, q = tok[c, i], None if Q is None else Q[c, cur[c]]  # (R,), (R, V)
        ry, qy = r[c, y], np.ones(len(c)) if q is None else q[np.arange(len(c)), y]
        acc = s.accept(ua[c, i - 1], ry, qy, M[c])
        den = qy * M[c]
        thr[c, i - 1] = np.minimum(np.where(den > 0, ry / np.where(den > 0, den, 1.0), 0.0), 1.0)
        a, rej = c[acc], c[~acc]
        path[a, depth[a]] = i
        depth[a] += 1
        cur[a] = i
        r[a], M[a] = T[a, i], mass(T[a, i])
        new = s.residual(r[rej], None if q is None else q[~acc], y[~acc], M[rej], T[rej, cur[rej]])
        empty = mass(new) <= 0  # a rejection of probability 0 up to rounding: back to the node's target row
        new[empty] = T[rej[empty], cur[rej[empty]]]
        r[rej], M[rej] = new, mass(new)
    tokens = np.full((B, N), PAD)
    tokens[:, : N - 1] = np.where(path >= 0, tok[b[:, None], np.maximum(path, 0)], PAD)
    try:
        tokens[b, depth] = inverse_cdf(r, us)
    except _Refused:
        _refuse(r)
    return TreeVerification(tokens, depth + 1, depth, path, cur, leaf[b, cur], np.where(thr == thr, ua, np.nan),
                            thr, us + 0.0)  # fmt: skip


# --------------------------------------------------------------------------- the arguments, at the edge


def _np(a: Any) -> Any:
    """A torch tensor or array-like as a NumPy array (None stays None); half precision as float32, which holds it."""
    if hasattr(a, "detach"):
        a = a.detach().cpu().resolve_conj().resolve_neg()
        a = (a.float() if a.dtype.is_floating_point and a.itemsize == 2 else a).numpy()
    a = None if a is None else np.asarray(a)
    return a.astype(np.float32) if a is not None and a.dtype == np.float16 else a


def _tol(a: Any) -> float:
    """validate=True's row-sum tolerance: 1e-2 for half precision (3 significant digits), else 1e-4."""
    return 1e-2 if str(getattr(a, "dtype", "")).endswith(("float16", "bfloat16")) else 1e-4


def _check(**named: tuple[Any, tuple, str]) -> None:
    """Each array (None: absent) has its shape (None: any size) and dtype kind ("f" floats, "iu" integers)."""
    for name, (a, shape, kind) in named.items():
        if a is not None and (a.ndim != len(shape) or a.dtype.kind not in kind
                              or any(s not in (None, t) for s, t in zip(shape, a.shape, strict=False))):  # fmt: skip
            what = "integers" if kind == "iu" else "probabilities"
            raise InputError(name, f"{what} of shape {shape} (None: any size)", f"shape {a.shape}, dtype {a.dtype}")


def _in_range(name: str, a: np.ndarray, lo: int, hi: int, what: str) -> None:
    if a.size and (a.min() < lo or a.max() > hi):
        raise InputError(name, f"{what} in [{lo}, {hi}]", str(int(a.min() if a.min() < lo else a.max())))


def _check_probs(name: str, a: np.ndarray | None, tol: float | None) -> None:
    """validate=True: finite and non-negative; probes p(x) (tol None) at most 1, rows (R, V) summing to 1
    within tol on the grid."""
    if a is None or not a.size:
        return
    if not np.isfinite(a).all():
        raise InputError(name, "finite probabilities", "NaN or infinite entries")
    if a.min() < 0:
        raise InputError(name, "non-negative probabilities", f"minimum {a.min():.6g}")
    if tol is None:
        if a.max() > 1:
            raise InputError(name, "probabilities at most 1", f"{digits(a.max())} at a drafted token")
        return
    sums = mass(a)
    if np.abs(sums - 1.0).max() > tol:
        raise InputError(name, f"rows summing to 1 (tolerance {tol:g}); pass probabilities, not logits",
                         f"a row summing to {digits(sums[np.argmax(np.abs(sums - 1.0))])}")  # fmt: skip


def _uniforms(rng: Any, uniforms: Any, shape: tuple, validate: bool) -> tuple[np.ndarray, np.ndarray]:
    """accept (shape) and sample (B,) float64 uniforms: given, or drawn as the engine draws them, accept first."""
    if uniforms is not None:
        if rng is not None or not isinstance(uniforms, tuple) or len(uniforms) != 2:
            raise InputError("uniforms", "a Uniforms(accept, sample) pair, and no rng", type(uniforms).__name__)
        ua, us = (np.asarray(_np(u), dtype=np.float64) for u in uniforms)
    elif hasattr(rng, "manual_seed"):  # a torch.Generator, on its own device
        t = sys.modules["torch"]
        ua, us = (t.rand(n, generator=rng, dtype=t.float64, device=rng.device).cpu().numpy() for n in (shape, shape[0]))
    elif rng is None or isinstance(rng, np.random.Generator):
        rng = np.random.default_rng() if rng is None else rng
        ua, us = rng.random(shape), rng.random(shape[0])
    else:
        raise InputError("rng", "a numpy.random.Generator or a torch.Generator", type(rng).__name__)
    for name, u, n in (("uniforms.accept", ua, shape), ("uniforms.sample", us, shape[:1])):
        if u.shape != n:
            raise InputError(name, f"shape {n}", f"shape {u.shape}")
        if validate and u.size and not (u.min() >= 0 and u.max() < 1):  # NaN fails too
            raise InputError(name, "uniforms in [0, 1)", f"range [{digits(u.min())}, {digits(u.max())}]")
    return ua, us


def _back(res: Any, like: Any) -> Any:
    """The results as torch CPU tensors when the inputs were torch tensors."""
    if not hasattr(like, "detach"):
        return res
    return type(res)._make(sys.modules["torch"].from_numpy(np.ascontiguousarray(f)) for f in res)


def _padded(core: Callable, s: Any, target_probs: Any, draft_probs: Any, draft_tokens: Any, num_draft: Any, *,
            rng: Any = None, uniforms: Any = None, validate: bool = True) -> Any:  # fmt: skip
    """The padded layout (chain and block): its arguments as NumPy arrays, checked, and ``core`` run on them."""
    P, Q, x, j = (_np(a) for a in (target_probs, draft_probs, draft_tokens, num_draft))
    _check(draft_tokens=(x, (None, None), "iu"))
    B, K = x.shape
    _check(target_probs=(P, (B, K + 1, None), "f"), num_draft=(j, (B,), "iu"))
    _check(draft_probs=(Q, (B, K, P.shape[2]), "f"))
    _in_range("num_draft", j, 0, K, "draft counts")
    _in_range("draft_tokens", x[np.arange(K) < j[:, None]], 0, P.shape[2] - 1, "token ids at positions < num_draft")
    ua, us = _uniforms(rng, uniforms, (B, K), validate)
    with np.errstate(all="ignore"):
        out = core(s, P, Q, x.astype(np.int64), j.astype(np.int64), ua, us, validate,
                   (_tol(target_probs), _tol(draft_probs)))  # fmt: skip
    return _back(out, target_probs)


def _verify_tree(s: TreeSteps, target_probs: Any, draft_probs: Any, node_tokens: Any, parents: Any, num_nodes: Any,
                 *, rng: Any = None, uniforms: Any = None, validate: bool = True) -> TreeVerification:  # fmt: skip
    """Node n's parent is parents[b, n] < n (-1 at the root, node 0); nodes from num_nodes[b] on are ignored."""
    T, Q, tok, par, n = (_np(a) for a in (target_probs, draft_probs, node_tokens, parents, num_nodes))
    _check(target_probs=(T, (None, None, None), "f"))
    B, N, V = T.shape
    _check(draft_probs=(Q, (B, N, V), "f"), node_tokens=(tok, (B, N), "iu"), parents=(par, (B, N), "iu"),
           num_nodes=(n, (B,), "iu"))  # fmt: skip
    _in_range("num_nodes", n, 1, N, "node counts (the root included)")
    idx = np.arange(N)
    inner = (idx >= 1) & (idx < n[:, None])  # (B, N) the live nodes with a parent
    if (par[:, 0] != -1).any() or (inner & ((par < 0) | (par >= idx))).any():
        raise InputError("parents", "-1 at the root, 0 <= parents[b, n] < n at nodes 1 .. num_nodes[b]-1",
                         "a parent out of order")  # fmt: skip
    _in_range("node_tokens", tok[inner], 0, V - 1, "token ids at nodes 1 .. num_nodes[b]-1")
    tok, par = np.where(inner, tok, 0).astype(np.int64), np.where(inner, par, -2).astype(np.int64)  # -2: no node
    has_child = np.zeros((B, N + 1), bool)
    has_child[np.arange(B)[:, None], np.where(inner, par, N)] = True  # column N collects the rest
    if validate:
        _check_probs("target_probs", T[idx < n[:, None]], _tol(target_probs))
        _check_probs("draft_probs", None if Q is None else Q[has_child[:, :N]], _tol(draft_probs))
    ua, us = _uniforms(rng, uniforms, (B, N - 1), validate)
    with np.errstate(all="ignore"):
        Q = None if Q is None else Q.astype(np.float64)
        out = _tree(s, T.astype(np.float64), Q, tok, par, ~has_child, ua, us)
    return _back(out, target_probs)


class _Rule:
    """A reference rule: ``run`` with its ``steps``, under the engine's signature (run's, without the steps)."""

    def __init__(self, run: Callable, steps: Any, name: str, doc: str, swapped: tuple | None = None) -> None:
        self.run, self.steps, self.swapped, self.__doc__ = run, steps, swapped, doc
        self.__name__ = self.__qualname__ = name
        sig = inspect.signature(run)
        self.__signature__ = sig.replace(parameters=list(sig.parameters.values())[1:])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.run(self.steps, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<reference verifier {self.__name__}>"


verify = _Rule(partial(_padded, _chain), ChainSteps(), "verify", "The chain rule: specviz.verify's arguments, result.")
verify_block = _Rule(partial(_padded, _block), BlockSteps(), "verify_block", "Block verification (verify's arguments).")
verify_tree = _Rule(_verify_tree, TreeSteps(), "verify_tree", "Tree verification: verifiers.tree.verify_tree's.")
CHAIN, BLOCK, TREE = verify.steps, verify_block.steps, verify_tree.steps


def with_step(rule: _Rule, name: str, **swapped: Callable) -> _Rule:
    """The reference ``rule`` with exactly one step replaced, called ``name``, of the same signature:
    ``with_step(verify, "resample_from_p", replacement=from_p)``. The steps: the fields of ``rule.steps``."""
    if not isinstance(rule, _Rule):
        raise InputError("rule", "a reference rule (verify, verify_block, verify_tree)", type(rule).__name__)
    if len(swapped) != 1 or next(iter(swapped)) not in rule.steps._fields:
        raise InputError("swapped", "exactly one step, one of " + ", ".join(rule.steps._fields), str(sorted(swapped)))
    ((step, fn),) = swapped.items()
    doc = f"{rule.__name__} with its step {step!r} replaced by {getattr(fn, '__name__', '?')}."
    return _Rule(rule.run, rule.steps._replace(**swapped), name, doc, (step, fn))


def swapped_step(verifier: Any) -> tuple[str, Callable] | None:
    """(step name, function) of a verifier made by :func:`with_step`; None for anything else."""
    return getattr(verifier, "swapped", None)
