"""The block-sum pass of the draw as one compiled loop per row (Numba), with a pure fallback.

# R rows drawn, V vocabulary, N table rows, BS tokens per block

:func:`specviz.verifiers._sample._block_sums` needs, for each drawn row, the float64 sum of
floor(w * 2^48) over every block of 256 tokens, where w is p, max(0, p - q) or p with one
token removed; with checks, also each row's largest bit pattern (an entry outside [+0, 1])
and the float sums of p and q. NumPy does that in about eight passes over each row (one read
from memory, the rest in cache). Here each block of 256 tokens is read once, while it is in
the first-level cache, and every output comes from that read: the time is close to one read
of the row from memory.

Same arithmetic as the NumPy passes, so the same tokens:

- p - q is computed in the table's dtype, clamped at 0 with NaN kept (``x < 0`` is false for
  NaN), multiplied by 2^48 in that dtype and floored: each step is the one NumPy runs.
- The weights of a block are summed in float64 in whatever order the compiler vectorizes:
  they are integers, and every partial sum of a row that passes the guard is below 2^52, so
  the sum is exact in any order. A row that does not pass (a NaN, an infinity, a total of
  2^52 or more) still shows as a NaN or a total of 2^52 or more, and the guard raises.
- The row sums for ``validate=True`` are float64 sums of the entries in a different order
  than NumPy's: they are compared with 1 at a tolerance of 1e-4 (float32), far above the
  difference.

Optional: it runs when Numba imports and ``SPECVIZ_NUMBA`` is not ``0``; otherwise (and for
non-contiguous or half-precision tables) the NumPy passes run. Numba compiles the kernel on
first use (about 1-2 s, then cached on disk next to this file or in the user's cache).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

ENV = "SPECVIZ_NUMBA"  # set to 0 to use the NumPy passes instead
_kernel: Any = None  # the compiled pass, built on first use; False when Numba is missing


def enabled() -> bool:
    """Numba is installed and not switched off by ``SPECVIZ_NUMBA=0``."""
    if os.environ.get(ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    return _get() is not False


def usable(table: Any, other: Any = None) -> bool:
    """NumPy float32/float64 tables whose rows are contiguous (``other`` too, same dtype), and Numba on.

    The rows need not follow each other: a slice of a larger array, or one row broadcast to
    every position, is read in place.
    """

    def rows_ok(t: Any) -> bool:
        return (
            isinstance(t, np.ndarray)
            and t.dtype in (np.float32, np.float64)
            and t.ndim >= 2
            and t.strides[-1] == t.itemsize
            and all(st >= 0 and st % t.itemsize == 0 for st in t.strides[:-1])
        )

    ok = rows_ok(table) and (other is None or (rows_ok(other) and other.dtype == table.dtype))
    return ok and enabled()


def row_starts(table: np.ndarray, index: tuple) -> tuple[np.ndarray, np.ndarray]:
    """A 1-D view from the table's first entry to the end of the last row read, and each row's offset.

    ``index``: the rows read, as index arrays over the table's leading axes, e.g. (b, pos) of
    a padded (B, P, V) table or (rows,) of a flat (N, V) one.
    """
    item = table.itemsize
    off = np.zeros(np.shape(index[0]), dtype=np.int64)
    for ix, st in zip(index, table.strides[:-1], strict=True):
        off += np.asarray(ix, dtype=np.int64) * (st // item)
    span = int(off.max()) + table.shape[-1] if off.size else 0
    base = np.lib.stride_tricks.as_strided(table, shape=(span,), strides=(item,), writeable=False)
    return base, off


def block_sums(
    P1: np.ndarray,
    poff: np.ndarray,
    Q1: np.ndarray | None,
    qoff: np.ndarray | None,
    drop: np.ndarray | None,
    V: int,
    bs: int,
    S: np.ndarray,
    checks: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Fill ``S`` (R, ceil(V / bs)) with the block sums of rows ``P1[poff[r] : poff[r] + V]``.

    Weights: p (``Q1`` and ``drop`` None), max(0, p - q) with q the rows of ``Q1`` at
    ``qoff``, or p with column ``drop[r]`` zeroed (``drop[r]`` < 0: none). Returns (p_bad,
    q_bad, p_sum, q_sum), each (R,): an entry of p (of q) outside [+0, 1] or not finite, and
    the float sums of p and q. p_bad is always computed without q (weights from p alone must
    be in range); with q, ``checks`` asks for all four (``validate=True``) and no check runs
    without it.
    """
    kernel = _get()
    R = int(poff.shape[0])
    mode = 1 if Q1 is not None else 2 if drop is not None else 0
    if Q1 is None:
        Q1, qoff = P1, poff  # never read in modes 0 and 2
    if drop is None:
        drop = np.full(R, -1, dtype=np.int64)
    ubits = np.uint32 if P1.dtype == np.float32 else np.uint64
    one = int(np.array(1.0, dtype=P1.dtype).view(ubits))
    pbad = np.zeros(R, dtype=np.bool_)
    qbad = np.zeros(R, dtype=np.bool_)
    psum = np.zeros(R, dtype=np.float64)
    qsum = np.zeros(R, dtype=np.float64)
    kernel(
        P1, P1.view(ubits), np.ascontiguousarray(poff, dtype=np.int64),
        Q1, Q1.view(ubits), np.ascontiguousarray(qoff, dtype=np.int64),
        mode, np.ascontiguousarray(drop, dtype=np.int64), int(V), int(bs), S, bool(checks), one,
        pbad, qbad, psum, qsum,
    )  # fmt: skip
    return pbad, qbad, psum, qsum


def _get() -> Any:
    global _kernel
    if _kernel is None:
        try:
            from ._fused_kernel import kernel
        except ImportError:  # Numba is not installed
            kernel = False
        _kernel = kernel
    return _kernel
