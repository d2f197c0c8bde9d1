"""The compiled loop of :mod:`specviz.verifiers._fused` (imported only when Numba is installed).

Module-level functions, so that Numba's on-disk cache (``cache=True``) finds them again in the
next process: the first call in a fresh installation compiles (about a second), later ones load.
"""

import numba
import numpy as np

from specviz.verifiers._xp import accepts as _accepts_py
from specviz.verifiers.reference import GRID  # absolute: _fused may run this file's source again

# Compiled code cached on disk (Numba's cache=True). specviz.verifiers._fused runs this module again
# with ON_DISK = False (compiled in memory only) when Numba finds no writable cache directory.
ON_DISK: bool = globals().get("ON_DISK", True)
MAX_TOTAL = 16 * GRID  # as specviz.verifiers._sample.MAX_TOTAL
# The accept comparison, compiled from its one copy (specviz.verifiers._xp.accepts) into the loops that
# use it. Numba's disk cache watches this file only: after changing accepts, delete the cached
# _fused_kernel files (tests/test_numba_pass.py checks the loop against accepts on its boundary).
_accepts = numba.njit(inline="always")(_accepts_py)


# Only additions of integers (or of the entries, for the loose sum check) may be reordered.
@numba.njit(cache=ON_DISK, fastmath={"reassoc", "nsz"})
def _sum(w, n):  # pragma: no cover - compiled
    s = 0.0
    for i in range(n):
        s += w[i]
    return s


@numba.njit(cache=ON_DISK, fastmath={"reassoc", "nsz"})
def _sum3(w, a, c, n):  # pragma: no cover - compiled
    """Sums of w (integers: exact in any order) and of a and c in float64 (for the sum check)."""
    s = 0.0
    t = 0.0
    u = 0.0
    for i in range(n):
        s += w[i]
        t += np.float64(a[i])
        u += np.float64(c[i])
    return s, t, u


@numba.njit(cache=ON_DISK, inline="always")
def _weights(p, q, mode, drop, c0, n, w):  # pragma: no cover - compiled
    """w[:n] = floor(2^48 * weight) of tokens c0 .. c0 + n - 1, in the table's dtype, as float64."""
    g = p.dtype.type(GRID)
    zero = p.dtype.type(0)
    if mode == 1:
        for i in range(n):
            x = p[c0 + i] - q[c0 + i]
            if x < zero:
                x = zero
            w[i] = np.floor(x * g)
    else:
        for i in range(n):
            w[i] = np.floor(p[c0 + i] * g)
        if mode == 2 and c0 <= drop < c0 + n:
            w[drop - c0] = 0.0


@numba.njit(cache=ON_DISK)
def block_sums(
    P, Pu, poff, Q, Qu, qoff, mode, drop, V, bs, S, checks, one, pbad, qbad, psum, qsum, u, tok
):  # pragma: no cover
    w = np.empty(bs, np.float64)
    nblk = (V + bs - 1) // bs
    for r in range(poff.shape[0]):
        p = P[poff[r] : poff[r] + V]
        pu = Pu[poff[r] : poff[r] + V]
        q = Q[qoff[r] : qoff[r] + V]
        qu = Qu[qoff[r] : qoff[r] + V]
        pm = Pu.dtype.type(0)
        qm = Qu.dtype.type(0)
        ps = 0.0
        qs = 0.0
        for k in range(nblk):
            c0 = k * bs
            n = min(bs, V - c0)
            _weights(p, q, mode, drop[r], c0, n, w)
            if mode == 1 and checks:
                for i in range(n):
                    pm = max(pm, pu[c0 + i])
                    qm = max(qm, qu[c0 + i])
                s, t, v = _sum3(w, p[c0 : c0 + n], q[c0 : c0 + n], n)
                S[r, k] = s
                ps += t
                qs += v
                continue
            if mode != 1:
                for i in range(n):
                    pm = max(pm, pu[c0 + i])
            S[r, k] = _sum(w, n)
        pbad[r] = pm > one
        qbad[r] = qm > one
        psum[r] = ps  # float sums: the caller sums rows near the tolerance again exactly
        qsum[r] = qs
        # The token: the first whose running weight exceeds floor(u * total) (total - 1 when the
        # product rounds up to the total), found by block and then inside the block; every sum
        # here is of integers below 2^52, exact, as in specviz.verifiers._sample._draw. A row
        # without mass (total 0) or past the guard gets a token the caller never uses.
        total = 0.0
        for k in range(nblk):
            total += S[r, k]
        thr = np.floor(u[r] * total)
        if not thr < total:
            thr = total - 1
        before = 0.0
        blk = nblk - 1
        for k in range(nblk):
            if before + S[r, k] > thr:
                blk = k
                break
            before += S[r, k]
        c0 = blk * bs
        n = min(bs, V - c0)
        _weights(p, q, mode, drop[r], c0, n, w)
        run = 0.0
        inner = n - 1
        for i in range(n):
            run += w[i]
            if run > thr - before:
                inner = i
                break
        tok[r] = c0 + inner


