"""Block verification (Sun et al., ICLR 2025), batched and ragged, for NumPy and PyTorch.

# B rows, K drafts (padded width), V vocabulary

The chain verifier (:mod:`specviz.verifiers.verify`) judges each draft on its own and stops at the
first rejection. Block verification judges the block: a draft that looks bad on its own can
still be kept when the drafts before it were better than needed. It keeps at least as many
drafts as the chain in expectation (proved below) and is optimal among lossless verifiers that
see one draft block and only its conditional probabilities (the paper's theorem; not proved
here).

The rule, for a row with ``j = num_draft[b]`` drafts x_1 .. x_j (``draft_tokens[b, i-1]``),
target rows p_0 .. p_j (p_i is the target after x_1 .. x_i) and draft rows q_0 .. q_{j-1}:

- weights: w_0 = 1 and w_i = min(1, w_{i-1} p_{i-1}(x_i) / q_{i-1}(x_i)); a draft the
  drafter says it could not have drawn (q_{i-1}(x_i) = 0) gets w_i = 0, like the chain's
  rejection of it.
- residual masses m_i = sum_x max(0, w_i p_i(x) - q_i(x)) for i < j.
- thresholds h_i = m_i / (m_i + 1 - w_i) for 1 <= i < j (1 when that is 0/0, i.e. w_i = 1 and
  p_i = q_i: see below), and h_j = w_j.
- one fresh uniform eta_i per draft; tau = the largest i with eta_i < h_i, 0 if there is none.
  Every eta is looked at: a later one can rescue the block after an earlier one "failed".
- emit x_1 .. x_tau, then one more token: from p_j (the bonus) if tau = j, otherwise from the
  residual max(0, w_tau p_tau - q_tau) / m_tau (from p_tau if m_tau is 0, which only rounding
  can reach; at tau = 0 this is the chain's residual, since w_0 = 1).

The paper compares eta_i <= h_i; the strict test differs on a set of uniforms of measure zero
and makes h = 0 never and h = 1 always pass, as the chain's ``u * q < p`` does.

Why the output follows the target. Write P(x^i) = p_0(x_1) ... p_{i-1}(x_i) and
Q(x^i) = q_0(x_1) ... q_{i-1}(x_i) for the probability of a prefix under target and drafter.

(1) The chance of keeping at least i drafts. Given the first i drafts x^i,
Pr[tau >= i | x^i] = w_i. By induction from i = j down: at i = j, tau >= j iff eta_j < w_j.
For i < j, tau >= i fails iff eta_i fails and no later eta passes (tau < i + 1); eta_i is
independent of everything after it, so Pr[tau < i | x^i] = (1 - h_i) (1 - E[w_{i+1} | x^i]) by
the induction hypothesis. Now
E[w_{i+1} | x^i] = sum_x q_i(x) min(1, w_i p_i(x) / q_i(x)) = sum_x min(q_i(x), w_i p_i(x))
= w_i - m_i (min(a, b) = b - max(0, b - a), summed; tokens with q_i(x) = 0 add 0 on both sides).
With 1 - h_i = (1 - w_i) / (m_i + 1 - w_i) the product is 1 - w_i. In the 0/0 case
(w_i = 1, m_i = 0) the second factor 1 - E[w_{i+1} | x^i] = 1 - w_i + m_i is 0, so any h_i
would do. (Drafts with q = 0 are never drawn, so their convention w = 0 does not enter.)

(2) The chance of stopping at exactly i with prefix x^i, from (1):
Pr[X^i = x^i, tau = i] = Q(x^i) (w_i - E[w_{i+1} | x^i]) = Q(x^i) m_i for i < j, and Q(x^j) w_j
for i = j. So the round emits x^i followed by y with probability
Q(x^i) max(0, w_i p_i(y) - q_i(y)) for i < j, and Q(x^j) w_j p_j(y) for i = j.

(3) Telescoping. Let the round's output (i + 1 tokens) be continued by sampling from the
target; it suffices that every sequence z of j + 1 tokens has probability P(z). With
rho_i = Q(z^i) w_i / P(z^i) (rho_0 = 1), the recursion for w gives
rho_{i+1} = min(rho_i, Q(z^{i+1}) / P(z^{i+1})), and the probability of z is, by (2),
sum_{i<j} Q(z^i) max(0, w_i p_i(z_{i+1}) - q_i(z_{i+1})) P(z) / P(z^{i+1})
+ Q(z^j) w_j p_j(z_{j+1}) P(z) / P(z^{j+1}) = P(z) [sum_{i<j} (rho_i - rho_{i+1}) + rho_j]
= P(z) rho_0 = P(z), because max(0, rho_i - Q/P) = rho_i - min(rho_i, Q/P). (Sequences with
P(z) = 0 get probability 0: Q(x^i) w_i <= P(x^i) always, so every term vanishes.) The next
round starts from the emitted prefix, so the argument repeats round after round.

At least as many drafts as the chain: the expected number kept is
sum_{i=1..j} Pr[tau >= i] = sum_i E_q[w_i] by (1), and the chain keeps
sum_i E_q[prod_{k<i} min(1, p_k(x_{k+1}) / q_k(x_{k+1}))]; since min(1, ab) >= min(1, a) min(1, b),
w_i is at least the chain's product, term by term. On the paper's toy example (context-free
p = (1/3, 2/3), q = (2/3, 1/3), j = 2) block verification keeps 11/9 drafts, the chain 10/9.

The extra token is drawn by inverse CDF from one uniform on integer weights: the chain's grid
and search (:func:`specviz.verifiers._sample.search`: each weight floored to a multiple of 2^-48,
held in float64 and summed exactly there), so NumPy and torch return identical tokens for the
same uniforms; the masses m_i are those same integer sums, so the thresholds agree too.
Flooring moves each m_i by at most V * 2^-48, which moves Pr[tau = i] by at most as much
(the h_i it enters is multiplied by m_i + 1 - w_i, the chance that no later draft passes), so
the law moves by about (K + 1) V 2^-48 in total variation (4.6e-10 per position at V = 128256).
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import numpy as np

from .._types import Array
from ..errors import InputError
from . import _sample
from . import _validate as check
from ._sample import GRID, MAX_TOTAL
from ._xp import NumpyOps, TorchOps, ops_for
from .verify import PAD_TOKEN, Uniforms, Verification

Ops = NumpyOps | TorchOps

# Weights are floored to multiples of 1 / GRID, the chain's grid, and held as float64 integers:
# sums below 2^53 do not depend on the order of addition, so every backend gets the same masses and
# the same tokens.
MAX_ROW_MASS = MAX_TOTAL / GRID  # 16: a row of weights summing past this is no probability row

Last = Literal["capped", "product"]


class BlockThresholds(NamedTuple):
    """What block verification compares its uniforms with, for drawing a step or a court.

    ``weights``: (B, K+1) float64, w_0 .. w_j; NaN past num_draft[b].
    ``residual_mass``: (B, K+1) float64, m_i = sum_x max(0, w_i p_i(x) - q_i(x)) for i < j
    (as the integer sums the draw uses); NaN from num_draft[b] on.
    ``thresholds``: (B, K) float64, at column i - 1 the threshold h_i of the i-th draft's
    uniform; NaN past num_draft[b].
    """

    weights: Array
    residual_mass: Array
    thresholds: Array


class Batch(NamedTuple):
    """Validated padded inputs. Shared with :mod:`specviz.verifiers.sample_match`."""

    ops: Ops
    target: Array  # (B, K+1, V) as given (rows past num_draft may hold anything)
    draft: Array | None  # (B, K, V) as given, or None for a deterministic drafter
    tokens: Array  # (B, K) int64, 0 past num_draft: safe column indices
    num_draft: Array  # (B,) int64
    valid: Array  # (B, K) bool, position < num_draft
    B: int
    K: int
    V: int


def verify_block(
    target_probs: Array,
    draft_probs: Array | None,
    draft_tokens: Array,
    num_draft: Array,
    *,
    rng: Any = None,
    uniforms: Uniforms | tuple[Array, Array] | None = None,
    validate: bool = True,
) -> Verification:
    """Block verification of a padded batch of drafts; the output follows the target exactly.

    Parameters
    ----------
    target_probs
        Shape (B, K+1, V). Row b reads positions 0..num_draft[b] (the last one for the bonus);
        later positions are ignored.
    draft_probs
        Shape (B, K, V): the distribution each draft token was sampled from. ``None`` for a
        deterministic drafter (q one-hot on the drafted token; lossless whatever rule chose
        the drafts).
    draft_tokens
        Shape (B, K) integers; entries at positions >= num_draft[b] are ignored (may be -1).
    num_draft
        Shape (B,) integers in [0, K].
    rng
        ``numpy.random.Generator`` for NumPy inputs, ``torch.Generator`` for torch inputs;
        default a fresh unseeded one. Draws ``accept`` (B, K) first, then ``sample`` (B,).
    uniforms
        Explicit :class:`~specviz.Uniforms` instead of ``rng``: ``accept`` (B, K) holds the
        uniform eta_i of the i-th draft at column i - 1, ``sample`` (B,) the uniform of the
        residual or bonus draw. The layout is :func:`specviz.verify`'s, so the same uniforms
        drive either rule.
    validate
        Check shapes, ranges and the probability rows that are read.

    Returns
    -------
    Verification
        As from :func:`specviz.verify`, except that ``ratios`` holds the threshold h_i each
        uniform was compared with (the i-th draft's at column i - 1; every draft below
        num_draft[b] is looked at): the draft count kept is the largest i with
        ``accept_uniforms[:, i-1] < ratios[:, i-1]``, 0 if none.
    """
    batch = prepare(target_probs, draft_probs, draft_tokens, num_draft, validate=validate)
    ua, us = get_uniforms(batch, rng, uniforms, validate)
    return _verify(batch, ua, us, "capped", validate)


def verify_block_lossy(
    target_probs: Array,
    draft_probs: Array | None,
    draft_tokens: Array,
    num_draft: Array,
    *,
    rng: Any = None,
    uniforms: Uniforms | tuple[Array, Array] | None = None,
    validate: bool = True,
) -> Verification:
    """LOSSY: block verification with the last threshold min(1, prod p/q) instead of w_j.

    Kept for comparison only. The uncapped product P(x^j) / Q(x^j) is what a verifier that
    accepted or rejected the whole block as one draw from the joint would use, and it is at
    least w_j (which caps the running ratio at 1 after every draft). Paired with the
    per-position residuals of block verification it over-accepts: step (1) of the proof in
    :mod:`specviz.verifiers.block` needs Pr[tau >= j | x^j] = w_j exactly.

    Exact figures on the paper's toy example (context-free p = (1/3, 2/3), q = (2/3, 1/3),
    2 drafts): it keeps 4/3 drafts per step against 11/9 for block verification and 10/9 for
    the chain, and the round's 3 tokens (its output continued by the target) are 1/9 away from
    the target's law in total variation. tests/test_block.py computes both by enumeration.

    Parameters and result as in :func:`verify_block`.
    """
    batch = prepare(target_probs, draft_probs, draft_tokens, num_draft, validate=validate)
    ua, us = get_uniforms(batch, rng, uniforms, validate)
    return _verify(batch, ua, us, "product", validate)


def block_thresholds(
    target_probs: Array,
    draft_probs: Array | None,
    draft_tokens: Array,
    num_draft: Array,
    *,
    last: Last = "capped",
    validate: bool = True,
) -> BlockThresholds:
    """The weights, residual masses and thresholds of block verification, without drawing.

    Arguments as in :func:`verify_block`; ``last="product"`` gives the thresholds of
    :func:`verify_block_lossy`.
    """
    if last not in ("capped", "product"):
        raise InputError("last", "'capped' or 'product'", repr(last))
    batch = prepare(target_probs, draft_probs, draft_tokens, num_draft, validate=validate)
    w, m, h = _thresholds(batch, last, validate)
    ops, B, K = batch.ops, batch.B, batch.K
    j = batch.num_draft
    pos1 = ops.arange(K + 1)
    m_full = ops.full((B, K + 1), float("nan"), np.float64)
    m_full[:, :K] = m
    nan = float("nan")
    return BlockThresholds(
        weights=ops.where(pos1[None, :] <= j[:, None], w, nan),
        residual_mass=ops.where(pos1[None, :] < j[:, None], m_full, nan),
        thresholds=h,
    )


def breakpoints(
    target_probs: np.ndarray, draft_probs: np.ndarray | None, draft_tokens: np.ndarray, num_draft: int | None = None
) -> np.ndarray:
    """Every threshold in (0, 1) block verification (or its lossy variant) compares a uniform
    with, for one row: the thresholds h_i of both variants and the CDF points of every row the
    extra token can come from (p_0 .. p_j and the residuals max(0, w_i p_i - q_i), i < j).

    For an exact enumeration over the uniforms, like :func:`specviz.proof.exact.breakpoints` for the
    chain. target_probs (K+1, V), draft_probs (K, V) or None, draft_tokens (K,), num_draft
    default K. Sorted, unique, float64.
    """
    T = np.asarray(target_probs, dtype=np.float64)
    x = np.asarray(draft_tokens)
    K = int(x.shape[0])
    j = K if num_draft is None else int(num_draft)
    D = None if draft_probs is None else np.asarray(draft_probs, dtype=np.float64)[None]
    args = (T[None], D, x[None], np.array([j]))
    capped = block_thresholds(*args)
    product = block_thresholds(*args, last="product")
    points = [capped.thresholds[0, :j], product.thresholds[0, j - 1 : j] if j else np.empty(0)]
    w = capped.weights[0]
    for i in range(j + 1):
        rows = [T[i]]
        if i < j:
            q = np.eye(T.shape[1])[int(x[i])] if D is None else D[0, i]
            rows.append(np.maximum(w[i] * T[i] - q, 0))
        for r in rows:
            if r.sum() > 0:
                points.append(np.cumsum(r) / r.sum())
    allp = np.concatenate(points)
    return np.unique(allp[(allp > 0) & (allp < 1)])


def prepare(
    target_probs: Array, draft_probs: Array | None, draft_tokens: Array, num_draft: Array, *, validate: bool
) -> Batch:
    """Check a padded batch the way :func:`specviz.verify` does; errors name the argument."""
    ops = ops_for(target_probs)
    T, x, j, valid = check.padded_inputs(ops, target_probs, draft_tokens, num_draft, "target_probs")
    B, K, V = int(x.shape[0]), int(x.shape[1]), int(T.shape[2])
    Q = check.draft_table(ops, T, draft_probs, (B, K, V))
    # Draft ids are checked whatever validate says (as verify does): an id outside [0, V), such as
    # the -1 placeholder of serving engines, would otherwise index column V - 1 and could be kept.
    check.check_range("draft_tokens", x[valid], 0, V - 1, ops, "token ids at positions < num_draft")
    if validate:
        full = B == 0 or ops.scalar(j.min()) == K  # every row reads every position: no gather
        pos1 = ops.arange(K + 1)
        check.check_prob_rows("target_probs", T if full else T[pos1[None, :] <= j[:, None]], ops)  # (rows read, V)
        if Q is not None:
            check.check_prob_rows("draft_probs", Q if full else Q[valid], ops)
    xs = ops.where(valid, x, 0)  # (B, K)
    return Batch(ops=ops, target=T, draft=Q, tokens=xs, num_draft=j, valid=valid, B=B, K=K, V=V)


def get_uniforms(batch: Batch, rng: Any, uniforms: Any, validate: bool) -> tuple[Array, Array]:
    """accept (B, K) and sample (B,) uniforms as float64, from ``uniforms`` or ``rng``."""
    return check.get_uniforms(batch.ops, rng, uniforms, (batch.B, batch.K), batch.B, validate)


def inverse_cdf(ops: Ops, weights: Array, u: Array, validate: bool) -> Array:
    """One token per row from non-negative float64 weights (R, V) and uniforms u (R,).

    The chain's draw (:func:`specviz.verifiers._sample.search`): the first index whose running
    integer weight exceeds ``floor(u * total)``; a token of weight 0 is never drawn. Rows with no
    mass at all return token 0 (callers never pass one).
    """
    return _sample.search(ops, ops.cumsum64(quantize(ops, weights, validate)), u)


def quantize(ops: Ops, w: Array, validate: bool) -> Array:
    """Non-negative float64 weights (..., V) floored to multiples of 1 / GRID: float64 integers."""
    if not validate:  # inputs were not checked: refuse what would overflow, be undefined or not monotone
        sums = ops.row_sums64(w)
        if not ops.isfinite_all(sums) or (int(np.prod(w.shape)) and ops.scalar(sums.max()) >= MAX_ROW_MASS):
            raise InputError("target_probs", f"probability rows (each summing to less than {MAX_ROW_MASS:g})",
                             "values too large or not finite (validate=False skipped the checks)")  # fmt: skip
        if int(np.prod(w.shape)) and ops.scalar(w.min()) < 0:  # a negative weight breaks the inverse CDF
            raise InputError("target_probs", "non-negative probabilities in the rows drawn from",
                             "a negative entry (validate=False skipped the checks)")  # fmt: skip
    return ops.floor64(w * GRID)


def _rows(ops: Ops, rows: Array, mask: Array) -> Array:
    """(R, V) float64 copy of rows, zero where mask (R,) is False (unread rows may be NaN)."""
    rows = ops.to_float64(rows)
    return rows if bool(mask.all()) else ops.where(mask[:, None], rows, 0.0)


def _residual(ops: Ops, w: Array, p: Array, q: Array | None, x: Array, mask: Array) -> Array:
    """(R, V) float64 max(0, w p - q) for rows p (R, V), q (R, V) or None (one-hot on x (R,)).

    The one formula both the masses and the draw use, so they see the same floats. Rows where
    mask is False come out 0.
    """
    r = _rows(ops, p, mask) * w[:, None]  # (R, V)
    if q is None:  # one-hot q on the drafted token
        at = ops.nonzero(mask)
        r[at, x[at]] = r[at, x[at]] - 1.0
    else:
        r = r - _rows(ops, q, mask)
    return ops.clamp_min0(r)


def probed(batch: Batch) -> tuple[Array, Array]:
    """p(x) and q(x) (B, K) float64 at each draft position, 0 past num_draft; q(x) = 1 for a
    deterministic drafter (q one-hot on the draft)."""
    ops, valid, xs = batch.ops, batch.valid, batch.tokens
    ar, pos = ops.arange(batch.B), ops.arange(batch.K)
    px = ops.where(valid, ops.to_float64(batch.target[ar[:, None], pos[None, :], xs]), 0.0)
    if batch.draft is None:
        return px, ops.where(valid, 1.0, 0.0)
    return px, ops.where(valid, ops.to_float64(batch.draft[ar[:, None], pos[None, :], xs]), 0.0)


def _thresholds(batch: Batch, last: Last, validate: bool) -> tuple[Array, Array, Array]:
    """w (B, K+1), m (B, K) float64 masses, h (B, K) thresholds (NaN past num_draft)."""
    ops, B, K = batch.ops, batch.B, batch.K
    ar, pos = ops.arange(B), ops.arange(K)
    j, valid, xs = batch.num_draft, batch.valid, batch.tokens
    px, qx = probed(batch)  # (B, K)
    ratio = ops.where(qx > 0, px / ops.where(qx > 0, qx, 1.0), 0.0)  # (B, K) 0 where q(x) = 0
    w = ops.full((B, K + 1), 1.0, np.float64)
    prod = ops.full((B, K + 1), 1.0, np.float64)  # the uncapped product, for the lossy variant
    for k in range(K):  # K sequential steps, vectorized over rows
        t = ops.where(w[:, k] > 0, w[:, k] * ratio[:, k], 0.0)  # 0 * inf would be NaN
        w[:, k + 1] = ops.where(valid[:, k], ops.where(t < 1, t, 1.0), w[:, k])
        t = ops.where(prod[:, k] > 0, prod[:, k] * ratio[:, k], 0.0)
        prod[:, k + 1] = ops.where(valid[:, k], t, prod[:, k])
    M = ops.full((B, K), 0.0, np.float64)  # (B, K) integer masses, exact in float64
    for k in range(K):
        q = None if batch.draft is None else batch.draft[:, k]
        r = _residual(ops, w[:, k], batch.target[:, k], q, xs[:, k], valid[:, k])  # (B, V)
        M[:, k] = quantize(ops, r, validate).sum(-1)
    m = ops.to_float64(M) / GRID  # (B, K)
    den = m + (1.0 - w[:, :K])
    h = ops.where(den > 0, m / ops.where(den > 0, den, 1.0), 1.0)  # (B, K) h_i at column i
    wj = w[ar, j]  # (B,)
    last_thr = wj if last == "capped" else ops.where(prod[ar, j] < 1, prod[ar, j], 1.0)
    H = ops.full((B, K), float("nan"), np.float64)  # (B, K) threshold of the i-th draft at column i-1
    if K > 1:
        H[:, : K - 1] = h[:, 1:]
    H = ops.where(pos[None, :] == (j - 1)[:, None], last_thr[:, None], H)
    H = ops.where(valid, H, float("nan"))
    return w, m, H


def _verify(batch: Batch, ua: Array, us: Array, last: Last, validate: bool) -> Verification:
    ops, B, K = batch.ops, batch.B, batch.K
    ar, pos = ops.arange(B), ops.arange(K)
    j, valid = batch.num_draft, batch.valid
    w, m, H = _thresholds(batch, last, validate)
    passed = valid & (ua < H)  # (B, K) NaN thresholds never pass
    if K:
        score = ops.where(passed, pos[None, :] + 1, 0)  # (B, K)
        tau = score[ar, ops.argmax_last(score)]  # (B,) the largest passing i, 0 if none
    else:
        tau = ops.full((B,), 0, np.int64)
    bonus = tau == j
    m_tau = m[ar, ops.where(bonus, 0, tau)] if K else ops.full((B,), 0.0, np.float64)
    use_res = ~bonus & (m_tau > 0)  # (B,) residual rows; the others draw from p_tau
    tau_q = ops.where(bonus, 0, tau)  # (B,) a safe draft position for the residual formula
    p = ops.to_float64(batch.target[ar, tau])  # (B, V) p_tau
    weights = p
    if K and bool(use_res.any()):
        q = None if batch.draft is None else batch.draft[ar, tau_q]
        res = _residual(ops, w[ar, tau_q], batch.target[ar, tau_q], q, batch.tokens[ar, tau_q], use_res)
        weights = ops.where(use_res[:, None], res, p)
    token = inverse_cdf(ops, weights, us, validate)  # (B,)

    x = ops.where(valid, batch.tokens, PAD_TOKEN)
    tokens = ops.full((B, K + 1), PAD_TOKEN, np.int64)
    tokens[:, :K] = ops.where(pos[None, :] < tau[:, None], x, PAD_TOKEN)
    tokens[ar, tau] = token
    return Verification(
        tokens=tokens,
        num_tokens=tau + 1,
        num_accepted=tau,
        accept_uniforms=ops.where(valid, ua, float("nan")),
        ratios=H,
        bonus=bonus,
        sample_uniforms=us + 0.0,
    )
