"""The exact law of the first L tokens a verifier emits, by adaptive enumeration of its uniforms.

# V vocabulary, K drafts per round (padded width), D = K+1 uniforms per row, L tokens,
# A verifier rows (context, draft count, drafts), n boxes, m probes per box, G points per line

With explicit uniforms a verifier is a pure function of D uniforms per row: K coins and one
uniform for the replacement or bonus draw. Every decision of the correct rule and of each
classic mistake is a threshold on one uniform (a coin against min(1, p/q), a draw uniform
against the running sums of the row it draws from), so the unit cube splits into boxes on
which the output is constant. The law of one round is the volume of each box times the
probability of the drafts, summed per output; rounds are chained until L tokens are out.

How the boxes are found (adaptively, never from a fixed grid):

1. Each row starts as the whole cube. A box [lo, hi) is *probed* at m = 1 + 2D + 2^D points:
   its centre, the middle of each face and each corner, a face at hi taken one float inside
   (the largest uniform below hi). If every probe gives the same output, the box is taken as
   constant.
2. Otherwise it is split along one uniform whose probes differ (two probes that differ only in
   that coordinate, coins before the draw uniform, so a chain verifier splits like its own
   decision tree). The line through those two probes is searched: the verifier is evaluated at
   ``LINE_POINTS`` evenly spaced points, at every listed breakpoint (:func:`breakpoints`) in
   the box and at the midpoints between all of them; each change of output between neighbours
   is located by bisection on the float64 bit patterns, to adjacent floats. The box is cut at
   every located change and the pieces go back to step 1.
3. A box still split after ``MAX_DEPTH`` cuts, or narrower than ``MIN_WIDTH`` along the uniform
   it would be cut on, is *unresolved*: it is given its centre's output and its probability
   mass counts towards :attr:`ExactLaw.unresolved`, which bounds the total-variation distance
   between the returned law and the true one. Above ``tol`` (default 1e-9) the call is refused.
4. Audit: ``audit`` (4096) random points per context, rows drawn by their probability and
   uniforms at random (the round's own law), are evaluated and compared with the box each falls
   in. A point that disagrees reopens its box: the path from the box's centre to the point,
   one uniform at a time, gives a uniform along which the output changes, and that line is
   searched with the point on it. Then the audit runs again, twice as large, up to
   ``AUDIT_ROUNDS`` times; an audit that never comes back clean is a refusal.

What "exact" means, honestly. Probing cannot prove a box constant. The result is the verifier's
law up to float64 rounding (about 1e-15, far below ``unresolved``'s tolerance) under one
assumption: every piece of constant output that meets an accepted box contains one of its
probes or of the points of a line searched through it. What the listed breakpoints add: a piece
bounded by listed thresholds is found on a searched line whatever its width (a midpoint lies
inside it), so the correct rule and the bugs of :mod:`specviz.proof.bugs` never depend on the evenly
spaced points. Other thresholds (a coin rescaled as 3u mod 1, say) are found when their pieces
are wider than 1/``LINE_POINTS`` of the box along the line searched. A narrower piece lying
strictly between probes is what the assumption excludes; nothing proves it absent, but the
audit bounds it statistically: a clean audit of N points per context (:attr:`ExactLaw.audited`)
would have met a missed mass of m with probability 1 - (1 - m)^N, e.g. 95% for m = 3/N =
7e-4 at N = 4096 (measured: a coin rescaled as 7u mod 1, whose pieces the searches miss, is
either resolved exactly after its audits reopen the missed boxes or refused; never a law off
by more than rounding in prove's scenarios).

Refused with an :class:`InputError` naming ``verifier``: a verifier that is not a pure function
of its uniforms (every round of probes calls it a second time on the box centres, in reverse
order and one fewer, and the outputs must match), one whose unresolved mass exceeds ``tol`` or
that needs more than ``max_evals`` verifier rows (for instance a threshold on u_0 + u_1, which
no cut along one uniform resolves), one whose audit keeps failing, and one that emits no token
in any round.
A round that emits nothing with some probability is retried, as ``generate`` does.

Work saved: a round's law depends only on its context (the last token, or the start) and
draft count, so each context is enumerated once however many prefixes end in it; outputs are
compared on the tokens that can still enter the window (all L after the start, L - 1 later)
plus the number emitted, so coins after the window never split a box, and neither do coins
after a chain verifier's first rejection (its probes agree along them). Every round of probes
over all boxes is one verifier call (chunked at ``CHUNK`` rows). Rows with the same inputs (a
context-free problem's rows after every context) are searched once and their boxes copied, and a
bisection probes several halvings per call; both give the plain search's boxes, in its order, to
the bit, and charge ``max_evals`` as it does (tests/test_court_speed.py compares them).

This module walks the rounds and adds up their laws; the box search of one round (the
breakpoints, the probes, the line searches and the audit) is :mod:`specviz.proof.boxes`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from .boxes import _enumerate, _Evaluator, _Stats, breakpoints
from .markov import START, Drafter, MarkovChain
from .simulate import build_round

__all__ = ["AUDIT_POINTS", "MAX_CELLS", "MAX_EVALS", "MAX_ROWS", "UNRESOLVED_TOL", "ExactLaw", "breakpoints",
           "verifier_law"]  # fmt: skip

UNRESOLVED_TOL = 1e-9  # default bound on the unresolved probability mass before refusing
AUDIT_POINTS = 4096  # random points per context checked against the boxes after they are resolved
MAX_ROWS = 50_000  # (context, draft count, drafts) rows of one batch of contexts
MAX_CELLS = 1 << 24  # cells V**L of the returned law: 128 MB of float64
MAX_EVALS = 5_000_000  # verifier rows of one call of verifier_law: ~5 s at V = 4


class ExactLaw(NamedTuple):
    """The law of the first L tokens, with what could not be resolved."""

    law: np.ndarray  # (V,) * L: P(first L tokens), summing to 1
    unresolved: float  # mass given a probed output without resolving its box; TV(law, truth) <= this
    expected_tokens: np.ndarray  # (V+1, K+1) E[tokens per verification | context c (0: start), j drafts]; NaN: unmet
    boxes: int  # boxes probed
    evaluations: int  # verifier rows the search needed (max_evals' count; a bisection's speculative probes aside)
    calls: int  # verifier calls
    audited: int  # random points per context, drawn from the round's law, that all matched their box


def verifier_law(
    verifier: Callable[..., Any],
    target: MarkovChain,
    drafter: Drafter,
    *,
    L: int,
    num_draft: int | Sequence[int],
    K: int | None = None,
    tol: float = UNRESOLVED_TOL,
    max_evals: int = MAX_EVALS,
    audit: int = AUDIT_POINTS,
) -> ExactLaw:
    """The law of the first L tokens of draft-and-verify rounds, run as
    :func:`specviz.proof.simulate.generate` runs them.

    ``num_draft``: the drafts of every row in every round, or a sequence of counts from which
    each row draws its count uniformly each round (``range(K + 1)`` is ``generate(ragged=True)``).
    ``K``: the padded width, default the largest count; padding holds wrong distributions (see
    :func:`specviz.proof.simulate.build_round`). ``verifier`` has the signature of
    :func:`specviz.verify` and is called with explicit ``uniforms=``. ``tol``: the largest
    unresolved mass returned rather than refused. ``max_evals``: verifier rows before refusing.
    ``audit``: random points per context in the first audit (0 skips the audit, leaving the law
    to the probing assumption alone).

    Returns an :class:`ExactLaw`: the law (within ``unresolved`` of the truth in total variation,
    under the assumption stated in the module docstring, which the audit tests), exact tokens
    per verification by context and draft count, and the work done. Raises :class:`InputError`
    naming ``verifier`` rather than return a law more than ``tol`` off, or one it cannot vouch for.
    """
    counts = _counts(num_draft)
    K = max(counts) if K is None else int(K)
    if K < 0 or min(counts) < 0 or max(counts) > K:
        raise InputError("num_draft", f"draft counts in [0, K = {K}]", str(num_draft))
    if int(L) < 1:
        raise InputError("L", "at least 1 token", str(L))
    if drafter.chain.V != target.V:
        raise InputError("drafter", f"a chain over V = {target.V} tokens", f"V = {drafter.chain.V}")
    if not tol >= 0:
        raise InputError("tol", "a non-negative bound on the unresolved mass", str(tol))
    if int(audit) < 0:
        raise InputError("audit", "a non-negative number of random points per context", str(audit))
    L, V = int(L), target.V
    if V**L > MAX_CELLS:
        raise InputError("L", f"a law of at most {MAX_CELLS:,} cells V**L (smaller V or L)", f"{V}**{L} = {V**L:,}")
    stats = _Stats(max_evals, int(audit))
    kernels: dict[int, _Kernel] = {}
    expected = np.full((V + 1, K + 1), np.nan)
    law = np.zeros(V**L)
    unresolved = 0.0
    # Pending prefixes (length, base-V code) and their probability.
    mass: np.ndarray  # float64 (np.bincount with weights, which NumPy's stubs type as integer)
    length, code, mass = np.zeros(1, np.int64), np.zeros(1, np.int64), np.ones(1)
    while length.size:
        ctx = np.where(length == 0, START, code % V)
        new = sorted(set(np.unique(ctx).tolist()) - set(kernels))
        if new:
            R = min(L if new == [START] else L - 1, K + 1)  # only the start is met with no token out
            kernels.update(_kernels(verifier, target, drafter, new, counts, K, R, stats, expected))
        out_len, out_code, out_mass = [], [], []
        for c in np.unique(ctx):
            sel = ctx == c
            kern = kernels[int(c)]
            lp, cp, mp = length[sel, None], code[sel, None], mass[sel, None]  # (P, 1)
            take = np.minimum(kern.num[None, :], L - lp)  # (P, Q) tokens that enter the window
            new_code = np.broadcast_to(cp, take.shape)
            for t in range(kern.tokens.shape[1]):
                new_code = np.where(t < take, new_code * V + kern.tokens[None, :, t], new_code)
            out_len.append((lp + take).ravel())
            out_code.append(new_code.ravel())
            out_mass.append((mp * kern.mass[None, :]).ravel())
            unresolved += float(mass[sel].sum() * kern.unresolved)
        length, code, mass = np.concatenate(out_len), np.concatenate(out_code), np.concatenate(out_mass)
        done = length >= L
        law += np.bincount(code[done], weights=mass[done], minlength=V**L)
        keys, inv = np.unique(length[~done] * V**L + code[~done], return_inverse=True)
        mass = np.bincount(inv, weights=mass[~done], minlength=keys.size)
        length, code = keys // V**L, keys % V**L
    if unresolved > tol:
        raise InputError("verifier", f"an output the enumeration resolves up to tol = {tol:g} of the mass",
                         f"{unresolved:.3g} unresolved (decisions not thresholds on one uniform each?)")  # fmt: skip
    audited = max(stats.audited, 0)
    return ExactLaw(law.reshape((V,) * L), unresolved, expected, stats.boxes, stats.evals, stats.calls, audited)


def _counts(num_draft: int | Sequence[int]) -> list[int]:
    try:
        counts = [int(num_draft)] if np.ndim(num_draft) == 0 else [int(j) for j in num_draft]  # type: ignore[arg-type,union-attr]
    except (TypeError, ValueError) as e:
        raise InputError("num_draft", "a draft count or a sequence of them", repr(num_draft)) from e
    if not counts:
        raise InputError("num_draft", "at least one draft count", "an empty sequence")
    return counts


class _Kernel(NamedTuple):
    """One context's round law: outputs q = 0..Q-1 and their probability."""

    num: np.ndarray  # (Q,) tokens emitted
    tokens: np.ndarray  # (Q, R) the first R of them (-1 past num)
    mass: np.ndarray  # (Q,)
    unresolved: float  # mass of unresolved boxes in this context's round


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
    for drafts in itertools.product(range(chain.V), repeat=j):
        prob, prev = 1.0, ctx
        for x in drafts:
            prob *= chain.probs(prev)[x]
            prev = x
        if prob > 0:
            out.append((list(drafts), prob))
    return out


