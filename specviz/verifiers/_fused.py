"""The verifier's hot loops compiled with Numba, each with the NumPy code as its fallback.

# B rows, K drafts, R rows drawn, V vocabulary, BS tokens per block

Three loops, each the same float operations as the NumPy code it stands in for, so the same
tokens, and each handing back to that code for anything unusual (which then raises or answers):

- :func:`block_sums` (the draw at V > 256, :func:`specviz.verifiers._sample._block_sums`): for
  each drawn row, the float64 sum of floor(w * 2^48) over every block of 256 tokens, where w is
  p, max(0, p - q) or p with one token removed; with checks, also each row's largest bit pattern
  (an entry outside [+0, 1]) and the float sums of p and q; then the token, by the same
  two-level search (the block, then the token inside it). NumPy does that in about eight passes
  over each row (one read from memory, the rest in cache); here each block is read once, while
  it is in the first-level cache, and every output comes from that read.
- :func:`accept` (the accept phase, :func:`specviz.verifiers.verify._accept`):
  p(x) and q(x) read in place, each row stopping at its first rejection, the outputs written
  once. NumPy builds a dozen (B, K) temporaries.
- :func:`draw_small` (the one-level draw at V <= 256, ``validate=False``): the lab's regime,
  hundreds of thousands of rows of a few tokens.

Same arithmetic:

- p - q is computed in the table's dtype, clamped at 0 with NaN kept (``x < 0`` is false for
  NaN), multiplied by 2^48 in that dtype and floored: each step is the one NumPy runs. Coins
  compare in float64 (``u * q(x) < p(x)``, the probabilities widened exactly), as NumPy's
  promotion does.
- The weights of a block are summed in float64 in whatever order the compiler vectorizes:
  they are integers, and every partial sum of a row that passes the guard is below 2^52, so
  the sum is exact in any order. A row that does not pass (a NaN, an infinity, a total of
  2^52 or more) still shows as a NaN or a total of 2^52 or more, and the guard raises.
- The row sums for ``validate=True`` are float64 sums in the compiler's order, like the float
  sums of the other paths within ``SUM_MARGIN`` of the row's exact sum on the grid: a row that
  close to the tolerance is summed again exactly (``specviz.verifiers._sample._check_sums``),
  so every path gives it the same verdict and message.

Optional: the loops run when Numba imports and ``SPECVIZ_BACKEND`` is not ``numpy``
(:func:`backend`, the one place the switch is read, once per verifier call: see
``specviz.verifiers.verify._dispatch``); otherwise (and for half precision or tables with
negative strides) the NumPy code runs. Numba compiles each
loop on first use (about a second; then cached on disk next to ``_fused_kernel.py`` or in the
user's cache). ``tests/test_numba_pass.py`` compares both ways on bad inputs and
``tests/test_reference_parity.py`` compares every path with the reference.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import warnings
from typing import Any, NamedTuple

import numpy as np

from .._types import Array

BACKEND_ENV = "SPECVIZ_BACKEND"  # auto | numba | numpy | torch: which engine path runs on the CPU
BACKENDS = ("auto", "numba", "numpy", "torch")
_kernels: Any = None  # the module of compiled loops, imported on first use; False when Numba is missing


def backend() -> str:
    """The CPU path ``SPECVIZ_BACKEND`` asks for (read here and nowhere else; default ``auto``).

    - ``auto`` / ``numba``: the compiled loops where Numba is installed, else the NumPy code;
      torch CPU float32/float64 tensors are handed to that code on zero-copy views.
    - ``numpy``: the NumPy code only (the compiled loops off).
    - ``torch``: torch CPU tensors run torch's own kernels instead of the hand-over (NumPy
      arrays run the NumPy code, loops included).

    Every path returns the same tokens (tests/test_reference_parity.py); the switch exists so
    that tests and benchmarks can pick one without patching private functions.
    """
    value = os.environ.get(BACKEND_ENV, "auto").strip().lower() or "auto"
    if value not in BACKENDS:
        from ..errors import InputError

        raise InputError(BACKEND_ENV, "one of " + ", ".join(BACKENDS), repr(value))
    return value


def compiled(choice: str) -> bool:
    """The compiled loops run on NumPy tables under the backend ``choice``: Numba loads, and the
    choice is not ``numpy``. (Imports Numba on first use.)"""
    return choice != "numpy" and _loops() is not False


def enabled() -> bool:
    """The compiled loops run under the current ``SPECVIZ_BACKEND`` (Numba installed, not ``numpy``)."""
    return compiled(backend())


def switched_off() -> bool:
    """``SPECVIZ_BACKEND=numpy``: the NumPy code only."""
    return backend() == "numpy"


def fits(table: Any, other: Any = None) -> bool:
    """NumPy float32/float64 tables whose rows are contiguous (``other`` too, same dtype): what the loops read.

    The rows need not follow each other: a slice of a larger array, or one row broadcast to
    every position, is read in place. Whether the loops run at all is the caller's choice
    (:func:`compiled`, made once per call).
    """

    def rows_ok(t: Any) -> bool:
        return (
            isinstance(t, np.ndarray)
            and t.dtype in (np.float32, np.float64)
            and t.ndim >= 2
            and t.strides[-1] == t.itemsize
            and all(st >= 0 and st % t.itemsize == 0 for st in t.strides[:-1])
        )

    return rows_ok(table) and (other is None or (rows_ok(other) and other.dtype == table.dtype))


class BlockSums(NamedTuple):
    """What :func:`block_sums` finds besides the block sums, each (R,) per row."""

    p_bad: np.ndarray  # bool: an entry of p outside [+0, 1] or not finite
    q_bad: np.ndarray  # bool: the same for q (checked only when asked)
    p_sum: np.ndarray  # float64 float sum of p (for the sum check)
    q_sum: np.ndarray  # float64 float sum of q
    tokens: np.ndarray  # int64 the token drawn with the row's uniform


def block_sums(
    P: np.ndarray,
    p_start: np.ndarray | None,
    Q: np.ndarray | None,
    q_start: np.ndarray | None,
    b: np.ndarray,
    sp: np.ndarray,
    drop: np.ndarray | None,
    V: int,
    bs: int,
    S: np.ndarray,
    checks: bool,
    u: np.ndarray,
) -> BlockSums | None:
    """Fill ``S`` (R, ceil(V / bs)) with the block sums of rows (b[r], sp[r]) of the tables.

    ``P``/``Q``: as in :func:`accept`. Weights: p (``Q`` and ``drop`` None), max(0, p - q), or
    p with column ``drop[r]`` zeroed (``drop[r]`` < 0: none). Returns :class:`BlockSums`, each
    field (R,): an entry of p (of q) outside [+0, 1] or not
    finite, the float sums of p and q (for the sum check), and
    the token drawn with uniform ``u[r]`` (the first whose running weight exceeds
    floor(u * total); meaningless for a row without mass or one the guard refuses). p_bad is
    always computed without q (weights from p alone must be in range); with q, ``checks`` asks
    for all four (``validate=True``) and no check runs without it. None when the compiled loop
    could not be loaded (see :func:`_call`): the caller runs the NumPy code.
    """
    R = int(b.shape[0])
    mode = 1 if Q is not None else 2 if drop is not None else 0
    origin, step = _row_origins(P, p_start, b)
    P1, poff = _base(P), origin + sp * step
    if Q is None:
        Q1, qoff = P1, poff  # never read in modes 0 and 2
    else:
        origin, step = _row_origins(Q, q_start, b)
        Q1, qoff = _base(Q), origin + sp * step
    if drop is None:
        drop = np.full(R, -1, dtype=np.int64)
    ubits = np.uint32 if P1.dtype == np.float32 else np.uint64
    one = int(np.array(1.0, dtype=P1.dtype).view(ubits))
    pbad = np.zeros(R, dtype=np.bool_)
    qbad = np.zeros(R, dtype=np.bool_)
    psum = np.zeros(R, dtype=np.float64)
    qsum = np.zeros(R, dtype=np.float64)
    tokens = np.empty(R, dtype=np.int64)
    done = _call(
        "block_sums", P1, P1.view(ubits), np.ascontiguousarray(poff, dtype=np.int64),
        Q1, Q1.view(ubits), np.ascontiguousarray(qoff, dtype=np.int64),
        mode, np.ascontiguousarray(drop, dtype=np.int64), int(V), int(bs), S, bool(checks), one,
        pbad, qbad, psum, qsum, np.ascontiguousarray(u, dtype=np.float64), tokens,
    )  # fmt: skip
    if done is _FAILED:
        return None
    return BlockSums(p_bad=pbad, q_bad=qbad, p_sum=psum, q_sum=qsum, tokens=tokens)


def _base(table: np.ndarray) -> np.ndarray:
    """A 1-D view of every entry from the table's first to its last (non-negative strides)."""
    item = table.itemsize
    if not table.size:
        return np.lib.stride_tricks.as_strided(table, shape=(0,), strides=(item,), writeable=False)
    extent = 1 + sum((n - 1) * (st // item) for n, st in zip(table.shape, table.strides, strict=True))
    return np.lib.stride_tricks.as_strided(table, shape=(extent,), strides=(item,), writeable=False)


def _row_origins(table: np.ndarray, start: np.ndarray | None, b: np.ndarray) -> tuple[np.ndarray, int]:
    """Offsets in :func:`_base` of position 0 of batch rows ``b``, and the step between positions."""
    item = table.itemsize
    b = np.asarray(b, dtype=np.int64)
    if start is None:  # padded (B, P, V)
        return b * (table.strides[0] // item), table.strides[1] // item
    step = table.strides[0] // item  # flat (R, V): position i of row b is table row start[b] + i
    return np.asarray(start, dtype=np.int64)[b] * step, step


class Accepted(NamedTuple):
    """The chain rule's accept phase: what :func:`accept` computes, and
    :func:`specviz.verifiers.verify._accept` (NumPy or torch arrays)."""

    xs: Array  # (B, K) int64 draft ids, 0 at and past num_draft
    first_fail: Array  # (B,) int64 first rejected position, or num_draft
    tokens: Array  # (B, K + 1) int64 the kept drafts, -1 after (the caller adds the drawn token)
    accept_uniforms: Array  # (B, K) the coins of the tested positions, NaN after
    ratios: Array  # (B, K) p(x) / q(x) at tested positions with q(x) > 0, NaN elsewhere


def accept(
    P: np.ndarray,
    p_start: np.ndarray | None,
    Q: np.ndarray | None,
    q_start: np.ndarray | None,
    x: np.ndarray,
    j: np.ndarray,
    ua: np.ndarray,
    V: int,
    validate: bool,
) -> Accepted | None:
    """The accept phase in one compiled loop, reading p(x) and q(x) from the tables in place.

    ``P``/``Q``: padded (B, P, V) tables (``*_start`` None) or flat (R, V) ones with each batch
    row's first table row; ``Q`` None: a deterministic drafter (q(x) = 1). ``x`` (B, K) int64
    draft ids, ``j`` (B,) int64 counts, ``ua`` (B, K) float64 coins. Each row stops reading
    at its first rejection, except that every draft id below num_draft is range-checked and,
    with ``validate``, every probed p(x) and q(x) below num_draft too. None when a check fails:
    the caller's NumPy code then raises the error.
    """
    B, K = (int(n) for n in x.shape)
    rows = np.arange(B)
    prow, ppos = _row_origins(P, p_start, rows)
    has_q = Q is not None
    if Q is not None:
        qrow, qpos = _row_origins(Q, q_start, rows)
        Qb = _base(Q)
    else:
        Qb, qrow, qpos = _base(P), prow, ppos
    xs = np.empty((B, K), dtype=np.int64)
    ff = np.empty(B, dtype=np.int64)
    tokens = np.empty((B, K + 1), dtype=np.int64)
    tokens[:, K] = -1
    acc_u = np.empty((B, K), dtype=np.float64)
    ratios = np.empty((B, K), dtype=np.float64)
    status = _call(
        "accept", _base(P), prow, ppos, Qb, qrow, qpos, has_q,
        np.ascontiguousarray(x, dtype=np.int64), np.ascontiguousarray(j, dtype=np.int64),
        np.ascontiguousarray(ua, dtype=np.float64), int(V), bool(validate),
        xs, ff, tokens, acc_u, ratios,
    )  # fmt: skip
    if status is _FAILED or status != 0:
        return None
    return Accepted(xs, ff, tokens, acc_u, ratios)


def draw_small(
    P: np.ndarray,
    p_start: np.ndarray | None,
    Q: np.ndarray | None,
    q_start: np.ndarray | None,
    xs: np.ndarray,
    sp: np.ndarray,
    residual: np.ndarray,
    u: np.ndarray,
    V: int,
) -> np.ndarray | None:
    """The one-level draw (V <= 256, ``validate=False``) in one compiled loop; None to hand back.

    Row b draws at position ``sp[b]`` from the residual where ``residual[b]`` (Q None: p
    without the drafted token ``xs[b, sp[b]]``), else from p. None when a row needs a guard
    (then ``specviz.verifiers._sample._draw_one_block`` runs, and raises or draws the same).
    """
    B = int(sp.shape[0])
    rows = np.arange(B)
    prow, ppos = _row_origins(P, p_start, rows)
    has_q = Q is not None
    Pb = _base(P)
    qrow, qpos, Qb = (*_row_origins(Q, q_start, rows), _base(Q)) if Q is not None else (prow, ppos, Pb)
    out = np.empty(B, dtype=np.int64)
    ok = _call(
        "draw_small", Pb, prow, ppos, Qb, qrow, qpos, has_q, np.ascontiguousarray(xs, dtype=np.int64),
        np.ascontiguousarray(sp, dtype=np.int64), np.ascontiguousarray(residual, dtype=np.bool_),
        np.ascontiguousarray(u, dtype=np.float64), int(V), out,
    )  # fmt: skip
    return out if ok is not _FAILED and ok else None


def _loops() -> Any:
    """:mod:`specviz.verifiers._fused_kernel` (imported once: it imports Numba), or False.

    False, silently, when Numba is not installed. Importing fails otherwise when Numba finds no
    writable cache directory (``cannot cache function ...: no locator available``: a read-only
    installation and no writable home, or ``NUMBA_CACHE_DIR`` somewhere unwritable): then the
    loops are compiled in memory instead (each process compiles them again, about a second), with
    a warning. Any other failure: a warning and False (the NumPy code, same tokens).
    """
    global _kernels
    if _kernels is None:
        _kernels = _import_loops()
    return _kernels


# --- when the compiled loops cannot be loaded: warn once and run the NumPy code -----------------------
# A corrupted cache file (a truncated or overwritten .nbi/.nbc), an unwritable cache or a failed
# compile must not fail specviz.verify: the NumPy code computes the same tokens. The choice to
# degrade rather than raise is deliberate (issue 21); the warning says what failed and where.

_FAILED = object()  # what _call returns when the compiled loop could not run
_note: str | None = None  # the warning given, if any (the Batch page shows it)
CACHE_DIR_ENV = "NUMBA_CACHE_DIR"


class CompiledLoopsWarning(RuntimeWarning):
    """The compiled loops could not be loaded or cached: the NumPy code runs instead (same tokens)."""


def note() -> str | None:
    """The warning about the compiled loops this process gave (cache or load trouble), or None."""
    return _note


_warned: set[bool] = set()  # which kinds were told: the loops still run (True), or no longer (False)


def _warn(message: str, still_compiled: bool = False) -> None:
    """Warn once per process for each kind: the cache is not used, or the loops are off."""
    global _note
    if still_compiled not in _warned:
        _warned.add(still_compiled)
        warnings.warn(message, CompiledLoopsWarning, stacklevel=4)
        _note = message


def _call(name: str, *args: Any) -> Any:
    """Compiled loop ``name`` on ``args``; :data:`_FAILED` (and the NumPy code from then on) when it
    cannot be loaded or compiled. The loops raise nothing themselves (bad rows hand back by status),
    so an exception here is Numba's: loading, compiling or saving the cache."""
    global _kernels
    loop = getattr(_loops(), name)
    try:
        return loop(*args)
    except Exception as e:  # noqa: BLE001 - any failure of Numba's, see above
        where = getattr(getattr(loop, "_cache", None), "_cache_path", None)  # Numba's cache directory
        at = f" (cache directory {where}: delete its _fused_kernel files to compile them again)" if where else ""
        _kernels = False
        _warn(f"specviz: the compiled loop {name} could not be loaded or compiled{at}: {type(e).__name__}: {e}. "
              "Running NumPy's code instead (same tokens, slower).")  # fmt: skip
        return _FAILED


def _import_loops() -> Any:
    try:
        import numba  # noqa: F401
    except ModuleNotFoundError as e:
        if e.name == "numba":
            return False  # not installed: the NumPy code, no warning
        _warn(f"specviz: Numba could not be imported ({e}); running NumPy's code instead (same tokens).")
        return False
    except Exception as e:  # noqa: BLE001 - a broken installation (say, a NumPy it does not support)
        _warn(f"specviz: Numba could not be imported ({type(e).__name__}: {e}); running NumPy's code instead.")
        return False
    bad_dir = _cache_dir_problem()
    try:
        from . import _fused_kernel as loops
    except Exception as first:  # noqa: BLE001 - no writable cache directory, or worse
        try:
            loops = _compile_in_memory()
        except Exception as e:  # noqa: BLE001
            _warn(f"specviz: the compiled loops could not be loaded ({type(first).__name__}: {first}) "
                  f"nor compiled in memory ({type(e).__name__}: {e}); the NumPy code runs (same tokens).")  # fmt: skip
            return False
        _warn(f"specviz: Numba has no writable cache directory ({bad_dir or first}); the compiled loops are "
              f"compiled in memory, again in each process (about a second). Set {CACHE_DIR_ENV} to a writable "
              "directory to keep them.", still_compiled=True)  # fmt: skip
        return loops
    if bad_dir:
        _warn(f"specviz: {bad_dir}; Numba caches the compiled loops in {_cache_path(loops)} instead.", True)
    return loops


def _cache_dir_problem() -> str | None:
    """What is wrong with ``NUMBA_CACHE_DIR`` (Numba skips an unusable one without a word), or None."""
    path = os.environ.get(CACHE_DIR_ENV)
    if not path:
        return None
    try:  # what Numba tries: create the directory and a file in it
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError as e:
        return f"{CACHE_DIR_ENV}={path!r} is not a writable directory ({type(e).__name__}: {e.strerror or e})"
    return None


def _cache_path(loops: Any) -> str:
    return str(getattr(getattr(loops.accept, "_cache", None), "_cache_path", "Numba's default place"))


def _compile_in_memory() -> Any:
    """A fresh copy of the loops' module whose decorators say cache=False (``ON_DISK = False``)."""
    spec = importlib.util.find_spec(f"{__package__}._fused_kernel")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    module.ON_DISK = False  # type: ignore[attr-defined]
    sys.modules[spec.name] = module  # Numba looks the module up by name while it compiles
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(spec.name, None)
        raise
    return module
