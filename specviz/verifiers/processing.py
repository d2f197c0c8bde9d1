"""Sampling settings: temperature, top-k, top-p (nucleus) and min-p, from logits to probabilities.

# B rows (any leading shape), K drafts, V vocabulary

What speculative sampling must match. Plain decoding with a request's settings samples each
token from ``process_logits(logits, request)``; *that* is the target p of a lossless
verifier, not the raw softmax. The draft distribution q is exactly the law each draft token
was drawn from: ``process_logits(draft_logits, drafter_settings)``, whatever settings the
drafter used. p and q need not match each other: the verifier corrects any q (a mismatch only
costs acceptance, sum_x min(p(x), q(x))), but it cannot correct a q it was told wrongly, nor
a p that is not what plain decoding would sample (:func:`output_law` computes what comes out
then).

The steps, applied in this order (each to the renormalized result of the previous one):

1. **temperature** T: softmax(logits / T), computed as softmax((logits - max) / T) so that
   huge logits and tiny temperatures stay finite (a gap too large for float64 gives
   probability 0). T = 0 is greedy: all mass on the argmax, the lowest token id among ties
   (as :func:`specviz.verify_greedy` does); the filters below then have nothing left to
   remove. A positive T so small that every gap overflows (1e-320) is the limit T -> 0+:
   the mass is shared equally by the tokens tied at the maximum, not given to the lowest id.
2. **top-k** k: keep the tokens whose logit is at least the k-th largest; ties at the k-th
   value are all kept (so more than k tokens may survive). k = 0 or k >= V keeps everything.
3. **top-p** P: keep token x iff the probability of the tokens *strictly more likely* than x
   is below P. That is the smallest set of most likely tokens whose mass reaches P, extended
   to every token tied with its least likely member, so the result does not depend on how a
   sort orders ties. P = 1 keeps everything.
4. **min-p** m: keep the tokens whose probability is at least m times the largest one.

A logit of ``-inf`` is a token the model rules out: probability 0, never kept by a filter.
NaN and ``+inf`` logits, and a row whose logits are all ``-inf``, have no distribution and
raise :class:`~specviz.errors.InputError` (a softmax would return NaN there, and a sampler
then emits whatever its search lands on).

Engines differ in the order of these steps and in how they break ties; specviz states its
own, and losslessness holds for any fixed choice as long as p is the choice plain decoding
makes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._types import Array
from ..errors import InputError
from ._xp import check_dense, is_torch


@dataclass(frozen=True)
class Settings:
    """One side's sampling settings (a request's, or the drafter's).

    ``temperature`` >= 0 (0 is greedy); ``top_k`` >= 0 (0: off); ``top_p`` in (0, 1]
    (1: off); ``min_p`` in [0, 1] (0: off).
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0

    def __post_init__(self) -> None:
        t, k, p, m = self.temperature, self.top_k, self.top_p, self.min_p
        if not (isinstance(t, int | float) and np.isfinite(t) and t >= 0):
            raise InputError("temperature", "a finite number >= 0 (0 is greedy)", repr(t))
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 0:
            raise InputError("top_k", "an integer >= 0 (0 keeps every token)", repr(k))
        if not (isinstance(p, int | float) and 0 < p <= 1):
            raise InputError("top_p", "a number in (0, 1] (1 keeps every token)", repr(p))
        if not (isinstance(m, int | float) and 0 <= m <= 1):
            raise InputError("min_p", "a number in [0, 1] (0 keeps every token)", repr(m))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


DEFAULT = Settings()


