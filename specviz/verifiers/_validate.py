"""Input checks shared by every verifier entry point.

Every failure raises :class:`specviz.errors.InputError` naming the argument, what was
expected and what was got. The checks only look at entries the verifier will read:
positions past ``num_draft[b]`` are documented as ignored, so they may hold anything.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError

# |sum(row) - 1| allowed for a probability row. Loose enough for a float32 softmax over a
# 128k vocabulary (rounding error ~1e-5), tight enough to catch an unnormalized row or logits.
SUM_ATOL = 1e-4
# Half-precision rows carry ~3 significant digits.
SUM_ATOL_HALF = 1e-2


def _size(x: Any) -> int:
    return int(x.numel()) if hasattr(x, "numel") else int(x.size)


def shape_str(x: Any) -> str:
    return str(tuple(int(s) for s in x.shape))


def check_ndim(name: str, x: Any, ndim: int, names: str) -> None:
    if x.ndim != ndim:
        raise InputError(name, f"{ndim} dimensions {names}", f"shape {shape_str(x)}")


def check_shape(name: str, x: Any, expected: tuple[int, ...], names: str) -> None:
    if tuple(int(s) for s in x.shape) != tuple(expected):
        raise InputError(name, f"shape {names} = {tuple(expected)}", f"shape {shape_str(x)}")


def check_integer(name: str, x: Any, ops: Any) -> None:
    if not ops.is_integer(x):
        raise InputError(name, "an integer array", f"dtype {x.dtype}")


def check_float(name: str, x: Any, ops: Any) -> None:
    if not ops.is_float(x):
        raise InputError(name, "a floating-point array of probabilities", f"dtype {x.dtype}")


def check_range(name: str, x: Any, low: int, high: int, ops: Any, what: str) -> None:
    """Every entry of integer array ``x`` in [low, high]."""
    if _size(x):
        lo, hi = ops.scalar(x.min()), ops.scalar(x.max())
        if lo < low or hi > high:
            bad = lo if lo < low else hi
            raise InputError(name, f"{what} in [{low}, {high}]", f"{int(bad)}")


def sum_atol(x: Any) -> float:
    return SUM_ATOL_HALF if str(x.dtype).endswith(("float16", "bfloat16")) else SUM_ATOL


def check_prob_rows(name: str, rows: Any, ops: Any) -> None:
    """``rows`` (..., V): finite, non-negative, each summing to 1 within :data:`SUM_ATOL`.

    Two passes over the data: the float64 row sums (which are NaN or infinite exactly when a
    row holds a NaN or an infinity) and the minimum.
    """
    if _size(rows) == 0:
        return
    sums = ops.row_sums64(rows)  # (...,) float64
    if not ops.isfinite_all(sums):
        raise InputError(name, "finite probabilities", "NaN or infinite entries")
    lo = ops.scalar(rows.min())
    if lo < 0:
        raise InputError(name, "non-negative probabilities", f"minimum {lo:.6g}")
    err = abs(sums - 1.0).reshape(-1)
    worst = int(err.argmax())
    tol = sum_atol(rows)
    if ops.scalar(err[worst]) > tol:
        raise InputError(
            name,
            f"rows summing to 1 (tolerance {tol:g}); pass probabilities, not logits",
            f"a row summing to {ops.scalar(sums.reshape(-1)[worst]):.6g}",
        )


def check_uniforms(name: str, u: Any, ops: Any) -> None:
    if _size(u) == 0:
        return
    if not ops.isfinite_all(u):
        raise InputError(name, "uniforms in [0, 1)", "NaN or infinite entries")
    lo, hi = ops.scalar(u.min()), ops.scalar(u.max())
    if lo < 0 or hi >= 1:
        raise InputError(name, "uniforms in [0, 1)", f"range [{lo:.6g}, {hi:.6g}]")


def check_probes(name: str, values: Any, ops: Any) -> None:
    """Probabilities read one at a time (p(x), q(x) at draft positions): finite, in [0, 1]."""
    if _size(values) == 0:
        return
    if not ops.isfinite_all(values):
        raise InputError(name, "finite probabilities", "NaN or infinite entries")
    lo, hi = ops.scalar(values.min()), ops.scalar(values.max())
    if lo < 0:
        raise InputError(name, "non-negative probabilities", f"minimum {lo:.6g}")
    if hi > 1:
        raise InputError(name, "probabilities at most 1", f"{hi:.6g} at a drafted token")
