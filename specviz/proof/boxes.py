"""The box search behind :func:`specviz.proof.exact.verifier_law`: probing a verifier's output
over the unit cube of its uniforms and cutting it into boxes of constant output.

# K drafts, V vocabulary, D = K + 1 uniforms per row, R tokens compared

:func:`breakpoints` lists the thresholds a step of the rule or of a classic mistake compares a
uniform with; :class:`_Evaluator` runs the verifier on (row, uniforms) points and reduces each
output to a comparable key; :func:`_enumerate` cuts each row's cube into boxes, line-searching
each uniform for the points where the output changes, and audits the result on random points.
The method, its assumption and its bounds are in :mod:`specviz.proof.exact`'s docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..verifiers.verify import Uniforms
from .simulate import Round, _check_result

LINE_POINTS = 64  # evenly spaced points of each line search, besides the listed breakpoints
BISECT_LEVELS = 3  # bisection steps of a line search per verifier call (7 probes per line): the same cuts
SNAP_ULPS = 256  # a change next to a search point is first looked for this many floats around it (draws: ~120)
MAX_DEPTH = 64  # cuts along one path before a box counts as unresolved
MIN_WIDTH = 2.0**-44  # narrower than this along its cut uniform: rounding scale, unresolved
AUDIT_ROUNDS = 5  # audits (each reopening the boxes it contradicts, the next twice as large) before refusing
AUDIT_SEED = 20_251_130  # the audit is reproducible
CHUNK = 1 << 18  # verifier rows per call: ~30 MB of float64 inputs at V = 4, K = 3


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


_BPS_CACHE: dict[bytes, np.ndarray] = {}  # the rows' breakpoints by their inputs: every rule judged on a problem
BPS_CACHE_SIZE = 16  # meets the same rows, and listing their breakpoints cost a tenth of a second at V = 4, K = 3


def _row_breakpoints(target_probs: np.ndarray, draft_probs: np.ndarray | None, draft_tokens: np.ndarray) -> np.ndarray:
    """(A, Bmax) every row's :func:`breakpoints`, NaN padded; computed once per distinct set of rows."""
    parts = [target_probs, draft_tokens] + ([] if draft_probs is None else [draft_probs])
    key = b"|".join(str((x.dtype, x.shape)).encode() + np.ascontiguousarray(x).tobytes() for x in parts)
    key += b"|none" if draft_probs is None else b""
    if key in _BPS_CACHE:
        return _BPS_CACHE[key].copy()
    A = draft_tokens.shape[0]
    D = draft_probs
    bps = [breakpoints(target_probs[a], None if D is None else D[a], draft_tokens[a]) for a in range(A)]
    out = np.full((A, max([b.size for b in bps] + [1])), np.nan)  # (A, Bmax), NaN padded
    for a, b in enumerate(bps):
        out[a, : b.size] = b
    if len(_BPS_CACHE) >= BPS_CACHE_SIZE:
        _BPS_CACHE.pop(next(iter(_BPS_CACHE)))  # the oldest first
    _BPS_CACHE[key] = out
    return out.copy()


class _Stats:
    def __init__(self, max_evals: int, audit: int) -> None:
        self.max_evals, self.audit = max_evals, audit
        self.evals = self.calls = self.boxes = 0
        self.audited = -1  # the smallest clean audit so far; -1: none yet


