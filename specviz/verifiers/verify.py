"""The lossless speculative-sampling verifier, batched and ragged, for NumPy and PyTorch.

# B rows, K drafts (padded width), V vocabulary, N total drafts (flat layout)

The rule (docs/design.md, "1. The algorithm contract"), for a row with ``j = num_draft[b]`` drafts
x_0 .. x_{j-1}, target rows p_0 .. p_j and draft rows q_0 .. q_{j-1}:

1. Position i draws a fresh uniform u_i and accepts x_i iff ``u_i * q_i(x_i) < p_i(x_i)``,
   i.e. with probability min(1, p_i(x_i) / q_i(x_i)), with no division. A draft the drafter
   says it could not have drawn (q_i(x_i) = 0) is rejected.
2. The first rejection ends the row: later coins never count, because their contexts were
   built on a token that is now discarded.
3. At the rejected position i, one token is drawn from the residual
   ``max(0, p_i - q_i) / sum(max(0, p_i - q_i))``; if that mass is exactly 0 (p == q up to
   rounding, unreachable in exact arithmetic) from p_i instead.
4. If all j drafts survive, a bonus token is drawn from p_j: the target row at position j,
   which for a ragged row is not the last row of the padded tensor.

Why the output is exactly p at every position: the token x is emitted at a position either
by acceptance, with probability q(x) * min(1, p(x)/q(x)) = min(p(x), q(x)), or by
replacement, with probability (1 - a) * r(x), where a = sum_x min(p(x), q(x)) is the
acceptance rate and r = max(0, p - q) / sum max(0, p - q). Since
sum max(0, p - q) = 1 - sum min(p, q) = 1 - a (both are the total-variation distance),
(1 - a) * r(x) = max(0, p(x) - q(x)), and min(p, q) + max(0, p - q) = p. The next position
is only reached after acceptance, conditioned on the accepted token, so the same argument
applies to every conditional in turn and the whole emitted sequence follows the target.

The replacement or bonus token is drawn by inverse CDF from one uniform, on weights floored to
multiples of 2^-48 and summed exactly, so every backend returns identical tokens
(:mod:`specviz.verifiers._sample` says how, and what the floor costs).

Randomness: with ``rng`` the uniforms are drawn in a fixed order over the whole layout
(``accept`` of shape (B, K) for the padded layout, (N,) for the flat one, then ``sample``), so
the draws a row gets depend on the batch around it, its padded width K and the layout. Each
row's result depends only on its own explicit uniforms: for per-request reproducibility pass
``uniforms``.

This module runs only the rule. Its plain statement is :mod:`specviz.verifiers.reference`, which
every path here must equal token for token (tests/test_reference_parity.py); the classic
mistakes are that reference with one step swapped (:mod:`specviz.proof.bugs`), never a switch here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .._types import Array
from ..errors import InputError
from . import _fused, _sample
from . import _validate as check
from ._fused import Accepted
from ._xp import NumpyOps, TorchDraws, TorchOps, accepts, is_torch, ops_for

PAD_TOKEN = -1  # outputs are padded to K + 1 tokens per row


class Uniforms(NamedTuple):
    """Explicit randomness for one call; with it the verifier is a pure function.

    ``accept``: (B, K) one uniform per draft position (flat layout: (N,)).
    ``sample``: (B,) one uniform per row for the replacement or bonus draw.
    All in [0, 1).
    """

    accept: Array
    sample: Array


class Verification(NamedTuple):
    """Result of verifying a batch. Arrays are of the input's kind, on its device.

    ``tokens``: (B, K+1) int64, the emitted tokens, padded with -1.
    ``num_tokens``: (B,) int64, tokens emitted (accepted + 1 for the replacement or bonus).
    ``num_accepted``: (B,) int64, drafts accepted.
    ``accept_uniforms``: (B, K) float64, the coin u at each tested position, NaN elsewhere.
    ``ratios``: (B, K) float64, p(x)/q(x) at each tested position (NaN where q(x) = 0 or
    untested); acceptance happened iff u * q(x) < p(x), i.e. u < ratio up to the last bit.
    ``bonus``: (B,) bool, True where every draft survived and the last token is the bonus.
    ``sample_uniforms``: (B,) float64, the uniform of the replacement or bonus draw.
    """

    tokens: Array
    num_tokens: Array
    num_accepted: Array
    accept_uniforms: Array
    ratios: Array
    bonus: Array
    sample_uniforms: Array


class _Rows(NamedTuple):
    """Where row b's position i lives: ``table[b, i]`` (padded) or ``table[start[b] + i]``."""

    table: Array  # padded (B, P, V) or flat (R, V)
    start: Array | None  # flat: (B,) first table row of each batch row

    def cols(self, b: Array, pos: Array, cols: slice, ops: NumpyOps | TorchOps) -> Array:
        """(R, C) copy of rows (b, pos) restricted to a column slice."""
        if self.start is not None:
            return ops.select_rows(self.table, self.start[b] + pos, cols)
        if ops.is_contiguous(self.table):  # a free (B*P, V) view: one row-select per chunk
            P = int(self.table.shape[1])
            return ops.select_rows(self.table.reshape(-1, self.table.shape[2]), b * P + pos, cols)
        return self.table[b, pos, cols]  # e.g. broadcast inputs: index without copying them

    def row(self, b: int, pos: int) -> Array:
        """(V,) a view of one row, no copy."""
        return self.table[b, pos] if self.start is None else self.table[int(self.start[b]) + pos]

    def at(self, b: Array, pos: Array, cols: Array | None = None, ops: NumpyOps | TorchOps | None = None) -> Array:
        """Rows (b, pos) (broadcast together), or their entries at ``cols``: a copy.

        With ``ops`` and a contiguous table, one gather by flat index: NumPy's and torch's
        multi-array indexing cost several times more at B = 16384, K = 3, V = 4.
        """
        T = self.table
        if self.start is None:
            if ops is not None and cols is not None and ops.name == "numpy" and T.strides[:2] == (0, 0) and T.size:
                # One row broadcast to every (b, pos) (the lab's context-free inputs): its
                # entries are a 1-D take, not a three-index gather over a stride-0 view.
                shape = np.broadcast_shapes(np.shape(b), np.shape(pos), np.shape(cols))
                return T[0, 0].take(np.broadcast_to(cols, shape))
            if ops is None or not ops.is_contiguous(T):
                return T[b, pos] if cols is None else T[b, pos, cols]
            rows = b * int(T.shape[1]) + pos
        else:
            # Positions past a row's count are gathered then ignored; keep them inside the table.
            rows = (self.start[b] + pos).clip(0, max(int(T.shape[0]) - 1, 0))
            if ops is None or not ops.is_contiguous(T):
                return T[rows] if cols is None else T[rows, cols]
        V = int(T.shape[-1])
        if cols is None:
            return ops.take_rows(T.reshape(-1, V), rows)
        return ops.take_flat(T.reshape(-1), rows * V + cols)


