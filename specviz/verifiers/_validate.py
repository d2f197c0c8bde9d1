"""Input checks shared by every verifier entry point.

Every failure raises :class:`specviz.errors.InputError` naming the argument, what was
expected and what was got. The checks only look at entries the verifier will read:
positions past ``num_draft[b]`` are documented as ignored, so they may hold anything.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError, digits
from ._xp import check_dense

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
            f"a row summing to {digits(ops.scalar(sums.reshape(-1)[worst]))}",
        )


def check_uniforms(name: str, u: Any, ops: Any) -> None:
    if _size(u) == 0:
        return
    if not ops.isfinite_all(u):
        raise InputError(name, "uniforms in [0, 1)", "NaN or infinite entries")
    lo, hi = ops.scalar(u.min()), ops.scalar(u.max())
    if lo < 0 or hi >= 1:
        raise InputError(name, "uniforms in [0, 1)", f"range [{digits(lo)}, {digits(hi)}]")


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
        raise InputError(name, "probabilities at most 1", f"{digits(hi)} at a drafted token")


def greedy_rows(ops: Any, T: Any, best: Any, j: Any) -> None:
    """``T`` (B, K+1, V) with argmax ``best`` (B, K+1): every row verify_greedy may read
    (positions 0 .. num_draft[b]) has an entry above -inf.

    The argmax of a row of all -inf is token 0, which greedy decoding would then emit as if it
    were the model's choice. The argmax's own value tells: -inf only when the whole row is.
    """
    B, P = int(best.shape[0]), int(best.shape[1])  # P = K + 1
    if not B:
        return
    top = T[ops.arange(B)[:, None], ops.arange(P)[None, :], best]  # (B, K+1) each row's maximum
    dead = (top == float("-inf")) & (ops.arange(P)[None, :] <= j[:, None])
    if bool(dead.any()):
        b, i = divmod(int(ops.nonzero(dead.reshape(-1))[0]), P)
        raise InputError(
            "target", "a finite logit in each row read (positions 0 .. num_draft)",
            f"a row of all -inf at row {b}, position {i}",
        )  # fmt: skip


# --- the inputs every padded entry point shares (verify, verify_greedy, block, tree) -----------


def padded_inputs(
    ops: Any, target: Any, draft_tokens: Any, num_draft: Any, target_name: str
) -> tuple[Any, Any, Any, Any]:
    """The checks every padded entry point shares.

    Returns target (B, K+1, V), draft tokens (B, K) and num_draft (B,) as int64, and the
    (B, K) mask of positions below num_draft.
    """
    T = as_array(ops, target, target_name)
    x = as_array(ops, draft_tokens, "draft_tokens")
    j = as_array(ops, num_draft, "num_draft")
    check_ndim("draft_tokens", x, 2, "(B, K)")
    B, K = int(x.shape[0]), int(x.shape[1])
    check_ndim(target_name, T, 3, "(B, K+1, V)")
    V = int(T.shape[2])
    check_shape(target_name, T, (B, K + 1, V), "(B, K+1, V) from draft_tokens (B, K)")
    check_shape("num_draft", j, (B,), "(B,)")
    if V < 1:
        raise InputError(target_name, "a vocabulary of at least 1 token", "V = 0")
    check_integer("draft_tokens", x, ops)
    check_integer("num_draft", j, ops)
    x, j = ops.to_int64(x), ops.to_int64(j)
    check_range("num_draft", j, 0, K, ops, "draft counts")
    valid = ops.arange(K)[None, :] < j[:, None]  # (B, K)
    return T, x, j, valid


def as_array(ops: Any, x: Any, name: str) -> Any:
    """``x`` as an array of the inputs' kind and device, or an InputError naming ``name``."""
    check_dense(x, name)
    try:
        return ops.asarray(x)
    except (ValueError, TypeError, RuntimeError) as e:  # ragged lists, strings, a CUDA tensor for NumPy
        raise InputError(name, "an array (or nested list) of numbers", f"{type(x).__name__}: {e}") from e


def draft_table(ops: Any, target: Any, draft_probs: Any, shape: tuple[int, int, int]) -> Any:
    """The (B, K, V) draft table beside a checked padded target, or None (a deterministic drafter).

    The order of the checks is the engine's and the reference's alike: q's shape, p's dtype, q's dtype.
    """
    Q = None if draft_probs is None else as_array(ops, draft_probs, "draft_probs")
    if Q is not None:
        check_shape("draft_probs", Q, shape, "(B, K, V)")
    check_float("target_probs", target, ops)
    if Q is not None:
        check_float("draft_probs", Q, ops)
    return Q


def get_uniforms(
    ops: Any,
    rng: Any,
    uniforms: Any,
    accept_shape: tuple[int, ...],
    B: int,
    validate: bool,
    accept_names: str | None = None,
) -> tuple[Any, Any]:
    """The accept uniforms (accept_shape, named ``accept_names`` in errors; default (B, K) or (N,))
    and sample uniforms (B,), as float64."""
    if uniforms is None:
        return ops.uniforms(rng, accept_shape), ops.uniforms(rng, (B,))
    if rng is not None:
        raise InputError("uniforms", "either rng or uniforms, not both", "both")
    if not isinstance(uniforms, tuple) or len(uniforms) != 2:
        raise InputError("uniforms", "a Uniforms(accept, sample) pair", type(uniforms).__name__)
    try:
        ua, us = ops.to_float64(uniforms[0]), ops.to_float64(uniforms[1])
    except (ValueError, TypeError, RuntimeError) as e:
        raise InputError("uniforms", "two arrays of numbers in [0, 1)", f"{type(e).__name__}: {e}") from e
    names = accept_names or ("(B, K)" if len(accept_shape) == 2 else "(N,)")
    check_shape("uniforms.accept", ua, accept_shape, names)
    check_shape("uniforms.sample", us, (B,), "(B,)")
    if validate:
        check_uniforms("uniforms.accept", ua, ops)
        check_uniforms("uniforms.sample", us, ops)
    return ua, us
