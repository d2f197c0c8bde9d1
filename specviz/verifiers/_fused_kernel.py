"""The compiled loop of :mod:`specviz.verifiers._fused` (imported only when Numba is installed).

Module-level functions, so that Numba's on-disk cache (``cache=True``) finds them again in the
next process: the first call in a fresh installation compiles (about a second), later ones load.
"""

import numba
import numpy as np

GRID = 2.0**48  # as specviz.verifiers._sample.GRID


# Only additions of integers (or of the entries, for the loose sum check) may be reordered.
@numba.njit(cache=True, fastmath={"reassoc", "nsz"})
def _sum(w, n):  # pragma: no cover - compiled
    s = 0.0
    for i in range(n):
        s += w[i]
    return s


@numba.njit(cache=True, fastmath={"reassoc", "nsz"})
def _sum3(w, a, c, n):  # pragma: no cover - compiled
    s = 0.0
    t = 0.0
    u = 0.0
    for i in range(n):
        s += w[i]
        t += np.float64(a[i])
        u += np.float64(c[i])
    return s, t, u


@numba.njit(cache=True)
def kernel(P, Pu, poff, Q, Qu, qoff, mode, drop, V, bs, S, checks, one, pbad, qbad, psum, qsum):  # pragma: no cover
    g = P.dtype.type(GRID)
    zero = P.dtype.type(0)
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
            if mode == 1:
                for i in range(n):
                    x = p[c0 + i] - q[c0 + i]
                    if x < zero:
                        x = zero
                    w[i] = np.floor(x * g)
                if checks:
                    for i in range(n):
                        pm = max(pm, pu[c0 + i])
                        qm = max(qm, qu[c0 + i])
                    s, t, u = _sum3(w, p[c0 : c0 + n], q[c0 : c0 + n], n)
                    S[r, k] = s
                    ps += t
                    qs += u
                    continue
            else:
                for i in range(n):
                    w[i] = np.floor(p[c0 + i] * g)
                if mode == 2 and c0 <= drop[r] < c0 + n:
                    w[drop[r] - c0] = 0.0
                for i in range(n):
                    pm = max(pm, pu[c0 + i])
            S[r, k] = _sum(w, n)
        pbad[r] = pm > one
        qbad[r] = qm > one
        psum[r] = ps
        qsum[r] = qs