def verify(
    target_probs: Array,
    draft_probs: Array | None,
    draft_tokens: Array,
    num_draft: Array,
    *,
    rng: Any = None,
    uniforms: Uniforms | tuple[Array, Array] | None = None,
    validate: bool = True,
) -> Verification:
    """Verify a padded batch of drafts; the output follows the target exactly.

    Parameters
    ----------
    target_probs
        Shape (B, K+1, V). Row b tests its drafts against positions 0..num_draft[b]-1 and
        takes its bonus from position num_draft[b]; later positions are ignored.
    draft_probs
        Shape (B, K, V): the distribution each draft token was sampled from (after the
        drafter's own temperature/top-p). ``None`` for a deterministic drafter: q is one-hot
        on the drafted token, so x is accepted with probability p(x) and the residual is p
        with x removed; lossless whatever rule chose the drafts.
    draft_tokens
        Shape (B, K) integers in [0, V) at positions < num_draft[b], checked whatever
        ``validate`` says (an id outside would be read as another token's column and could be
        accepted); entries at positions >= num_draft[b] are ignored (may be -1).
    num_draft
        Shape (B,) integers in [0, K].
    rng
        ``numpy.random.Generator`` for NumPy inputs, ``torch.Generator`` for torch inputs;
        default a fresh unseeded one. Draws ``accept`` (B, K) first, then ``sample`` (B,), so
        a row's draws depend on the batch, its padded width and the layout (flat or padded):
        pass ``uniforms`` when a request must be reproducible on its own.
    uniforms
        Explicit :class:`Uniforms` (or an ``(accept, sample)`` pair) instead of ``rng``. A row's
        result depends only on its own uniforms, whatever batch it is in.
    validate
        Check the probabilities the call reads, as it reads them: p(x) and q(x) at every draft
        position below num_draft (finite, in [0, 1]), and each full row the draw reads (the
        target row it samples from and, after a rejection, the draft row of the residual):
        finite, non-negative, summing to 1 within 1e-4 (1e-2 for half precision). Rows that
        are never read in full are not summed, and which ones are read depends on the coins.
        About 1.1-1.2x the time of ``False`` at V = 128256 with the compiled loops (Numba,
        the ``fast`` extra), 1.3-1.4x with NumPy's passes (benchmarks/bench_verify.py).
        Shapes, dtypes, draft ids and the uniforms' shapes are checked either way, and so is
        every row the draw reads for what would make the result depend on the library (NaN,
        infinity, a negative entry of a row drawn from p, a row summing to 16 or more):
        ``False`` only skips the probability checks.

    Returns
    -------
    Verification
        Of the same kind (NumPy or torch) and on the same device as ``target_probs``.
    """
    return _dispatch(_padded, target_probs, draft_probs, draft_tokens, num_draft, rng, uniforms, validate)