class _Evaluator:
    """Runs the verifier on (row, uniforms) points and reduces each output to a comparable key."""

    def __init__(self, verifier: Callable[..., Any], rnd: Round, K: int, V: int, R: int, stats: _Stats) -> None:
        self.verifier, self.rnd, self.K, self.V, self.R, self.stats = verifier, rnd, K, V, R, stats
        if (V + 1) ** R * (K + 2) >= 2**62:
            raise InputError("L", "a window whose outputs fit one int64 key (smaller V or L)", f"V = {V}, {R} tokens")
        self.bps = _row_breakpoints(rnd.target_probs, rnd.draft_probs, rnd.draft_tokens)
        self.mult: np.ndarray | None = None  # (A,) rows each row stands for (see _shared); None: one each

    def rows(self, row: np.ndarray) -> int:
        """The verifier rows that evaluating ``row`` stands for (the budget's count)."""
        return int(row.size if self.mult is None else self.mult[row].sum())

    def run(self, row: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Tokens (n, K+1) and num_tokens (n,) at uniforms u (n, D) for rows ``row`` (n,)."""
        st, K = self.stats, self.K
        self.charge(self.rows(row))
        toks, num = np.empty((row.size, K + 1), np.int64), np.empty(row.size, np.int64)
        for s in range(0, row.size, CHUNK):
            r, uu = row[s : s + CHUNK], u[s : s + CHUNK]
            rnd = self.rnd
            res = self.verifier(rnd.target_probs[r], None if rnd.draft_probs is None else rnd.draft_probs[r],
                                rnd.draft_tokens[r], rnd.num_draft[r],
                                uniforms=Uniforms(accept=uu[:, :K].copy(), sample=uu[:, K].copy()))  # fmt: skip
            toks[s : s + CHUNK], num[s : s + CHUNK] = _check_result(res, r.size, K, self.V)
            st.calls += 1
        return toks, num

    def charge(self, rows: int) -> None:
        """Count ``rows`` verifier rows against max_evals, refusing (before any is run) past it."""
        st = self.stats
        if st.evals + rows > st.max_evals:
            A = self.rnd.num_draft.shape[0]
            raise InputError("verifier", f"boxes resolved within max_evals = {st.max_evals:,} verifier rows",
                             f"more for {A:,} draft sequences: too many (smaller V or K) or outputs that change on "
                             "pieces too fine to resolve (a decision on several uniforms at once?)")  # fmt: skip
        st.evals += rows

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
            pa.append(a)
            pb.append(b)
            pd.append(d)
        for c in range(2**D):
            if not (c >> d) & 1:
                pa.append(1 + 2 * D + c)
                pb.append(1 + 2 * D + (c | 1 << d))
                pd.append(d)
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
    shared = _shared(ev, weight, group, D)
    if shared is not None:
        return shared
    A = weight.size
    tree = _Tree(A)
    boxes = _resolve(ev, tree, np.zeros((A, D)), np.ones((A, D)), np.arange(A), np.zeros(A, np.int64), np.arange(A))
    rng = np.random.default_rng(AUDIT_SEED)
    if not ev.stats.audit:
        ev.stats.audited = 0
        return boxes
    for r in range(AUDIT_ROUNDS):
        # Rows drawn by their probability and uniforms at random: the round's own law, so a missed
        # piece is met as often as its mass says. After a miss, the next audit is twice as large.
        size = ev.stats.audit * 2**r
        zr, z = _audit_draws(rng, weight, group, size, D)
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


def _audit_draws(rng: np.random.Generator, weight: np.ndarray, group: np.ndarray, size: int, D: int
                 ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """One audit's points: rows drawn by their probability within each group, uniforms at random."""
    groups = [np.flatnonzero(group == g) for g in np.unique(group)]
    zr = np.concatenate([rng.choice(g, size=size, p=weight[g] / weight[g].sum()) for g in groups])
    return zr, rng.random((zr.size, D))


def _shared(ev: _Evaluator, weight: np.ndarray, group: np.ndarray, D: int) -> _Boxes | None:
    """:func:`_enumerate`'s boxes, the same to the bit, resolving each distinct row once; None: no row repeats, or
    the audit found a miss (then the caller runs the plain search, with the work counted as if this never ran).

    Rows with the same inputs (a context-free problem's rows after every context) get the same cuts: the box search
    of a row reads only that row's verifier outputs and breakpoints. So each distinct row is searched once, charging
    the budget for every row it stands for, and its boxes are copied to its twins in the plain search's order
    (round of probes, then row, then the order along the row's cuts). The first audit is the plain search's own
    (the same random points, each judged in its row's box); a clean one ends it as it ends the plain search.
    """
    rnd, A = ev.rnd, weight.size
    parts = [rnd.target_probs, rnd.draft_tokens, rnd.num_draft] + ([] if rnd.draft_probs is None else [rnd.draft_probs])
    flat = np.concatenate([np.ascontiguousarray(x, np.float64).reshape(A, -1) for x in parts], axis=1)
    # On bit patterns: -0.0 and 0.0 stay apart.
    _, rep, inv, mult = np.unique(flat.view(np.int64), axis=0, return_index=True, return_inverse=True,
                                  return_counts=True)  # fmt: skip
    inv = inv.ravel()
    if rep.size == A:
        return None
    st = ev.stats
    saved = (st.evals, st.calls, st.boxes, st.audited)
    sub = _Evaluator.__new__(_Evaluator)  # the distinct rows only, sharing the budget
    sub.__dict__.update(ev.__dict__)
    sub.rnd = Round(rnd.target_probs[rep], None if rnd.draft_probs is None else rnd.draft_probs[rep],
                    rnd.draft_tokens[rep], rnd.num_draft[rep])  # fmt: skip
    sub.bps, sub.mult = ev.bps[rep], mult
    tree = _Tree(rep.size)
    parts_out: list[_Boxes] = []
    _resolve(sub, tree, np.zeros((rep.size, D)), np.ones((rep.size, D)), np.arange(rep.size),
             np.zeros(rep.size, np.int64), np.arange(rep.size), parts_out)  # fmt: skip
    members = np.argsort(inv, kind="stable")  # original rows, grouped by the distinct row they repeat
    start = np.cumsum(mult) - mult
    out = []
    for b in parts_out:  # each round of probes: its boxes copied to every twin, sorted by row as the plain search
        n = mult[b.row]
        i = np.repeat(np.arange(b.row.size), n)
        a = members[np.repeat(start[b.row], n) + np.arange(i.size) - np.repeat(np.cumsum(n) - n, n)]
        order = np.lexsort((i, a))
        out.append(_Boxes(a[order], b.lo[i[order]], b.hi[i[order]], b.key[i[order]], b.stuck[i[order]],
                          b.node[i[order]]))  # fmt: skip
    boxes = _Boxes.join(out)
    if not st.audit:
        st.audited = 0
        return boxes
    zr, z = _audit_draws(np.random.default_rng(AUDIT_SEED), weight, group, st.audit, D)
    kz = ev.keys(zr, z)
    distinct = _Boxes.join(parts_out)
    box_of = np.full(tree.n, -1, np.int64)
    box_of[distinct.node] = np.arange(distinct.node.size)
    box = box_of[tree.locate(inv[zr], z)]
    if ((kz != distinct.key[box]) & ~distinct.stuck[box]).any():
        st.evals, st.calls, st.boxes, st.audited = saved
        return None
    st.audited = st.audit if st.audited < 0 else min(st.audited, st.audit)
    return boxes


def _resolve(
    ev: _Evaluator, tree: _Tree, lo: np.ndarray, hi: np.ndarray, row: np.ndarray, depth: np.ndarray, node: np.ndarray,
    parts: list[_Boxes] | None = None,
) -> _Boxes:  # fmt: skip
    """Probe and cut boxes lo, hi (n, D) of rows ``row`` until each is constant or unresolved (``parts``: gets
    each round of probes' accepted boxes)."""
    D = lo.shape[1]
    side, pa, pb, pd = _probe_layout(D)
    m = side.shape[0]
    out: list[_Boxes] = []
    while row.size:
        n = row.size
        ev.stats.boxes += ev.rows(row)
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
        if parts is not None:
            parts.append(out[-1])
        idx = np.flatnonzero(~(agree | stuck))
        if not idx.size:
            break
        has = diff[idx].any(axis=1)
        cut_box, cut_at = [], []
        if has.any():  # search the line through the first pair of probes that differ in one uniform
            b = idx[has]
            base = pts[b, pa[first[b]]]  # (nb, D)
            bb, s = _line_search(ev, row[b], sides[b, d[b]], base, d[b])
            cut_box.append(b[bb])
            cut_at.append(s)
        if (~has).any():  # probes differ only across several uniforms: halve the widest
            b = idx[~has]
            cut_box.append(b)
            cut_at.append(lo[b, d[b]] + 0.5 * w[b, d[b]])
        cuts = np.concatenate(cut_box), np.concatenate(cut_at)
        lo, hi, row, depth, node = _split(tree, lo, hi, row, depth, node, d, idx, *cuts)
    return _Boxes.join(out)


def _check_pure(ev: _Evaluator, row: np.ndarray, u: np.ndarray, toks: np.ndarray, num: np.ndarray) -> None:
    """Call the verifier again on the same rows and uniforms, in reverse order and without the first
    (so both the positions and the rest of the batch change): the same outputs, or refuse."""
    keep = np.arange(row.size)[::-1][: max(row.size - 1, 1)]  # (n-1,) reversed, the first left out
    if ev.mult is not None and row.size > 1:
        ev.charge(int(ev.mult[row[0]]) - 1)  # the rows the first stands for, less itself, are checked too
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
        _bisect_levels(ev, probe, sel, row[ci], lo_b, hi_b)
    return ci, hi_b.view(np.float64)


def _bisect_levels(
    ev: _Evaluator, probe: Callable[[np.ndarray, np.ndarray], np.ndarray], sel: np.ndarray, line_row: np.ndarray,
    lo_b: np.ndarray, hi_b: np.ndarray
) -> None:  # fmt: skip
    """BISECT_LEVELS steps of the bisection of lines ``sel`` (float bits lo_b < hi_b, updated in place) in one call.

    The same steps as one probe per step, bit for bit: every midpoint the next levels could visit (the nodes of
    their binary tree, by the same integer arithmetic) is probed at once, then the tree is walked by the answers;
    a line stops where one step per call would have (adjacent floats). The budget is charged with the rows one
    step per call would have evaluated, level by level, so max_evals refuses exactly where it did.
    """
    n = sel.size
    l_, h_, mids, wide = lo_b[sel][None, :], hi_b[sel][None, :], [], []
    for _ in range(BISECT_LEVELS):  # node j's children: 2j (its mid differs: below it) and 2j + 1 (the same)
        mid = l_ + (h_ - l_) // 2
        mids.append(mid)
        wide.append(h_ - l_ > 1)
        l_, h_ = np.stack([l_, mid], axis=1).reshape(-1, n), np.stack([mid, h_], axis=1).reshape(-1, n)
    flat, need = np.concatenate(mids), np.concatenate(wide)  # (2^levels - 1, n)
    li, gi = np.nonzero(need.T)  # only nodes wider than one float can be visited: probe those
    same = np.zeros(flat.shape, bool)
    st = ev.stats
    evals = st.evals
    st.evals = -(1 << 62)  # the speculative probes are not charged: the walk below charges the steps taken
    try:
        same[gi, li] = probe(flat[gi, li], sel[li])
    finally:
        st.evals = evals
    lo, hi = lo_b[sel], hi_b[sel]
    cur, first, cols = np.zeros(n, np.int64), 0, np.arange(n)
    for level in range(BISECT_LEVELS):
        act = hi - lo > 1
        if not act.any():
            break
        ev.charge(ev.rows(line_row[sel[act]]))
        mid, yes = flat[first + cur, cols], same[first + cur, cols]
        lo, hi = np.where(act & yes, mid, lo), np.where(act & ~yes, mid, hi)
        cur, first = 2 * cur + yes, first + 2**level
    lo_b[sel], hi_b[sel] = lo, hi


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
