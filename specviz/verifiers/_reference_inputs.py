"""What turns a reference verifier's arguments into checked NumPy arrays, and its refusals into InputErrors.

# B rows, K drafts (padded width), V vocabulary, N total drafts (flat layout)

The checks are the engine's (:mod:`specviz.verifiers._validate`), so a bad argument gets the same
:class:`~specviz.errors.InputError` from :mod:`specviz.verifiers.reference` as from the engine.
Torch tensors become NumPy arrays (half precision as float32, which holds bfloat16 and float16
exactly and is what the engine computes them in), and results go back as torch CPU tensors.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ..errors import InputError, digits
from . import _validate as check
from ._xp import NumpyOps, TorchDraws, is_torch
from .layout import flat_to_padded

GRID = 2.0**48  # as specviz.verifiers._sample.GRID
NP = NumpyOps()


def check_rows(name: str, rows: np.ndarray, tol: float) -> None:
    """validate=True: each full row read is finite, non-negative and sums to 1 on the grid within tol."""
    if not rows.size:
        return
    if not np.isfinite(rows).all():
        raise InputError(name, "finite probabilities", "NaN or infinite entries")
    if rows.min() < 0:
        raise InputError(name, "non-negative probabilities", f"minimum {float(rows.min()):.6g}")
    sums = np.floor(rows * rows.dtype.type(GRID)).astype(np.float64).sum(axis=1) / GRID  # (R,) exact, as every path
    worst = int(np.argmax(np.abs(sums - 1.0)))
    if abs(sums[worst] - 1.0) > tol:
        raise InputError(name, f"rows summing to 1 (tolerance {tol:g}); pass probabilities, not logits",
                         f"a row summing to {digits(sums[worst])}")  # fmt: skip


def name_refusal(p: np.ndarray, q: np.ndarray | None) -> None:
    """Raise the InputError of a refused draw, naming the argument that holds the bad entry: p (R, V)
    the target rows drawn at, q the draft rows of the residual ones (or None)."""
    if not np.isfinite(p).all():
        raise InputError("target_probs", "finite probabilities", "NaN or infinite entries")
    if p.size and p.min() < 0:
        raise InputError("target_probs", "non-negative probabilities", f"minimum {float(p.min()):.6g}")
    if q is not None and not np.isfinite(q).all():
        raise InputError("draft_probs", "finite probabilities", "NaN or infinite entries")
    raise InputError("target_probs", "probability rows (each summing to less than 16)",
                     "a row whose weights sum to 16 or more")  # fmt: skip



def to_numpy(a: Any) -> Any:
    """A torch tensor as a NumPy array (half precision as float32, exactly); anything else as given."""
    if not is_torch(a):
        return a
    t = sys.modules["torch"]
    a = a.detach().cpu().resolve_conj().resolve_neg()
    if a.dtype in (t.float16, t.bfloat16):
        a = a.float()
    return a.numpy()


def back(res: Any, torch_in: bool) -> Any:
    """Results as torch CPU tensors when the inputs were torch tensors."""
    if not torch_in:
        return res
    from_numpy = sys.modules["torch"].from_numpy
    return type(res)._make([from_numpy(np.ascontiguousarray(f)) for f in res])


def tolerances(target: Any, draft: Any) -> tuple[float, float]:
    """The row-sum tolerances of the inputs as given (1e-2 for half precision, else 1e-4)."""
    tq = check.sum_atol(draft) if draft is not None and hasattr(draft, "dtype") else check.SUM_ATOL
    return check.sum_atol(target) if hasattr(target, "dtype") else check.SUM_ATOL, tq


def engine_rng(rng: Any, torch_in: bool, target: Any, uniforms: Any) -> Any:
    """A torch generator (or None) with torch inputs draws the engine's torch uniforms."""
    if uniforms is not None or not torch_in or isinstance(rng, np.random.Generator):
        return rng
    return TorchDraws(rng, target.device)


def chain_inputs(target_probs: Any, draft_probs: Any, draft_tokens: Any, num_draft: Any, rng: Any,
                  uniforms: Any, validate: bool) -> tuple:  # fmt: skip
    """The engine's checks for the padded layout; NumPy arrays and the uniforms."""
    tol = tolerances(target_probs, draft_probs)
    torch_in = is_torch(target_probs)
    r = engine_rng(rng, torch_in, target_probs, uniforms)
    if uniforms is not None and isinstance(uniforms, tuple):
        uniforms = tuple(to_numpy(u) for u in uniforms)
    P, x, j, _ = check.padded_inputs(NP, to_numpy(target_probs), to_numpy(draft_tokens), to_numpy(num_draft),
                                     "target_probs")  # fmt: skip
    B, K, V = x.shape[0], x.shape[1], P.shape[2]
    Q = check.draft_table(NP, P, None if draft_probs is None else to_numpy(draft_probs), (B, K, V))
    ua, us = check.get_uniforms(NP, r, uniforms, (B, K), B, validate)
    return P, Q, x, j, ua, us, tol, torch_in




def flat_inputs(target_probs: Any, draft_probs: Any, draft_tokens: Any, draft_indptr: Any, rng: Any,
                uniforms: Any, validate: bool) -> tuple:  # fmt: skip
    """The engine's checks for the flat layout, then the padded layout (specviz.verifiers.layout),
    the accept uniforms (N,) moved to their (B, K) places."""
    tol = tolerances(target_probs, draft_probs)
    torch_in = is_torch(target_probs)
    r = engine_rng(rng, torch_in, target_probs, uniforms)
    T = check.as_array(NP, to_numpy(target_probs), "target_probs")
    xf = check.as_array(NP, to_numpy(draft_tokens), "draft_tokens")
    ind = check.as_array(NP, to_numpy(draft_indptr), "draft_indptr")
    D = None if draft_probs is None else check.as_array(NP, to_numpy(draft_probs), "draft_probs")
    check.check_ndim("draft_tokens", xf, 1, "(N,)")
    check.check_ndim("draft_indptr", ind, 1, "(B+1,)")
    check.check_integer("draft_tokens", xf, NP)
    check.check_integer("draft_indptr", ind, NP)
    check.check_ndim("target_probs", T, 2, "(N+B, V)")
    N, B = xf.shape[0], ind.shape[0] - 1
    if D is not None:
        check.check_shape("draft_probs", D, (N, T.shape[1]), "(N, V)")
    check.check_range("draft_tokens", xf, 0, T.shape[1] - 1, NP, "token ids")
    if uniforms is not None and isinstance(uniforms, tuple):
        uniforms = tuple(to_numpy(u) for u in uniforms)
    ua_flat, us = check.get_uniforms(NP, r, uniforms, (N,), max(B, 0), validate)
    P, Q, x, j = flat_to_padded(T, D, xf, ind)
    valid = np.arange(x.shape[1])[None, :] < j[:, None]  # (B, K)
    ua = np.zeros(x.shape)
    ua[valid] = ua_flat  # row-major order is the flat order
    return P, Q, x, j, ua, us, tol, torch_in