def _padded(target_probs: Array, draft_probs: Array | None, draft_tokens: Array, num_draft: Array, rng: Any,
            uniforms: Any, validate: bool, compiled: bool) -> Verification:  # fmt: skip
    """:func:`verify` on one backend, chosen by :func:`_dispatch`."""
    ops = ops_for(target_probs)
    P, x, j, valid = check.padded_inputs(ops, target_probs, draft_tokens, num_draft, "target_probs")
    B, K, V = int(x.shape[0]), int(x.shape[1]), int(P.shape[2])
    Q = check.draft_table(ops, P, draft_probs, (B, K, V))
    ua, us = check.get_uniforms(ops, rng, uniforms, (B, K), B, validate)
    what = "token ids at positions < num_draft"
    Q_rows = None if Q is None else _Rows(Q, None)
    return _core(ops, _Rows(P, None), Q_rows, x, j, K, V, ua, us, validate, what, compiled)


def verify_flat(
    target_probs: Array,
    draft_probs: Array | None,
    draft_tokens: Array,
    draft_indptr: Array,
    *,
    rng: Any = None,
    uniforms: Uniforms | tuple[Array, Array] | None = None,
    validate: bool = True,
) -> Verification:
    """Verify drafts in the flat ragged layout used by serving engines.

    The layout: row b owns drafts ``draft_tokens[draft_indptr[b]:draft_indptr[b+1]]``
    (K_b = draft_indptr[b+1] - draft_indptr[b] of them), their draft rows at the same
    indices of ``draft_probs``, and K_b + 1 contiguous target rows starting at
    ``draft_indptr[b] + b`` (one more per row for the bonus position).

    Parameters
    ----------
    target_probs
        Shape (N+B, V).
    draft_probs
        Shape (N, V), or ``None`` for a deterministic drafter.
    draft_tokens
        Shape (N,) integers in [0, V), checked whatever ``validate`` says.
    draft_indptr
        Shape (B+1,) non-decreasing integers starting at 0 and ending at N.
    rng, uniforms, validate
        As in :func:`verify`; explicit uniforms are ``accept`` (N,) and ``sample`` (B,). The
        generator draws ``accept`` in the flat order, so the same rows get different draws
        than in the padded layout; explicit uniforms give the same tokens in both.

    Returns
    -------
    Verification
        In the padded output form, with K = max K_b.
    """
    return _dispatch(_flat, target_probs, draft_probs, draft_tokens, draft_indptr, rng, uniforms, validate)


