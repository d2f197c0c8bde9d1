"""The exact law of the first L tokens a verifier emits, by enumeration over its uniforms.

# V vocabulary, K drafts per round (padded width), L tokens, C cells, A (prefix, draft) pairs

With explicit uniforms a verifier is a pure function, and every decision it makes is a
threshold on one uniform: a coin u_i is compared with min(1, p/q); a replacement or bonus
uniform is compared with the running sums of the distribution it draws from. So the unit
cube of uniforms splits into boxes on which the output is constant. This module lists the
candidate thresholds of every step of the correct rule *and* of each classic mistake (p, the
residual, the unclamped difference, p without the drafted token, at every position including
the padded ones), takes the union as the breakpoints of every uniform (so a verifier that
shares or reuses a coin is covered too), evaluates the verifier once per box at its centre,
and weighs the outcome by the box's volume times the drafts' probability. Rounds are chained
until L tokens are out. The result is exact up to float64 rounding, about 1e-15.

So the law is exact for any verifier whose decisions are thresholds on that list. One using
another threshold would be mis-measured; ``refine=True`` also evaluates every box just inside
its lower and its upper edges (a millionth of its width in) and raises if any output differs
from the centre's, which catches any threshold not within that distance of a listed one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import InputError
from .markov import START, Drafter, MarkovChain
from .simulate import _check_result, build_round
from .verify import Uniforms

EDGE = 1e-6  # refine: probe each box this fraction of its width inside each edge
NARROW = 1e-9  # boxes thinner than this are only probed at the centre (rounding scale)
MAX_ROWS = 3_000_000  # verifier rows in one enumeration: ~1 GB of float64 work at V = 4


def breakpoints(target_probs: np.ndarray, draft_probs: np.ndarray | None, draft_tokens: np.ndarray) -> np.ndarray:
    """Every threshold in (0, 1) any step could compare a uniform with, for one row.

    target_probs (K+1, V), draft_probs (K, V) or None, draft_tokens (K,). Sorted, unique.
    """
    K, V = draft_tokens.shape[0], target_probs.shape[1]
    points: list[np.ndarray] = []

    def add_cdf(w: np.ndarray, mass: float) -> None:
        if mass > 0:
            points.append(np.cumsum(w) / mass)

    for i in range(K + 1):
        add_cdf(target_probs[i], target_probs[i].sum())
    for i in range(K):
        p = target_probs[i]
        x = int(draft_tokens[i])
        if not 0 <= x < V:
            continue
        q = np.eye(V)[x] if draft_probs is None else draft_probs[i]
        if q[x] > 0:
            points.append(np.array([p[x] / q[x]]))
        diff = p - q
        mass = np.maximum(diff, 0).sum()
        add_cdf(np.maximum(diff, 0), mass)  # the residual
        add_cdf(diff, mass)  # the unclamped difference, normalized by the true mass
    allp = np.concatenate(points) if points else np.empty(0)
    allp = allp[(allp > 0) & (allp < 1)]
    return np.unique(allp)


def _cells(bps: np.ndarray, slots: int, at: float) -> tuple[np.ndarray, np.ndarray]:
    """Grid of boxes over ``slots`` uniforms: points (C, slots) and volumes (C,)."""
    edges = np.concatenate([[0.0], bps, [1.0]])
    width = np.diff(edges)
    keep = width > 0
    frac = np.where(width < NARROW, 0.5, at)  # boxes too thin to probe near their edges: centre
    pts, width = (edges[:-1] + frac * width)[keep], width[keep]
    grids = np.meshgrid(*([np.arange(len(pts))] * slots), indexing="ij")
    idx = np.stack([g.ravel() for g in grids], axis=1) if slots else np.zeros((1, 0), dtype=np.int64)
    return pts[idx], np.prod(width[idx], axis=1)


def verifier_law(
    verifier: Callable[..., Any],
    target: MarkovChain,
    drafter: Drafter,
    *,
    L: int,
    num_draft: int,
    K: int | None = None,
    refine: bool = False,
    max_rows: int = MAX_ROWS,
) -> np.ndarray:
    """Exact law (V,) * L of the first L tokens of repeated draft-and-verify rounds.

    Every round drafts ``num_draft`` tokens into a batch of padded width ``K`` (default
    ``num_draft``); the padding holds wrong distributions (see
    :func:`specviz.simulate.build_round`). ``verifier`` has the signature of
    :func:`specviz.verify` and is called with explicit ``uniforms=``.
    """
    K = num_draft if K is None else K
    if not 0 <= num_draft <= K:
        raise InputError("num_draft", f"an integer in [0, K = {K}]", str(num_draft))
    if L < 1:
        raise InputError("L", "at least 1 token", str(L))
    V = target.V
    law = np.zeros(V**L)
    # Pending prefixes: (length, base-V code) -> probability mass.
    pending: dict[tuple[int, int], float] = {(0, 0): 1.0}
    for _ in range(L):
        if not pending:
            break
        ctx_list, drafts_list, weight_list, state_list = [], [], [], []
        for (length, code), mass in pending.items():
            ctx = START if length == 0 else code % V
            for seq, prob in _draft_sequences(drafter, ctx, num_draft):
                ctx_list.append(ctx)
                drafts_list.append(seq + [0] * (K - num_draft))
                weight_list.append(mass * prob)
                state_list.append((length, code))
        ctx = np.array(ctx_list, dtype=np.int64)
        j = np.full(len(ctx), num_draft, dtype=np.int64)
        rnd = build_round(target, drafter, ctx, np.array(drafts_list, dtype=np.int64).reshape(len(ctx), K), j)
        rows = _enumerate(verifier, rnd, weight_list, state_list, K, V, L, refine, max_rows)
        pending = {}
        for (length, code), mass in rows.items():
            if length >= L:
                law[code] += mass
            else:
                pending[(length, code)] = pending.get((length, code), 0.0) + mass
    if pending:
        raise InputError("verifier", "at least one token emitted per round", "rounds that emit none")
    return law.reshape((V,) * L)


def _draft_sequences(drafter: Drafter, ctx: int, j: int) -> list[tuple[list[int], float]]:
    """All draft sequences of length j after ``ctx`` with their probability under the drafter."""
    chain = drafter.chain
    if not drafter.samples:
        seq, prev = [], ctx
        for _ in range(j):
            prev = int(np.argmax(chain.probs(prev)))
            seq.append(prev)
        return [(seq, 1.0)]
    out = []
    for seq in itertools.product(range(chain.V), repeat=j):
        prob, prev = 1.0, ctx
        for x in seq:
            prob *= chain.probs(prev)[x]
            prev = x
        if prob > 0:
            out.append((list(seq), prob))
    return out


def _enumerate(
    verifier: Callable[..., Any],
    rnd: Any,
    weights: list[float],
    states: list[tuple[int, int]],
    K: int,
    V: int,
    L: int,
    refine: bool,
    max_rows: int,
) -> dict[tuple[int, int], float]:
    """Run one round over every box of every (prefix, drafts) row; return the new prefixes."""
    A = len(weights)
    parts = []
    total = 0
    for a in range(A):
        D = None if rnd.draft_probs is None else rnd.draft_probs[a]
        bps = breakpoints(rnd.target_probs[a], D, rnd.draft_tokens[a])
        total += (len(bps) + 1) ** (K + 1)
        if total > max_rows:
            raise InputError("num_draft", f"an enumeration of at most {max_rows:,} boxes (smaller V, K or L)",
                             f"more than {max_rows:,}")  # fmt: skip
        parts.append(bps)
    results = []
    for at in (0.5, EDGE, 1 - EDGE) if refine else (0.5,):
        rows, us, vols = [], [], []
        for a, bps in enumerate(parts):
            pts, vol = _cells(bps, K + 1, at)
            rows.append(np.full(len(vol), a))
            us.append(pts)
            vols.append(vol)
        row = np.concatenate(rows)
        u = np.concatenate(us)
        uniforms = Uniforms(accept=u[:, :K].copy(), sample=u[:, K].copy())
        res = verifier(rnd.target_probs[row], None if rnd.draft_probs is None else rnd.draft_probs[row],
                       rnd.draft_tokens[row], rnd.num_draft[row], uniforms=uniforms)  # fmt: skip
        toks, num = _check_result(res, len(row), K, V)
        results.append((toks, num))
    t0, n0 = results[0]
    emitted = np.arange(K + 1)[None, :] < n0[:, None]
    for t1, n1 in results[1:]:
        if (n0 != n1).any() or (np.where(emitted, t0, -1) != np.where(emitted, t1, -1)).any():
            raise InputError("verifier", "an output constant on every box of the listed thresholds",
                             "a verifier using a threshold exact.breakpoints does not list")  # fmt: skip
    toks, num = results[0]
    vol = np.concatenate(vols) * np.asarray(weights)[row]
    state = np.array(states, dtype=np.int64).reshape(-1, 2)[row]  # (rows, 2): length, code
    length, code = state[:, 0], state[:, 1]
    for t in range(K + 1):  # append emitted tokens to each prefix, up to L
        take = (t < num) & (length < L)
        code = np.where(take, code * V + np.where(take, toks[:, t], 0), code)
        length = length + take
    key = length * V**L + code
    uniq, inv = np.unique(key, return_inverse=True)
    mass = np.bincount(inv, weights=vol)
    return {(int(k // V**L), int(k % V**L)): float(m) for k, m in zip(uniq, mass, strict=True)}