def process_logits(logits: Array, settings: Settings = DEFAULT) -> Array:
    """The probabilities plain decoding with ``settings`` samples from.

    Parameters
    ----------
    logits
        Shape (..., V): NumPy array or torch tensor of any float dtype; ``-inf`` allowed.
    settings
        :class:`Settings`.

    Returns
    -------
    Array
        Shape (..., V), float64, of the input's kind and device; every row sums to 1.
        Torch tensors are processed on the CPU by the same NumPy code (the sort, the running
        sums and the ties then agree exactly between the two), and returned on their device.
    """
    if not isinstance(settings, Settings):
        raise InputError("settings", "a specviz.verifiers.processing.Settings", type(settings).__name__)
    if is_torch(logits):
        import torch

        check_dense(logits, "logits")
        out = _process_np(logits.detach().to("cpu", torch.float64).numpy(), settings)
        return torch.from_numpy(out).to(logits.device)
    try:
        z = np.asarray(logits, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise InputError("logits", "an array of numbers (..., V)", f"{type(logits).__name__}: {e}") from e
    return _process_np(z, settings)


def _process_np(z: np.ndarray, s: Settings) -> np.ndarray:
    if z.ndim < 1 or z.shape[-1] < 1:
        raise InputError("logits", "shape (..., V) with V >= 1", f"shape {z.shape}")
    if np.isnan(z).any() or np.isposinf(z).any():
        raise InputError("logits", "finite logits or -inf", "NaN or +inf entries")
    alive = z > -np.inf  # (..., V)
    if not alive.any(-1).all():
        raise InputError("logits", "at least one finite logit per row", "a row of all -inf")
    V = z.shape[-1]
    if s.greedy:
        return np.eye(V)[np.argmax(z, axis=-1)]  # argmax: the lowest id among ties
    # The maximum first: z - max is <= 0, so dividing by any T > 0 (even a subnormal one such
    # as 1e-320) gives a value in [-inf, 0] and never inf - inf = NaN. A gap that overflows
    # is -inf: probability 0, the limit of softmax((z - max) / T) as the gap grows.
    with np.errstate(over="ignore"):
        z = np.where(alive, (z - z.max(-1, keepdims=True)) / s.temperature, -np.inf)  # (..., V) <= 0
    if 0 < s.top_k < V:
        kth = -np.partition(-z, s.top_k - 1, axis=-1)[..., s.top_k - 1 : s.top_k]  # (..., 1) k-th largest
        z = np.where(z >= kth, z, -np.inf)
    probs = _softmax(z)
    if s.top_p < 1:
        probs = _renorm(np.where(_mass_above(probs) < s.top_p, probs, 0.0))
    if s.min_p > 0:
        probs = _renorm(np.where(probs >= s.min_p * probs.max(-1, keepdims=True), probs, 0.0))
    return probs


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(-1, keepdims=True))  # exp(-inf) = 0
    return e / e.sum(-1, keepdims=True)


def _renorm(w: np.ndarray) -> np.ndarray:
    return w / w.sum(-1, keepdims=True)  # the most likely token always survives: the sum is > 0


def _mass_above(probs: np.ndarray) -> np.ndarray:
    """(..., V): for each token, the total probability of the tokens strictly more likely.

    Sorted descending, the exclusive running sum at the *first* of a run of tied values is
    the mass strictly above that value; every member of the run takes it.
    """
    order = np.argsort(-probs, axis=-1, kind="stable")  # (..., V)
    s = np.take_along_axis(probs, order, -1)
    excl = np.cumsum(s, axis=-1) - s  # (..., V) mass before each sorted position
    V = s.shape[-1]
    idx = np.broadcast_to(np.arange(V), s.shape)
    new_run = np.concatenate([np.ones(s.shape[:-1] + (1,), bool), s[..., 1:] != s[..., :-1]], axis=-1)
    first = np.maximum.accumulate(np.where(new_run, idx, 0), axis=-1)  # (..., V) start of each run
    above_sorted = np.take_along_axis(excl, first, -1)
    out = np.empty_like(above_sorted)
    np.put_along_axis(out, order, above_sorted, -1)
    return out


def output_law(target_probs: Array, drafted_from: Array, reported_q: Array | None = None) -> np.ndarray:
    """Exact law (V,) of the first emitted token when a draft drawn from ``drafted_from`` is
    verified against ``target_probs`` with ``reported_q`` as q (default: the true one).

    Emitted by acceptance: q(x) min(1, p(x)/r(x)) with r the reported q; by replacement:
    (1 - sum_y q(y) min(1, p(y)/r(y))) times the residual (p - r)+ normalized (p itself if
    that has no mass). With r = q the law is p exactly; any other r moves it. All (V,).
    """
    p = np.asarray(target_probs, dtype=np.float64)
    q = np.asarray(drafted_from, dtype=np.float64)
    r = q if reported_q is None else np.asarray(reported_q, dtype=np.float64)
    if not p.shape == q.shape == r.shape or p.ndim != 1:
        raise InputError("drafted_from", f"three (V,) rows like target_probs {p.shape}", f"{q.shape}, {r.shape}")
    ratio = np.where(r > 0, np.minimum(1.0, p / np.where(r > 0, r, 1.0)), 0.0)
    accept = q * ratio
    res = np.maximum(p - r, 0.0)
    res = res / res.sum() if res.sum() > 0 else p
    return accept + (1.0 - accept.sum()) * res