def _flat(target_probs: Array, draft_probs: Array | None, draft_tokens: Array, draft_indptr: Array, rng: Any,
          uniforms: Any, validate: bool, compiled: bool) -> Verification:  # fmt: skip
    """:func:`verify_flat` on one backend, chosen by :func:`_dispatch`."""
    ops = ops_for(target_probs)
    P = check.as_array(ops, target_probs, "target_probs")
    x_flat = check.as_array(ops, draft_tokens, "draft_tokens")
    indptr = check.as_array(ops, draft_indptr, "draft_indptr")
    Q = None if draft_probs is None else check.as_array(ops, draft_probs, "draft_probs")
    check.check_ndim("draft_tokens", x_flat, 1, "(N,)")
    check.check_ndim("draft_indptr", indptr, 1, "(B+1,)")
    check.check_integer("draft_tokens", x_flat, ops)
    check.check_integer("draft_indptr", indptr, ops)
    N, B = int(x_flat.shape[0]), int(indptr.shape[0]) - 1
    if B < 0:
        raise InputError("draft_indptr", "shape (B+1,) with at least one entry", "shape (0,)")
    check.check_ndim("target_probs", P, 2, "(N+B, V)")
    V = int(P.shape[1])
    check.check_shape("target_probs", P, (N + B, V), "(N+B, V)")
    if Q is not None:
        check.check_shape("draft_probs", Q, (N, V), "(N, V)")
    if V < 1:
        raise InputError("target_probs", "a vocabulary of at least 1 token", "V = 0")
    indptr = ops.to_int64(indptr)
    x_flat = ops.to_int64(x_flat)
    if int(indptr[0]) != 0 or int(indptr[-1]) != N:
        raise InputError("draft_indptr", f"first entry 0 and last entry N = {N}",
                         f"{int(indptr[0])} and {int(indptr[-1])}")  # fmt: skip
    j = indptr[1:] - indptr[:-1]  # (B,)
    if B and ops.scalar(j.min()) < 0:
        raise InputError("draft_indptr", "non-decreasing offsets", "a decreasing step")
    K = int(j.max()) if B else 0
    pos = ops.arange(K)
    valid = pos[None, :] < j[:, None]  # (B, K)
    flat_idx = ops.where(valid, indptr[:-1, None] + pos[None, :], 0)  # (B, K) into (N,)
    x = ops.where(valid, x_flat[flat_idx], PAD_TOKEN) if N else ops.full((B, K), PAD_TOKEN, np.int64)
    check.check_float("target_probs", P, ops)
    if Q is not None:
        check.check_float("draft_probs", Q, ops)
    check.check_range("draft_tokens", x_flat, 0, V - 1, ops, "token ids")
    ua_flat, us = check.get_uniforms(ops, rng, uniforms, (N,), B, validate)
    ua = ops.where(valid, ua_flat[flat_idx], 0.0) if N else ops.full((B, K), 0.0, np.float64)
    starts = indptr[:-1]
    P_rows = _Rows(P, starts + ops.arange(B))
    Q_rows = None if Q is None else _Rows(Q, starts)
    return _core(ops, P_rows, Q_rows, x, j, K, V, ua, us, validate, "token ids", compiled)


def verify_greedy(target: Array, draft_tokens: Array, num_draft: Array) -> Verification:
    """Temperature-0 verification: equals plain greedy decoding token for token.

    Accept while the draft equals the target argmax; at the first mismatch emit the argmax;
    if every draft matches, the bonus is the argmax at position num_draft[b]. Ties go to the
    lowest token id.

    Parameters
    ----------
    target
        Shape (B, K+1, V): target probabilities or logits (anything whose argmax is the
        greedy token; -inf allowed, NaN not).
    draft_tokens
        Shape (B, K) integers; entries at positions >= num_draft[b] are ignored.
    num_draft
        Shape (B,) integers in [0, K].

    Returns
    -------
    Verification
        ``ratios`` is 1 where the draft matched the argmax and 0 where it did not;
        the uniform fields are NaN (no randomness is used).
    """
    ops = ops_for(target, "target")
    T, x, j, valid = check.padded_inputs(ops, target, draft_tokens, num_draft, "target")
    B, K, V = int(x.shape[0]), int(x.shape[1]), int(T.shape[2])
    check.check_float("target", T, ops)
    check.check_range("draft_tokens", x[valid], 0, V - 1, ops, "token ids at positions < num_draft")
    pos = ops.arange(K)
    if T.numel() if hasattr(T, "numel") else T.size:
        if bool((T != T).any()):
            raise InputError("target", "probabilities or logits without NaN", "NaN entries")
    best = ops.argmax_last(T)  # (B, K+1)
    check.greedy_rows(ops, T, best, j)  # a row of all -inf has no argmax
    match = (x == best[:, :K]) & valid  # (B, K)
    n = ops.run_length(match)  # (B,)
    ar = ops.arange(B)
    tokens = ops.full((B, K + 1), PAD_TOKEN, np.int64)
    tokens[:, :K] = ops.where(pos[None, :] < n[:, None], x, PAD_TOKEN)
    tokens[ar, n] = best[ar, n]
    tested = valid & (pos[None, :] <= n[:, None])
    nan = ops.full((B, K), float("nan"), np.float64)
    ratios = ops.where(tested, ops.to_float64(match), nan)
    return Verification(
        tokens=tokens,
        num_tokens=n + 1,
        num_accepted=n,
        accept_uniforms=nan,
        ratios=ratios,
        bonus=n == j,
        sample_uniforms=ops.full((B,), float("nan"), np.float64),
    )


