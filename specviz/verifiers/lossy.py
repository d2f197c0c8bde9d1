"""LOSSY verification rules, kept for comparison only: they do not follow the target.

# B rows, K drafts (padded width), V vocabulary

Each rule has :func:`specviz.verify`'s signature (padded batch, ``rng=`` or explicit
``uniforms=``, ``validate=``) so the exact court (:mod:`specviz.proof.court`) and
:func:`specviz.proof.simulate.generate` drive them like the lossless ones; their knobs are keyword
arguments with defaults (bind others with ``functools.partial``). They trade exactness for
accepted tokens, and the court measures both.

- :func:`verify_typical`: Medusa's typical acceptance (Cai et al., 2024). A draft x is kept iff
  p(x) > min(epsilon, delta exp(-H(p))), with H the entropy of the target row, without a coin;
  the first failing position, or the position after the last draft, emits one token from the
  fallback law. What Medusa does there, read in ``FasterDecoding/Medusa``: ``medusa_generate``
  (``medusa/model/medusa_model.py``) calls ``evaluate_posterior`` (``medusa/model/utils.py``,
  whose default ``fast=True`` path is exactly the threshold above) and then
  ``generate_candidates`` without a temperature, which takes the next round's first token as
  the **argmax** of the target's row: ``fallback="argmax"``, the default here. With a
  temperature and ``fast=False``, ``generate_candidates`` samples it instead with
  ``get_typical_one_token``, from the target restricted to the tokens with p >= the same
  threshold, renormalized: ``fallback="typical"``. ``fallback="target"`` samples it from p
  itself (the rule as the issue and :func:`specviz.app.interview.typical_acceptance_law` state it).
  Medusa computes the entropy as -sum p log(p + 1e-5); here it is exact (0 log 0 = 0). The
  defaults epsilon = 0.09 and delta = 0.3 are ``medusa_generate``'s ``posterior_threshold`` and
  ``posterior_alpha`` (the threshold is min(posterior_threshold, posterior_alpha exp(-H))).
- :func:`verify_lenient`: an acceptance threshold below 1. With lenience theta in (0, 1], the
  draft is kept iff u theta q(x) < p(x), i.e. with probability min(1, p(x) / (theta q(x))),
  instead of min(1, p(x)/q(x)); a rejection emits from the chain's residual (p - q)^+
  normalized, and a full row's bonus is from p_j, as in the chain. theta = 1 is the chain
  rule, exactly; every theta < 1 keeps more drafts and is lossy whenever some x has
  p(x) < q(x) (then theta q(x) < q(x) moves mass towards x).

- :func:`verify_ratio_threshold`: a threshold on the ratio instead of a coin. The draft is kept
  iff p(x) >= theta q(x), deterministically; a rejection emits from the chain's residual and a
  full row's bonus is from p_j. No theta makes it lossless in general: a token with
  0 < p(x) < q(x) is kept either always (theta <= p/q) or never (theta > p/q), where the chain
  keeps it with probability p(x)/q(x).

What each costs in exactness, on stated examples (tests/test_lossy.py computes every figure
by enumeration and checks it against an independent closed form):

- typical acceptance with Medusa's defaults (epsilon 0.09, delta 0.3, argmax fallback), one
  draft, p = (0.5, 0.3, 0.15, 0.05), q uniform: the threshold is min(0.09, 0.3 exp(-H(p))) = 0.09,
  tokens 0, 1 and 2 are kept, and the quarter of the drafts that propose token 3 give token 0:
  the first token's law is (0.5, 0.25, 0.25, 0), TV = 0.1 (and token 3 is never emitted).
- typical acceptance, fallback "target", one draft, p = (0.5, 0.3, 0.15, 0.05), q uniform,
  epsilon = 0.3, delta = 0.09: the threshold is 0.09 exp(-H(p)) = 0.0287, every token clears
  it, so every draft is kept and the first token follows q: TV(first token, p) = 0.3 exactly.
  With epsilon = 0.2 and delta = 1 (threshold min(0.2, 0.319) = 0.2) only tokens 0 and 1 are
  kept and the first token's law is 0.25 [x in {0, 1}] + 0.5 p(x) = (0.5, 0.4, 0.075, 0.025):
  TV = 0.1.
- ratio threshold theta = 1/2, p = (0.5, 0.3, 0.15, 0.05), q uniform, one draft: the ratios are
  (2, 1.2, 0.6, 0.2), so only token 3 is rejected, a quarter of the time, and its replacement
  comes from the residual (0.25, 0.05, 0, 0) / 0.3: the first token's law is
  (0.25 + 0.25 * 5/6, 0.25 + 0.25 * 1/6, 0.25, 0) = (0.4583, 0.2917, 0.25, 0), TV = 0.1.
- lenience theta = 3/4, p = (1/3, 2/3), q = (2/3, 1/3), one draft: token 0 is kept with
  probability (1/3) / (3/4 * 2/3) = 2/3, token 1 always, so the first token is 0 with
  probability 2/3 * 2/3 = 4/9 against p(0) = 3/9: TV = 1/9.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from .._types import Array
from ..errors import InputError
from .block import Batch, get_uniforms, inverse_cdf, prepare, probed
from .verify import PAD_TOKEN, Uniforms, Verification

TYPICAL_EPSILON = 0.09  # medusa_generate's posterior_threshold default (medusa/model/medusa_model.py)
TYPICAL_DELTA = 0.3  # medusa_generate's posterior_alpha default (same function)
Fallback = Literal["argmax", "typical", "target"]


def verify_typical(
    target_probs: Array,
    draft_probs: Array | None,
    draft_tokens: Array,
    num_draft: Array,
    *,
    rng: Any = None,
    uniforms: Uniforms | tuple[Array, Array] | None = None,
    validate: bool = True,
    epsilon: float = TYPICAL_EPSILON,
    delta: float = TYPICAL_DELTA,
    fallback: Fallback = "argmax",
) -> Verification:
    """LOSSY: Medusa's typical acceptance. Keep drafts while p(x) > min(epsilon, delta exp(-H(p))).

    Shapes and randomness as in :func:`specviz.verify`; ``draft_probs`` is checked when given
    but not used (the rule ignores the drafter's law). ``uniforms.accept`` is not used either
    (no coins). The token after the kept drafts is the target row's argmax at that position
    (``"argmax"``, Medusa's ``medusa_generate``; ties to the lowest id), or drawn with
    ``uniforms.sample`` from the row restricted to p >= the threshold (``"typical"``) or from
    the row itself (``"target"``). ``ratios`` holds p(x) at each tested draft.
    TV from the target on stated examples: see the module docstring.
    """
    if not (np.isfinite(epsilon) and np.isfinite(delta)) or epsilon < 0 or delta < 0:
        raise InputError("epsilon", "non-negative finite epsilon and delta", f"{epsilon}, {delta}")
    if fallback not in ("argmax", "typical", "target"):
        raise InputError("fallback", "'argmax', 'typical' or 'target'", repr(fallback))
    batch = prepare(target_probs, draft_probs, draft_tokens, num_draft, validate=validate)
    ua, us = get_uniforms(batch, rng, uniforms, validate)
    ops, B, K = batch.ops, batch.B, batch.K
    ar, pos = ops.arange(B), ops.arange(K)
    j, valid, xs = batch.num_draft, batch.valid, batch.tokens
    T = ops.to_float64(batch.target)  # (B, K+1, V)
    # Rows past num_draft may hold anything (NaN): the threshold is only read where valid.
    Tz = ops.where(ops.arange(K + 1)[None, :, None] <= j[:, None, None], T, 0.0)  # (B, K+1, V)
    logp: Array = ops.where(Tz > 0, Tz, 1.0)  # NumPy or torch, as the inputs
    logp = logp.log() if ops.name == "torch" else np.log(logp)
    ent = -(Tz * logp).sum(-1)  # (B, K+1)
    e = ent.neg().exp() if ops.name == "torch" else np.exp(-ent)
    cap = ops.full(tuple(e.shape), float(epsilon), np.float64)  # a float64 tensor: no float32 rounding of epsilon
    thr = ops.where(delta * e < cap, delta * e, cap)  # (B, K+1)
    px = Tz[ar[:, None], pos[None, :], xs]  # (B, K)
    passed = valid & (px > thr[:, :K])
    n = ops.run_length(passed)  # (B,) drafts kept
    p = Tz[ar, n]  # (B, V) the target row at the stopping position
    if fallback == "typical":
        trunc = ops.where(p >= thr[ar, n][:, None], p, 0.0)
        keep = trunc.sum(-1) > 0
        p = ops.where(keep[:, None], trunc, p)
    token = ops.argmax_last(p) if fallback == "argmax" else inverse_cdf(ops, p, us, validate)
    tested = valid & (pos[None, :] <= n[:, None])
    return _result(batch, n, token, ops.where(tested, ua, float("nan")), ops.where(tested, px, float("nan")), us)


def verify_lenient(
    target_probs: Array,
    draft_probs: Array | None,
    draft_tokens: Array,
    num_draft: Array,
    *,
    rng: Any = None,
    uniforms: Uniforms | tuple[Array, Array] | None = None,
    validate: bool = True,
    lenience: float = 0.75,
) -> Verification:
    """LOSSY for lenience < 1: keep x iff u * lenience * q(x) < p(x), then the chain's residual.

    ``lenience`` theta in (0, 1]; 1 is :func:`specviz.verify`'s rule. A deterministic drafter
    (``draft_probs=None``) has q one-hot: keep x iff u * theta < p(x), residual p without x.
    Shapes and randomness as in :func:`specviz.verify`; ``ratios`` holds p(x) / (theta q(x)).
    TV from the target on a stated example: see the module docstring.
    """
    if not (0 < lenience <= 1):
        raise InputError("lenience", "a number in (0, 1]", repr(lenience))
    batch = prepare(target_probs, draft_probs, draft_tokens, num_draft, validate=validate)
    ua, us = get_uniforms(batch, rng, uniforms, validate)
    return _kept_then_chain(batch, ua, us, validate, lambda px, qx: ua * lenience * qx < px, lenience)


def _result(batch: Batch, n: Array, token: Array, accept_u: Array, ratios: Array, us: Array) -> Verification:
    ops, B, K = batch.ops, batch.B, batch.K
    ar, pos = ops.arange(B), ops.arange(K)
    x = ops.where(batch.valid, batch.tokens, PAD_TOKEN)
    tokens = ops.full((B, K + 1), PAD_TOKEN, np.int64)
    tokens[:, :K] = ops.where(pos[None, :] < n[:, None], x, PAD_TOKEN)
    tokens[ar, n] = token
    return Verification(
        tokens=tokens,
        num_tokens=n + 1,
        num_accepted=n + 0,
        accept_uniforms=accept_u,
        ratios=ratios,
        bonus=n == batch.num_draft,
        sample_uniforms=us + 0.0,
    )


def verify_ratio_threshold(
    target_probs: Array,
    draft_probs: Array | None,
    draft_tokens: Array,
    num_draft: Array,
    *,
    rng: Any = None,
    uniforms: Uniforms | tuple[Array, Array] | None = None,
    validate: bool = True,
    theta: float = 0.5,
) -> Verification:
    """LOSSY: keep x iff p(x) >= theta * q(x), without a coin; then the chain's residual or bonus.

    ``theta`` > 0. A deterministic drafter (``draft_probs=None``) has q one-hot: keep x iff
    p(x) >= theta. ``uniforms.accept`` is not used; ``uniforms.sample`` draws the replacement or
    the bonus. Shapes as in :func:`specviz.verify`; ``ratios`` holds p(x) / q(x).
    TV from the target on a stated example: see the module docstring.
    """
    if not (np.isfinite(theta) and theta > 0):
        raise InputError("theta", "a positive finite ratio threshold", repr(theta))
    batch = prepare(target_probs, draft_probs, draft_tokens, num_draft, validate=validate)
    ua, us = get_uniforms(batch, rng, uniforms, validate)
    return _kept_then_chain(batch, ua, us, validate, lambda px, qx: px >= theta * qx, 1.0)


def _kept_then_chain(batch: Batch, ua: Array, us: Array, validate: bool, keep: Any, scale: float) -> Verification:
    """Keep drafts while ``keep(p(x), q(x))`` holds (and q(x) > 0), then the chain's residual or
    bonus (lenient acceptance, the ratio threshold); ``ratios`` holds p(x) / (scale q(x))."""
    ops, pos = batch.ops, batch.ops.arange(batch.K)
    T = ops.to_float64(batch.target)  # (B, K+1, V)
    px, qx = probed(batch)  # (B, K)
    n = ops.run_length(batch.valid & (qx > 0) & keep(px, qx))  # (B,) drafts kept
    token = inverse_cdf(ops, _chain_row(batch, T, n, batch.tokens), us, validate)
    tested = batch.valid & (pos[None, :] <= n[:, None])
    den = scale * qx
    ratio = ops.where(den > 0, px / ops.where(den > 0, den, 1.0), float("nan"))
    return _result(batch, n, token, ops.where(tested, ua, float("nan")), ops.where(tested, ratio, float("nan")), us)


def _chain_row(batch: Batch, T: Array, n: Array, xs: Array) -> Array:
    """(B, V) the row the chain draws its last token from after n kept drafts: p_j for a full row
    (the bonus), else the residual max(0, p_n - q_n) (p_n without x for a deterministic drafter;
    p_n itself when the residual has no mass, which only rounding reaches)."""
    ops = batch.ops
    ar = ops.arange(batch.B)
    p = T[ar, n] + 0.0  # (B, V)
    rej = ops.nonzero(n != batch.num_draft)
    if int(rej.shape[0]):
        nr = n[rej]
        pr = p[rej]
        if batch.draft is None:
            res = pr + 0.0
            res[ops.arange(int(rej.shape[0])), xs[rej, nr]] = 0.0
        else:
            res = ops.clamp_min0(pr - ops.to_float64(batch.draft[rej, nr]))
        has = res.sum(-1) > 0
        p[rej] = ops.where(has[:, None], res, pr)
    return p
