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
over all boxes is one verifier call (chunked at ``CHUNK`` rows).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..verifiers.verify import Uniforms
from .markov import START, Drafter, MarkovChain
from .simulate import Round, _check_result, build_round

LINE_POINTS = 64  # evenly spaced points of each line search, besides the listed breakpoints
SNAP_ULPS = 256  # a change next to a search point is first looked for this many floats around it (draws: ~120)
MAX_DEPTH = 64  # cuts along one path before a box counts as unresolved
MIN_WIDTH = 2.0**-44  # narrower than this along its cut uniform: rounding scale, unresolved
UNRESOLVED_TOL = 1e-9  # default bound on the unresolved probability mass before refusing
AUDIT_POINTS = 4096  # random points per context checked against the boxes after they are resolved
AUDIT_ROUNDS = 5  # audits (each reopening the boxes it contradicts, the next twice as large) before refusing
AUDIT_SEED = 20_251_130  # the audit is reproducible
MAX_ROWS = 50_000  # (context, draft count, drafts) rows of one batch of contexts
MAX_CELLS = 1 << 24  # cells V**L of the returned law: 128 MB of float64
MAX_EVALS = 5_000_000  # verifier rows of one call of verifier_law: ~5 s at V = 4
CHUNK = 1 << 18  # verifier rows per call: ~30 MB of float64 inputs at V = 4, K = 3


class ExactLaw(NamedTuple):
    """The law of the first L tokens, with what could not be resolved."""

    law: np.ndarray  # (V,) * L: P(first L tokens), summing to 1
    unresolved: float  # mass given a probed output without resolving its box; TV(law, truth) <= this
    expected_tokens: np.ndarray  # (V+1, K+1) E[tokens per verification | context c (0: start), j drafts]; NaN: unmet
    boxes: int  # boxes probed
    evaluations: int  # verifier rows evaluated
    calls: int  # verifier calls
    audited: int  # random points per context, drawn from the round's law, that all matched their box


def breakpoints(target_probs: np.ndarray, draft_probs: np.ndarray | None, draft_tokens: np.ndarray) -> np.ndarray:
    """Every threshold in (0, 1) a step of the rule or of a classic mistake compares a uniform with.

    target_probs (K+1, V), draft_probs (K, V) or None, draft_tokens (K,). Sorted, unique. The
    enumeration searches these first; see the module docstring for what they guarantee.
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


class _Stats:
    def __init__(self, max_evals: int, audit: int) -> None:
        self.max_evals, self.audit = max_evals, audit
        self.evals = self.calls = self.boxes = 0
        self.audited = -1  # the smallest clean audit so far; -1: none yet


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
    for seq in itertools.product(range(chain.V), repeat=j):
        prob, prev = 1.0, ctx
        for x in seq:
            prob *= chain.probs(prev)[x]
            prev = x
        if prob > 0:
            out.append((list(seq), prob))
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


class _Evaluator:
    """Runs the verifier on (row, uniforms) points and reduces each output to a comparable key."""

    def __init__(self, verifier: Callable[..., Any], rnd: Round, K: int, V: int, R: int, stats: _Stats) -> None:
        self.verifier, self.rnd, self.K, self.V, self.R, self.stats = verifier, rnd, K, V, R, stats
        if (V + 1) ** R * (K + 2) >= 2**62:
            raise InputError("L", "a window whose outputs fit one int64 key (smaller V or L)", f"V = {V}, {R} tokens")
        A = rnd.num_draft.shape[0]
        D = None if rnd.draft_probs is None else rnd.draft_probs
        bps = [breakpoints(rnd.target_probs[a], None if D is None else D[a], rnd.draft_tokens[a]) for a in range(A)]
        self.bps = np.full((A, max([b.size for b in bps] + [1])), np.nan)  # (A, Bmax), NaN padded
        for a, b in enumerate(bps):
            self.bps[a, : b.size] = b

    def run(self, row: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Tokens (n, K+1) and num_tokens (n,) at uniforms u (n, D) for rows ``row`` (n,)."""
        st, K = self.stats, self.K
        if st.evals + row.size > st.max_evals:
            A = self.rnd.num_draft.shape[0]
            raise InputError("verifier", f"boxes resolved within max_evals = {st.max_evals:,} verifier rows",
                             f"more for {A:,} draft sequences: too many (smaller V or K) or outputs that change on "
                             "pieces too fine to resolve (a decision on several uniforms at once?)")  # fmt: skip
        toks, num = np.empty((row.size, K + 1), np.int64), np.empty(row.size, np.int64)
        for s in range(0, row.size, CHUNK):
            r, uu = row[s : s + CHUNK], u[s : s + CHUNK]
            rnd = self.rnd
            res = self.verifier(rnd.target_probs[r], None if rnd.draft_probs is None else rnd.draft_probs[r],
                                rnd.draft_tokens[r], rnd.num_draft[r],
                                uniforms=Uniforms(accept=uu[:, :K].copy(), sample=uu[:, K].copy()))  # fmt: skip
            toks[s : s + CHUNK], num[s : s + CHUNK] = _check_result(res, r.size, K, self.V)
            st.calls += 1
        st.evals += row.size
        return toks, num

    def key(self, toks: np.ndarray, num: np.ndarray) -> np.ndarray:
        """(n,) int64: the number emitted and the first R tokens, equal iff both are."""
        code = np.zeros(num.shape, np.int64)
        for t in range(self.R):
            code = code * (self.V + 1) + np.where(t < num, toks[:, t] + 1, 0)
        return code * (self.K + 2) + num

    def keys(self, row: np.ndarray, u: np.ndarray) -> np.ndarray:
        return self.key(*self.run(row, u))