def _dispatch(run: Callable[..., Verification], target: Any, draft: Any, tokens: Any, counts: Any, rng: Any,
              uniforms: Any, validate: bool) -> Verification:  # fmt: skip
    """The call's one backend decision, made here and passed down: ``SPECVIZ_BACKEND`` is read once
    (:func:`specviz.verifiers._fused.backend`). NumPy arrays run the NumPy code, with the compiled
    loops unless the switch says ``numpy``; torch tensors run it too where :func:`_numpy_twin` can
    view them, unless the switch says ``torch``, and torch's own kernels otherwise.
    """
    choice = _fused.backend()
    if is_torch(target):
        twin = None if choice == "torch" else _numpy_twin(target, draft, (tokens, counts), rng, uniforms)
        if twin is None:
            return run(target, draft, tokens, counts, rng, uniforms, validate, False)
        return _to_torch(run(*twin.args, twin.rng, twin.uniforms, validate, _fused.compiled(choice)))
    return run(target, draft, tokens, counts, rng, uniforms, validate, _fused.compiled(choice))


def _numpy_viewable(p: Any, q: Any) -> bool:
    """Torch tables NumPy can view without a copy: float32 or float64, and q None or of p's dtype
    (a tensor, or a native-order NumPy array)."""
    t = sys.modules["torch"]
    d = p.dtype
    if d is not t.float32 and d is not t.float64:
        return False
    if q is None or isinstance(q, t.Tensor):
        return q is None or q.dtype is d
    return isinstance(q, np.ndarray) and q.dtype == (np.float32 if d is t.float32 else np.float64)


class _Twin(NamedTuple):
    """A torch call's inputs as the NumPy code takes them."""

    args: list[Any]  # target, draft, draft tokens, counts: NumPy views (or what was not a tensor)
    rng: Any  # TorchDraws drawing as the torch code would, or None with explicit uniforms
    uniforms: Uniforms | None


def _numpy_twin(target: Any, draft: Any, others: tuple, rng: Any, uniforms: Any) -> _Twin | None:
    """Torch CPU float32/float64 inputs as NumPy views, with the rng or uniforms to pass on; else None.

    Torch's per-call cost (~5 us on the CPU, dozens of calls per verification, checks
    included) made the same code slower than NumPy on the same inputs, so such calls run the
    NumPy code from the start, touching torch as little as possible (each tensor's ``numpy()``;
    ``from_numpy`` for the results). Without uniforms, a ``torch.Generator`` (or a fresh one)
    still draws them, wrapped in :class:`~specviz.verifiers._xp.TorchDraws`: the NumPy code
    draws when and as the torch code would (after the input checks; accept, then sample), so
    the tokens, the errors and the generator's state afterwards are the torch code's. Half
    precision (NumPy has no bfloat16; float16 stays with torch's upcasting kernels too), CUDA,
    mixed dtypes and devices, and malformed uniforms (the torch code reports them) keep the torch code.
    """
    tensor = sys.modules["torch"].Tensor
    if not _numpy_viewable(target, draft):
        return None  # half precision or mixed dtypes
    if uniforms is not None and (rng is not None or not (isinstance(uniforms, tuple) and len(uniforms) == 2)):
        return None  # malformed: the checks say so
    items = [target, draft, *others] if uniforms is None else [target, draft, *others, *uniforms]
    try:
        views = [a.numpy() if isinstance(a, tensor) else a for a in items]
    except TypeError:  # a CUDA tensor
        return None
    except RuntimeError:  # requires grad, or a lazily negated or conjugated view
        views = [_as_numpy(a) if isinstance(a, tensor) else a for a in items]
    n = 2 + len(others)
    if uniforms is not None:
        return _Twin(views[:n], None, Uniforms(views[n], views[n + 1]))
    return _Twin(views, TorchDraws(rng, target.device), None)


def _as_numpy(a: Any) -> np.ndarray:
    """A CPU tensor as a NumPy array: a view, or a copy where torch holds a negation or a conjugation
    still to apply (``numpy()`` refuses those, and tensors that require grad)."""
    return a.detach().resolve_conj().resolve_neg().numpy()


def _to_torch(res: Verification) -> Verification:
    from_numpy = sys.modules["torch"].from_numpy
    return Verification._make([from_numpy(f) for f in res])  # the core's outputs are C-contiguous