@numba.njit(cache=ON_DISK)
def accept(  # pragma: no cover - compiled
    P, prow, ppos, Q, qrow, qpos, has_q, x, j, ua, V, validate, xs, ff, tokens, acc_u, ratios
):
    """The accept phase of the chain rule, one row at a time; returns a status.

    Row b's position i lives at ``P[prow[b] + i * ppos :]`` (and Q's likewise). Fills ``xs``
    (draft ids, 0 past num_draft), ``ff`` (the first rejected position, or num_draft),
    ``tokens[:, :K]`` (the kept drafts, -1 after), ``acc_u`` and ``ratios`` (at tested positions,
    NaN after). Status 0: done; 1: a draft id outside [0, V) below num_draft; 2: with
    ``validate``, a probed p(x) or q(x) not a probability. On 1 or 2 the outputs are partial:
    the caller runs the NumPy code, which raises the same error.
    """
    B, K = x.shape
    nan = np.nan
    for b in range(B):
        n = j[b]
        for i in range(n):  # every draft id below num_draft is checked, whatever validate says
            if x[b, i] < 0 or x[b, i] >= V:
                return 1
        first = n
        for i in range(n):
            xi = x[b, i]
            xs[b, i] = xi
            if i > first and not validate:
                continue
            p = np.float64(P[prow[b] + i * ppos + xi])
            q = np.float64(Q[qrow[b] + i * qpos + xi]) if has_q else 1.0
            if validate and not (p >= 0.0 and p <= 1.0 and q >= 0.0 and q <= 1.0):
                return 2
            if i > first:
                continue
            coin = ua[b, i]
            acc_u[b, i] = coin
            ratios[b, i] = p / q if q > 0.0 else nan
            if _accepts(coin, q, p):
                tokens[b, i] = xi
            else:
                first = i
        ff[b] = first
        for i in range(n, K):
            xs[b, i] = 0
        for i in range(first + 1 if first < n else n, K):
            acc_u[b, i] = nan
            ratios[b, i] = nan
        for i in range(first, K):
            tokens[b, i] = -1
    return 0


@numba.njit(cache=ON_DISK)
def draw_small(P, prow, ppos, Q, qrow, qpos, has_q, xs, sp, residual, u, V, out):  # pragma: no cover
    """The one-level draw (V <= 256) of clean rows, validate=False; returns False to hand back.

    Row b draws at position sp[b] from max(0, p - q) where ``residual[b]`` (p without the
    drafted token when there is no q), else from p: the same float operations as
    ``specviz.verifiers._sample._draw_one_block``. Any row that would need one of its guards
    (an entry of a row drawn from p outside [0, 1], a total that is not finite or reaches
    2^52) stops the loop: the caller's NumPy code then runs, and raises or draws.
    """
    g = P.dtype.type(GRID)
    zero = P.dtype.type(0)
    C = np.empty(V, np.float64)
    for b in range(sp.shape[0]):
        po = prow[b] + sp[b] * ppos
        res = residual[b]
        use_q = res and has_q
        qo = qrow[b] + sp[b] * qpos if use_q else 0
        drop = xs[b, sp[b]] if res and not has_q else -1
        for _attempt in range(2):  # the second: a residual without mass is drawn from p
            total = 0.0
            for v in range(V):
                x = P[po + v]
                if use_q:
                    x = x - Q[qo + v]
                    if x < zero:
                        x = zero
                else:
                    if not (x >= zero and x <= 1):
                        return False
                    if v == drop:
                        x = zero
                total += np.float64(np.floor(x * g))
                C[v] = total
            if not total < MAX_TOTAL:
                return False
            if total > 0 or not res:
                break
            use_q = False
            drop = -1
            res = False
        thr = np.floor(u[b] * total)
        if not thr < total:
            thr = total - 1
        k = 0
        for v in range(V):
            k += C[v] <= thr
        out[b] = k
    return True