def _kernels(
    verifier: Callable[..., Any],
    target: MarkovChain,
    drafter: Drafter,
    contexts: list[int],
    counts: list[int],
    K: int,
    R: int,
    stats: _Stats,
    expected: np.ndarray,
) -> dict[int, _Kernel]:
    """Enumerate one round after each context; fill ``expected`` (V+1, K+1) for them."""
    V = target.V
    js, freq = np.unique(counts, return_counts=True)
    ctx_l, j_l, w_l, drafts_l = [], [], [], []
    for c in contexts:
        for j, f in zip(js.tolist(), freq.tolist(), strict=True):
            for seq, prob in _draft_sequences(drafter, c, j):
                ctx_l.append(c)
                j_l.append(j)
                w_l.append(prob * f / len(counts))
                drafts_l.append(seq + [0] * (K - j))
            if len(ctx_l) > MAX_ROWS:
                raise InputError("num_draft", f"at most {MAX_ROWS:,} draft sequences per batch of contexts "
                                 "(smaller V or K)", f"more than {MAX_ROWS:,}")  # fmt: skip
    A = len(ctx_l)
    ctx, j = np.array(ctx_l, np.int64), np.array(j_l, np.int64)
    rnd = build_round(target, drafter, ctx, np.array(drafts_l, np.int64).reshape(A, K), j)
    ev = _Evaluator(verifier, rnd, K, V, R, stats)
    boxes = _enumerate(ev, np.asarray(w_l), ctx, K + 1)
    row, key, unres = boxes.row, boxes.key, boxes.stuck
    vol = np.prod(boxes.hi - boxes.lo, axis=1)
    num = key % (K + 2)
    w = np.asarray(w_l)[row] * vol  # (boxes,) probability of each accepted box
    kernels = {}
    for c in contexts:
        sel = ctx[row] == c
        for jj in js.tolist():
            s2 = sel & (j[row] == jj)
            expected[c + 1, jj] = (w[s2] * num[s2]).sum() / w[s2].sum()
        # A round that emits nothing is retried with fresh drafts and coins, as generate does:
        # the next tokens follow the round's law given that it emits at least one.
        emits = w[sel & (num > 0)].sum()
        if emits < 1e-12:
            raise InputError("verifier", "at least one token emitted per round", "rounds that emit none")
        sel &= num > 0
        keys, inv = np.unique(key[sel], return_inverse=True)
        kmass = np.bincount(inv, weights=w[sel], minlength=keys.size) / emits
        knum, kcode = keys % (K + 2), keys // (K + 2)
        toks = np.empty((keys.size, R), np.int64)
        for t in range(R - 1, -1, -1):  # digits base V + 1, most significant first; 0 = none
            toks[:, t] = kcode % (V + 1) - 1
            kcode //= V + 1
        kernels[c] = _Kernel(knum, toks, kmass, float((w[ctx[row] == c] * unres[ctx[row] == c]).sum()) / emits)
    return kernels