def _core(
    ops: NumpyOps | TorchOps,
    P: _Rows,
    Q: _Rows | None,
    x: Array,
    j: Array,
    K: int,
    V: int,
    ua: Array,
    us: Array,
    validate: bool,
    what_ids: str,
    compiled: bool,
) -> Verification:
    """The rule on checked shapes. x (B, K) int64, j (B,), ua (B, K), us (B,) float64; ``compiled``:
    the call's choice to run the compiled loops (:func:`_dispatch`).

    Draft ids below num_draft are checked here whatever ``validate`` says: an id outside
    [0, V) would otherwise be read as another token's column (-1 as V - 1) and accepted.
    """
    B = int(j.shape[0])
    ar = ops.arange(B)
    acc = _accept_compiled(ops, P, Q, x, j, K, V, ua, validate) if compiled else None
    if acc is None:
        acc = _accept(ops, P, Q, x, j, K, V, ua, validate, what_ids)
    xs, first_fail, tokens = acc.xs, acc.first_fail, acc.tokens
    rejected = first_fail < j  # (B,) the others draw the bonus
    # Every row draws one more token at its first rejected position (from the residual) or at
    # num_draft[b] (the bonus, from p): both are first_fail.
    token = _sample.draw(ops, P, Q, xs, first_fail, rejected, us, V, validate, compiled)  # (B,)
    tokens[ar, first_fail] = token
    return Verification(
        tokens=tokens,
        num_tokens=first_fail + 1,
        num_accepted=first_fail,
        accept_uniforms=acc.accept_uniforms,
        ratios=acc.ratios,
        bonus=~rejected,
        sample_uniforms=us + 0.0,
    )


def _accept(
    ops: NumpyOps | TorchOps,
    P: _Rows,
    Q: _Rows | None,
    x: Array,
    j: Array,
    K: int,
    V: int,
    ua: Array,
    validate: bool,
    what_ids: str,
) -> Accepted:
    """The accept phase: the draft ids, the first rejection, the kept drafts, the coins and ratios read."""
    B = int(j.shape[0])
    ar = ops.arange(B)
    pos = ops.arange(K)
    valid = ops.prefix_mask(j, K)  # (B, K) positions below num_draft
    xs = ops.where(valid, x, 0)  # (B, K) column indices; 0 where ignored
    check.check_range("draft_tokens", xs, 0, V - 1, ops, what_ids)
    px = P.at(ar[:, None], pos[None, :], xs, ops)  # (B, K) p_i(x_i)
    if Q is None or int(Q.table.shape[0]) == 0:  # no draft rows at all: nothing valid to read
        qx = ops.full((B, K), 1.0, np.float64)
    else:
        qx = Q.at(ar[:, None], pos[None, :], xs, ops)
    if validate:  # the one entry read from each row that is only probed
        check.check_probes("target_probs", px[valid], ops)
        if Q is not None:
            check.check_probes("draft_probs", qx[valid], ops)
    passed = accepts(ua, qx, px) & valid  # (B, K)
    first_fail = ops.run_length(passed)  # (B,) position of the first rejection, or j
    kept = ops.prefix_mask(first_fail, K)  # (B, K) the run before it
    tested = valid & ops.prefix_mask(first_fail, K, inclusive=True)
    tokens = ops.full((B, K + 1), PAD_TOKEN, np.int64)
    tokens[:, :K] = ops.where(kept, x, PAD_TOKEN)
    accept_uniforms = ops.where(tested, ua, float("nan"))
    ratios = ops.ratio_where(ops.to_float64(px), ops.to_float64(qx), tested & (qx > 0))
    return Accepted(xs=xs, first_fail=first_fail, tokens=tokens, accept_uniforms=accept_uniforms, ratios=ratios)


def _accept_compiled(
    ops: NumpyOps | TorchOps,
    P: _Rows,
    Q: _Rows | None,
    x: Array,
    j: Array,
    K: int,
    V: int,
    ua: Array,
    validate: bool,
) -> Accepted | None:
    """:func:`_accept` in one compiled loop (NumPy tables that fit it); None otherwise.

    None too when a draft id or (with ``validate``) a probed probability fails its check: then
    :func:`_accept` runs and raises the error.
    """
    if ops.name != "numpy" or not K:
        return None
    q = Q if Q is not None and int(Q.table.shape[0]) > 0 else None  # an empty draft table: no q
    if not _fused.fits(P.table, None if q is None else q.table):
        return None
    return _fused.accept(
        P.table, P.start, None if q is None else q.table, None if q is None else q.start, x, j, ua, V, validate,
    )  # fmt: skip