def _probe_layout(D: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Which side of each uniform every probe takes, and the probe pairs that differ in one uniform.

    Returns side (m, D) in {0: the lower face, 1: centre, 2: the upper face}, and
    pairs a, b, d (P,): probes a and b differ only in uniform d. Pairs are ordered by d, then
    the central line before the corners, so the first differing pair picks the lowest uniform.
    """
    side = [np.ones(D, np.int64)]
    for d in range(D):
        for s in (0, 2):
            p = np.ones(D, np.int64)
            p[d] = s
            side.append(p)
    side += [np.array([2 * ((c >> d) & 1) for d in range(D)], np.int64) for c in range(2**D)]
    pa, pb, pd = [], [], []
    for d in range(D):
        lo_face, hi_face = 1 + 2 * d, 2 + 2 * d
        for a, b in ((lo_face, hi_face), (0, lo_face), (0, hi_face)):
            pa.append(a), pb.append(b), pd.append(d)
        for c in range(2**D):
            if not (c >> d) & 1:
                pa.append(1 + 2 * D + c), pb.append(1 + 2 * D + (c | 1 << d)), pd.append(d)
    return np.array(side), np.array(pa), np.array(pb), np.array(pd)


def _sides(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """(n, D, 3): the lowest, centre and highest float of each box [lo, hi) along each uniform."""
    top = np.nextafter(hi, -np.inf)  # the largest float inside [lo, hi): a uniform can take it
    centre = np.minimum(lo + 0.5 * (hi - lo), top)
    return np.stack([lo, centre, top], axis=-1)


class _Boxes(NamedTuple):
    """Accepted boxes: row (n,), lo and hi (n, D), the output key (n,), unresolved (n,) bool, tree node (n,)."""

    row: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    key: np.ndarray
    stuck: np.ndarray
    node: np.ndarray

    def take(self, i: np.ndarray) -> _Boxes:
        return _Boxes(*(x[i] for x in self))

    @staticmethod
    def join(parts: list[_Boxes]) -> _Boxes:
        return _Boxes(*(np.concatenate(x) for x in zip(*parts, strict=True)))


class _Tree:
    """Every cut made so far, so that the box holding a point is found in a few steps per cut.

    Node v (row a's whole cube is node a) was cut along uniform dim[v] (-1: never cut) into the
    children first[v] .. first[v] + count[v] - 1, in order along that uniform; bound[c] is child
    c's lower edge along it.
    """

    def __init__(self, A: int) -> None:
        self.n = A
        cap = max(2 * A, 1024)
        self.dim, self.first = np.full(cap, -1, np.int64), np.zeros(cap, np.int64)
        self.count, self.bound = np.zeros(cap, np.int64), np.zeros(cap)

    def cut(self, parent: np.ndarray, d: np.ndarray, count: np.ndarray, bound: np.ndarray) -> np.ndarray:
        """Record nodes ``parent`` cut along d into count children with lower edges ``bound``; their ids."""
        c = bound.size
        if self.n + c > self.dim.size:
            grow = max(self.n + c, 2 * self.dim.size) - self.dim.size
            self.dim = np.concatenate([self.dim, np.full(grow, -1, np.int64)])
            self.first = np.concatenate([self.first, np.zeros(grow, np.int64)])
            self.count = np.concatenate([self.count, np.zeros(grow, np.int64)])
            self.bound = np.concatenate([self.bound, np.zeros(grow)])
        self.dim[parent], self.count[parent] = d, count
        self.first[parent] = self.n + np.cumsum(count) - count
        self.bound[self.n : self.n + c] = bound
        self.n += c
        return np.arange(self.n - c, self.n)

    def locate(self, zr: np.ndarray, z: np.ndarray) -> np.ndarray:
        """The uncut node holding each point: rows zr (p,), uniforms z (p, D)."""
        cur = zr.copy()
        while True:
            dd = self.dim[cur]
            act = np.flatnonzero(dd >= 0)
            if not act.size:
                return cur
            x = z[act, dd[act]]
            lo = self.first[cur[act]]
            hi = lo + self.count[cur[act]]
            while True:  # binary search for the last child whose lower edge is <= x
                m = hi - lo > 1
                if not m.any():
                    break
                mid = (lo + hi) // 2
                go = self.bound[mid] <= x
                lo, hi = np.where(m & go, mid, lo), np.where(m & ~go, mid, hi)
            cur[act] = lo


def _enumerate(ev: _Evaluator, weight: np.ndarray, group: np.ndarray, D: int) -> _Boxes:
    """Resolve every row's cube into boxes of constant output, then audit them at random points.

    weight (A,) probability of each row within its group (context), group (A,) its context.
    """
    A = weight.size
    tree = _Tree(A)
    boxes = _resolve(ev, tree, np.zeros((A, D)), np.ones((A, D)), np.arange(A), np.zeros(A, np.int64), np.arange(A))
    rng = np.random.default_rng(AUDIT_SEED)
    groups = [np.flatnonzero(group == g) for g in np.unique(group)]
    if not ev.stats.audit:
        ev.stats.audited = 0
        return boxes
    for r in range(AUDIT_ROUNDS):
        # Rows drawn by their probability and uniforms at random: the round's own law, so a missed
        # piece is met as often as its mass says. After a miss, the next audit is twice as large.
        size = ev.stats.audit * 2**r
        zr = np.concatenate([rng.choice(g, size=size, p=weight[g] / weight[g].sum()) for g in groups])
        z = rng.random((zr.size, D))
        kz = ev.keys(zr, z)
        box_of = np.full(tree.n, -1, np.int64)
        box_of[boxes.node] = np.arange(boxes.node.size)
        box = box_of[tree.locate(zr, z)]
        bad = (kz != boxes.key[box]) & ~boxes.stuck[box]
        if not bad.any():
            ev.stats.audited = size if ev.stats.audited < 0 else min(ev.stats.audited, size)
            return boxes
        box, first = np.unique(box[bad], return_index=True)  # one audit point per box to reopen
        z, kz = z[np.flatnonzero(bad)[first]], kz[np.flatnonzero(bad)[first]]
        old = boxes.take(box)
        d, base = _path_change(ev, old, z, kz)
        sides = _sides(old.lo, old.hi)
        bb, s = _line_search(ev, old.row, sides[np.arange(box.size), d], base, d, z[np.arange(box.size), d])
        depth = np.zeros(box.size, np.int64)
        pieces = _split(tree, old.lo, old.hi, old.row, depth, old.node, d, np.arange(box.size), bb, s)
        keep = np.ones(boxes.row.size, bool)
        keep[box] = False
        boxes = _Boxes.join([boxes.take(np.flatnonzero(keep)), _resolve(ev, tree, *pieces)])
    raise InputError("verifier", f"boxes that agree with {AUDIT_ROUNDS} rounds of random audit points",
                     "outputs that keep differing inside boxes its probes called constant")  # fmt: skip


def _path_change(ev: _Evaluator, old: _Boxes, z: np.ndarray, kz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """From each box's centre to its audit point z (n, D), one uniform at a time: the first step
    that changes the output. Returns that uniform (n,) and the point before the step (n, D)."""
    n, D = z.shape
    centre = _sides(old.lo, old.hi)[:, :, 1]  # (n, D), where the box's key was measured
    path = np.repeat(centre[:, None, :], D + 1, axis=1)  # (n, D+1, D): path[k] has z's first k coordinates
    for k in range(1, D + 1):
        path[:, k, :k] = z[:, :k]
    keys = np.empty((n, D + 1), np.int64)
    keys[:, 0], keys[:, D] = old.key, kz
    if D > 1:
        keys[:, 1:D] = ev.keys(np.repeat(old.row, D - 1), path[:, 1:D].reshape(-1, D)).reshape(n, D - 1)
    d = (keys[:, 1:] != keys[:, :-1]).argmax(axis=1)  # exists: the two ends differ
    return d, path[np.arange(n), d]


def _resolve(
    ev: _Evaluator, tree: _Tree, lo: np.ndarray, hi: np.ndarray, row: np.ndarray, depth: np.ndarray, node: np.ndarray
) -> _Boxes:
    """Probe and cut boxes lo, hi (n, D) of rows ``row`` until each is constant or unresolved."""
    D = lo.shape[1]
    side, pa, pb, pd = _probe_layout(D)
    m = side.shape[0]
    out: list[_Boxes] = []
    while row.size:
        n = row.size
        ev.stats.boxes += n
        sides = _sides(lo, hi)  # (n, D, 3)
        pts = sides[:, np.arange(D)[None, :], side]  # (n, m, D)
        toks, num = ev.run(np.repeat(row, m), pts.reshape(n * m, D))
        key = ev.key(toks, num).reshape(n, m)
        _check_pure(ev, row, pts[:, 0], toks.reshape(n, m, -1)[:, 0], num.reshape(n, m)[:, 0])
        agree = (key == key[:, :1]).all(axis=1)
        w = hi - lo
        diff = key[:, pa] != key[:, pb]  # (n, P)
        first = diff.argmax(axis=1)
        d = np.where(diff.any(axis=1), pd[first], w.argmax(axis=1))  # (n,) the uniform to cut along
        stuck = ~agree & ((depth >= MAX_DEPTH) | (w[np.arange(n), d] < MIN_WIDTH))
        done = np.flatnonzero(agree | stuck)
        out.append(_Boxes(row[done], lo[done], hi[done], key[done, 0], stuck[done], node[done]))
        idx = np.flatnonzero(~(agree | stuck))
        if not idx.size:
            break
        has = diff[idx].any(axis=1)
        cut_box, cut_at = [], []
        if has.any():  # search the line through the first pair of probes that differ in one uniform
            b = idx[has]
            base = pts[b, pa[first[b]]]  # (nb, D)
            bb, s = _line_search(ev, row[b], sides[b, d[b]], base, d[b])
            cut_box.append(b[bb]), cut_at.append(s)
        if (~has).any():  # probes differ only across several uniforms: halve the widest
            b = idx[~has]
            cut_box.append(b), cut_at.append(lo[b, d[b]] + 0.5 * w[b, d[b]])
        cuts = np.concatenate(cut_box), np.concatenate(cut_at)
        lo, hi, row, depth, node = _split(tree, lo, hi, row, depth, node, d, idx, *cuts)
    return _Boxes.join(out)


def _check_pure(ev: _Evaluator, row: np.ndarray, u: np.ndarray, toks: np.ndarray, num: np.ndarray) -> None:
    """Call the verifier again on the same rows and uniforms, in reverse order and without the first
    (so both the positions and the rest of the batch change): the same outputs, or refuse."""
    keep = np.arange(row.size)[::-1][: max(row.size - 1, 1)]  # (n-1,) reversed, the first left out
    t2, n2 = ev.run(row[keep], u[keep])
    toks, num = toks[keep], num[keep]
    emitted = np.arange(ev.K + 1)[None, :] < num[:, None]
    if (n2 != num).any() or (np.where(emitted, toks, -1) != np.where(emitted, t2, -1)).any():
        raise InputError("verifier", "a pure function of its uniforms= (the same tokens for the same rows and "
                         "uniforms on a second call)", "different tokens: it draws its own randomness or "
                         "depends on the rest of the batch, so no law can be enumerated")  # fmt: skip


def _line_search(
    ev: _Evaluator, row: np.ndarray, ends: np.ndarray, base: np.ndarray, d: np.ndarray, extra: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Every change of output found along uniform d through ``base``, between the box's faces.

    row (n,), ends (n, 3) lowest, centre and highest coordinate along d, base (n, D); ``extra``
    (n,) one more point of each line to search (an audit point whose output was missed).
    Returns (box index into the n lines, cut position) per change located to adjacent floats:
    the output at the cut position differs from the output just below it.
    """
    a, b = ends[:, :1], ends[:, 2:]
    even = a + (b - a) * np.linspace(0.0, 1.0, LINE_POINTS + 1)[None, 1:-1]  # (n, G-1) inside (a, b)
    bps = ev.bps[row]
    bps = np.where((bps > a) & (bps < b), bps, np.nan)
    more = [] if extra is None else [extra[:, None]]
    cand = np.sort(np.concatenate([ends, even, bps, *more], axis=1), axis=1)  # the probes' points exactly; NaN last
    grid = np.sort(np.concatenate([cand, 0.5 * (cand[:, 1:] + cand[:, :-1])], axis=1), axis=1)  # (n, g)
    ok = ~np.isnan(grid)
    li, gi = np.nonzero(ok)
    u = base[li].copy()
    u[np.arange(li.size), d[li]] = grid[li, gi]
    key = np.full(grid.shape, -1, np.int64)
    key[li, gi] = ev.keys(row[li], u)
    change = ok[:, 1:] & (key[:, 1:] != key[:, :-1])  # (n, g-1): neighbours with different outputs
    ci, cj = np.nonzero(change)
    left = key[ci, cj]
    lo_b, hi_b = grid[ci, cj].view(np.int64).copy(), grid[ci, cj + 1].view(np.int64).copy()  # float bits

    def probe(bits: np.ndarray, sel: np.ndarray) -> np.ndarray:
        uu = base[ci[sel]].copy()
        uu[np.arange(sel.size), d[ci[sel]]] = bits.view(np.float64)
        return ev.keys(row[ci[sel]], uu) == left[sel]

    # Most changes sit within a few floats of a grid point (a listed breakpoint): test there first.
    sel = np.flatnonzero(hi_b - lo_b > 2 * SNAP_ULPS)
    if sel.size:
        near_lo, near_hi = lo_b[sel] + SNAP_ULPS, hi_b[sel] - SNAP_ULPS
        same = probe(np.concatenate([near_lo, near_hi]), np.concatenate([sel, sel]))
        s_lo, s_hi = same[: sel.size], same[sel.size :]
        hi_b[sel] = np.where(~s_lo, near_lo, np.where(~s_hi, near_hi, hi_b[sel]))
        lo_b[sel] = np.where(~s_lo, lo_b[sel], np.where(s_hi, near_hi, near_lo))
    while True:  # bisection on the bit patterns (monotone for floats >= 0): at most 64 steps
        sel = np.flatnonzero(hi_b - lo_b > 1)
        if not sel.size:
            break
        mid = lo_b[sel] + (hi_b[sel] - lo_b[sel]) // 2
        same = probe(mid, sel)
        lo_b[sel] = np.where(same, mid, lo_b[sel])
        hi_b[sel] = np.where(same, hi_b[sel], mid)
    return ci, hi_b.view(np.float64)


def _split(
    tree: _Tree,
    lo: np.ndarray,
    hi: np.ndarray,
    row: np.ndarray,
    depth: np.ndarray,
    node: np.ndarray,
    d: np.ndarray,
    idx: np.ndarray,
    cut_box: np.ndarray,
    cut_at: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cut boxes ``idx`` along their uniform d at every position given for them (cut_box: which
    box, a member of the sorted idx; cut_at: where). Returns the pieces' lo, hi, row, depth, node."""
    ar = np.arange(idx.size)
    pos = np.searchsorted(idx, cut_box)
    bid = np.concatenate([ar, ar, pos])
    val = np.concatenate([lo[idx, d[idx]], hi[idx, d[idx]], cut_at])
    order = np.lexsort((val, bid))
    bid, val = bid[order], val[order]
    keep = np.ones(bid.size, bool)
    keep[1:] = (bid[1:] != bid[:-1]) | (val[1:] != val[:-1])
    bid, val = bid[keep], val[keep]
    same = bid[1:] == bid[:-1]
    child = bid[:-1][same]  # (c,) parent position in idx, ascending; pieces in order along d
    parent = idx[child]
    new_lo, new_hi = lo[parent].copy(), hi[parent].copy()
    pd = d[parent]
    new_lo[np.arange(child.size), pd] = val[:-1][same]
    new_hi[np.arange(child.size), pd] = val[1:][same]
    ids = tree.cut(node[idx], d[idx], np.bincount(child, minlength=idx.size), val[:-1][same])
    return new_lo, new_hi, row[parent], depth[parent] + 1, ids
