"""Mistakes serving engines made around the verifier: in the pipeline that feeds it and in its randomness.

# B rows, K drafts (padded width), V vocabulary

The verifiers here take the arguments and return the result of :func:`specviz.verify`, so the
proof suite, the exact enumeration (:mod:`specviz.proof.exact`) and the app run them unchanged.

How a pipeline's mistake is reproduced at the verifier's door. In every proof scenario the
rows a verifier receives are what a *correct* engine hands it: the target rows are the law
plain decoding with the request's settings samples (the processed target, the law the suite
judges against), and each draft row is the law its draft was drawn from. A pipeline that
passes the *raw* softmax instead is modelled by a wrapper that receives those processed rows
and hands :func:`specviz.verify` the raw softmax the faulty pipeline would have passed. For a
temperature T the raw row is recovered exactly: with logits z, softmax(z / T)^T is
proportional to exp(z), so raw = row^T / sum(row^T) (zeros stay zeros). The settings the
engines got wrong are :data:`REQUEST` and :data:`DRAFTER`; a top-k or top-p filter removes
tokens and cannot be undone this way, which is why the catalogue's instances are
temperatures (the lesson is the same: :func:`specviz.verifiers.processing.output_law` computes either).

Randomness: :func:`verify_seeded` draws each row's uniforms from its own request's seed, the
way an engine must for per-request reproducibility; :func:`verify_seeded_first_request` is
the shipped mistake that uses the first row's seed for every row.

:data:`FAULTS` documents the entries tested directly rather than by the proof suite (their
law cannot be judged by sampling): ``inclusive_coin``, ``nan_row`` and
``seed_of_first_request``; see tests/test_engine_bugs.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from .._types import Array
from ..errors import InputError
from ..verifiers import reference
from ..verifiers._xp import is_torch
from ..verifiers.verify import Uniforms, Verification, verify
from .pipeline import DRAFTER, REQUEST, unprocess

COIN_CAP = 1.0 - 2.0**-53  # the largest float64 below 1: a coin rebuilt from a CDF may round up to 1


def q_unprocessed(
    target_probs: Array,
    draft_probs: Array | None,
    draft_tokens: Array,
    num_draft: Array,
    *,
    rng: Any = None,
    uniforms: Uniforms | tuple[Array, Array] | None = None,
    validate: bool = True,
) -> Verification:
    """The drafts were drawn from ``draft_probs`` (the drafter's law at :data:`DRAFTER`), but the
    verifier is told the drafter's raw softmax as q. A deterministic drafter (None) is unchanged."""
    raw = None if draft_probs is None else unprocess(draft_probs, DRAFTER)
    return verify(target_probs, raw, draft_tokens, num_draft, rng=rng, uniforms=uniforms, validate=validate)


def target_unprocessed(
    target_probs: Array,
    draft_probs: Array | None,
    draft_tokens: Array,
    num_draft: Array,
    *,
    rng: Any = None,
    uniforms: Uniforms | tuple[Array, Array] | None = None,
    validate: bool = True,
) -> Verification:
    """``target_probs`` is the request's law (at :data:`REQUEST`), but the verifier is given the
    target's raw softmax as p."""
    raw = unprocess(target_probs, REQUEST)
    return verify(raw, draft_probs, draft_tokens, num_draft, rng=rng, uniforms=uniforms, validate=validate)


def drafter_coins(draft_probs: Array | None, draft_tokens: Array, v: Array) -> Array:
    """(B, K) the uniform the drafter used for each draft, rebuilt from a fresh uniform ``v`` (B, K).

    A draft x drawn by inverse CDF from q with uniform u has u in [F(x-1), F(x)), F the running
    sum of q; given x, u is uniform there. So ``F(x-1) + v * q(x)`` with v uniform on [0, 1) has
    exactly the joint law of (draft, drafter's uniform): reusing it as the acceptance coin is the
    shared-stream mistake, as a pure function of explicit uniforms. One-hot q (None): u = v.
    """
    if draft_probs is None:
        return v
    if is_torch(draft_probs):
        import torch

        q = draft_probs.double()
        x = draft_tokens.long().clamp(0, q.shape[-1] - 1).unsqueeze(-1)  # (B, K, 1); padding reads column 0
        below = (torch.cumsum(q, -1) - q).gather(-1, x).squeeze(-1)  # (B, K) F(x - 1)
        qx = q.gather(-1, x).squeeze(-1)
        return torch.clamp(below + v.double().to(q.device) * qx, 0.0, COIN_CAP)
    q = np.asarray(draft_probs, dtype=np.float64)
    x = np.clip(np.asarray(draft_tokens, dtype=np.int64), 0, q.shape[-1] - 1)[..., None]  # (B, K, 1)
    below = np.take_along_axis(np.cumsum(q, -1) - q, x, -1)[..., 0]  # (B, K)
    qx = np.take_along_axis(q, x, -1)[..., 0]
    with np.errstate(invalid="ignore"):
        return np.clip(below + np.asarray(v, dtype=np.float64) * qx, 0.0, COIN_CAP)


def shared_noise_stream(
    target_probs: Array,
    draft_probs: Array | None,
    draft_tokens: Array,
    num_draft: Array,
    *,
    rng: Any = None,
    uniforms: Uniforms | tuple[Array, Array] | None = None,
    validate: bool = True,
) -> Verification:
    """Each draft's acceptance coin is the uniform the drafter drew it with (see :func:`drafter_coins`);
    ``uniforms.accept`` (or the generator) supplies the fresh v behind it, ``uniforms.sample`` the draw."""
    if uniforms is None:
        x = np.asarray(draft_tokens) if not is_torch(draft_tokens) else draft_tokens
        B, K = int(x.shape[0]), int(x.shape[1])
        if is_torch(target_probs):
            import torch

            gen = rng if rng is not None else torch.Generator()
            v: Array = torch.rand((B, K), generator=gen, dtype=torch.float64)  # NumPy in the other branch
            s: Array = torch.rand((B,), generator=gen, dtype=torch.float64)
        else:
            gen = rng if rng is not None else np.random.default_rng()
            v, s = gen.random((B, K)), gen.random(B)
    else:
        if rng is not None:
            raise InputError("uniforms", "either rng or uniforms, not both", "both")
        v, s = uniforms[0], uniforms[1]
    coins = drafter_coins(draft_probs, draft_tokens, v)
    return verify(target_probs, draft_probs, draft_tokens, num_draft, uniforms=Uniforms(coins, s), validate=validate)


# --- per-request seeds ---------------------------------------------------------------------------


def seeded_uniforms(seeds: Sequence[int] | np.ndarray, K: int) -> Uniforms:
    """Row b's uniforms from its own generator ``default_rng(seeds[b])``: K coins, then the draw.

    A row's uniforms depend on its seed alone, not on the batch around it.
    """
    s = np.asarray(seeds)
    if s.ndim != 1 or not np.issubdtype(s.dtype, np.integer) or (s < 0).any():
        raise InputError("seeds", "shape (B,) non-negative integers, one per request", f"{s.dtype} {s.shape}")
    B = s.shape[0]
    accept, sample = np.empty((B, K)), np.empty(B)
    for b in range(B):  # one generator per request: the reproducibility contract
        g = np.random.default_rng(int(s[b]))
        accept[b], sample[b] = g.random(K), g.random()
    return Uniforms(accept, sample)


def _check_seeds(seeds: Any, draft_tokens: Any) -> np.ndarray:
    s = np.asarray(seeds)
    B = int(np.shape(draft_tokens)[0])
    if s.shape != (B,):
        raise InputError("seeds", f"shape (B,) = ({B},), one seed per row", f"shape {s.shape}")
    return s


def verify_seeded(
    target_probs: np.ndarray,
    draft_probs: np.ndarray | None,
    draft_tokens: np.ndarray,
    num_draft: np.ndarray,
    *,
    seeds: Sequence[int] | np.ndarray,
    validate: bool = True,
) -> Verification:
    """:func:`specviz.verify` with each row's randomness from its own request's seed, ``seeds`` (B,).

    The same request gives the same tokens alone or in any batch.
    """
    s = _check_seeds(seeds, draft_tokens)
    u = seeded_uniforms(s, int(np.shape(draft_tokens)[1]))
    return verify(target_probs, draft_probs, draft_tokens, num_draft, uniforms=u, validate=validate)


def verify_seeded_first_request(
    target_probs: np.ndarray,
    draft_probs: np.ndarray | None,
    draft_tokens: np.ndarray,
    num_draft: np.ndarray,
    *,
    seeds: Sequence[int] | np.ndarray,
    validate: bool = True,
) -> Verification:
    """The ``seed_of_first_request`` mistake: every row draws from the *first* row's seed."""
    s = _check_seeds(seeds, draft_tokens)
    u = seeded_uniforms(np.full_like(s, s[0]) if s.size else s, int(np.shape(draft_tokens)[1]))
    return verify(target_probs, draft_probs, draft_tokens, num_draft, uniforms=u, validate=validate)


# --- the entries tested directly ------------------------------------------------------------------


def coin_at_most(u: Any, px: Any, qx: Any) -> Any:
    """inclusive_coin: accept iff u * q(x) <= p(x) (the reference's accept step with <= for <)."""
    return reference.Coins(u, (qx > 0) & (u * qx <= px))


class Fault(NamedTuple):
    name: str
    title: str
    verifier: Callable[..., Any] | None  # the faulty function, where there is one
    explanation: str
    caught_by: str
    changes_law: bool  # False: no sampling test can see it


FAULTS: dict[str, Fault] = {
    f.name: f
    for f in [
        Fault(
            "inclusive_coin",
            "Accept when u * q(x) <= p(x)",
            reference.with_step(reference.verify, "inclusive_coin", accept=coin_at_most),
            "The coin test uses <= instead of <, and the uniform may be exactly 0. Then a draft with "
            "p(x) = 0 and q(x) > 0 passes 0 * q(x) <= 0 and is accepted: the engine emits a token the "
            "target rules out (banned by top-k or top-p, say). With a continuous uniform this has "
            "probability 0, so the output law is exactly the target's and no sampling test can see it. "
            "Real uniforms are not continuous: NumPy's Generator.random returns multiples of 2^-53, 0 "
            "among them (once in 2^53 coins), and a float32 uniform built from 24 random bits is 0 once "
            "in 2^24 = 16,777,216 coins, which a busy server meets. The strict test u * q(x) < p(x) "
            "never accepts a token with p(x) = 0, whatever u is.",
            "a direct test with a coin of exactly 0 on a draft with p(x) = 0 (tests/test_engine_bugs.py); "
            "its exact law with continuous uniforms is the target's (TV 0), so no chi-square catches it",
            False,
        ),
        Fault(
            "nan_row",
            "A target row of NaN",
            None,
            "Processing a row whose logits are all -inf (every token banned) divides 0 by 0: the softmax "
            "is NaN. A sampler that searches a NaN running sum finds no index where it passes u and "
            "returns the end of the row, token id V, which does not exist. specviz refuses the row "
            "instead: process_logits raises on an all -inf row, and verify (validate True or False, "
            "NumPy or torch) raises InputError when a row it reads is NaN, as do the verifiers of the "
            "bug catalogue, but one: unclamped_residual with validate=False searches the NaN running sum "
            "itself and falls through to its last token, V - 1. None of them emits a token outside [0, V).",
            "a direct test of verify and every verifier in specviz.proof.bugs.BUGS on a NaN row, NumPy and "
            "torch (tests/test_engine_bugs.py): robustness, not law",
            False,
        ),
        Fault(
            "seed_of_first_request",
            "Per-request seeds, but only the first one used",
            verify_seeded_first_request,
            "Each request carries its own seed so that it can be reproduced, but the batched kernel seeds "
            "one generator from the first row's seed and hands every row the same stream. Each row's law "
            "is still the target's, but two requests in one batch are no longer independent (with the same "
            "inputs they emit the same tokens), and a request's output depends on which request happened "
            "to be first in its batch. verify_seeded draws each row from its own seed: a request gives the "
            "same tokens alone and in any batch.",
            "a direct test: the same request alone and batched with another seed (tests/test_engine_bugs.py); "
            "each row's law is the target's, so no test of one row's law catches it",
            False,
        ),
    ]
}
