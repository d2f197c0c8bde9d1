"""Drafters for the real model: one small interface, four ways to propose tokens.

# K drafts asked for, k <= K proposed, V vocabulary

A drafter proposes up to K tokens after a sequence and says the law each was drawn from: its q
rows, exactly (the verifier corrects any q, but not a q it is told wrongly). ``propose`` returns
a :class:`Draft`; the verifier needs nothing else.

- :class:`SameModel`: the target's own weights at other sampling settings (a hotter temperature,
  say). Accepts often, but each draft costs a full target token: **costly**, it cannot speed
  anything up; it is there to show acceptance as a function of how far q is from p.
- :class:`EarlyExit`: the first L of the model's layers, then its final norm and output head.
  Cheaper per draft in proportion to L, and never trained to agree with the full model: the
  lesson of a drafter whose q is far from p.
- :class:`PromptLookup`: copies what followed the last occurrence-in-context of the sequence's
  final n-gram (Hugging Face's prompt lookup: the earliest earlier match of the longest n-gram,
  n from ``max_ngram`` down to ``min_ngram``). Deterministic: q is one-hot on each draft, and
  a sequence with no repeated n-gram gets no drafts (the round is then plain decoding).
- :class:`CallableDrafter`: any model with the protocol of :data:`specviz.app.text.Model`
  (histories -> (B, V) logits), such as the n-gram models of the *Real text* page trained on the
  model's token ids: the cheap drafter.

Every drafter draws its tokens with the ``rng`` it is given, one uniform per draft, by inverse
CDF over its processed q row (:func:`sample`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

import numpy as np

from ..errors import InputError
from ..verifiers.processing import Settings, process_logits
from .llama import Llama, Session


class Draft(NamedTuple):
    tokens: list[int]  # (k,) k <= K proposed tokens
    probs: np.ndarray  # (k, V) float64: the law each token was drawn from (one-hot for a deterministic drafter)
    seconds: float  # wall time of proposing them
    cpu_seconds: float  # CPU time of the calling thread (torch runs at one thread, on it)


class Drafter(Protocol):
    name: str
    costly: bool  # each draft costs about a target token: no speedup is possible
    deterministic: bool  # q is one-hot on each draft

    def propose(self, ids: Sequence[int], K: int, rng: np.random.Generator) -> Draft: ...

    def prepare(self, ids: Sequence[int]) -> None:
        """Process a prompt ahead of the first round (a KV cache's prefill), so rounds cost only drafting."""


def sample(q: np.ndarray, u: float) -> int:
    """The token an inverse CDF over q (V,) gives for the uniform u in [0, 1): never one with q = 0."""
    cdf = np.cumsum(q)
    return int(np.searchsorted(cdf, u * cdf[-1], side="right").clip(0, q.size - 1))


def _check_K(K: int) -> int:
    if isinstance(K, bool) or not isinstance(K, int | np.integer) or K < 1:
        raise InputError("K", "an integer >= 1 (drafts per round)", repr(K))
    return int(K)


def _autoregressive(next_logits: Callable[[list[int]], np.ndarray], settings: Settings, ids: Sequence[int], K: int,
                    rng: np.random.Generator) -> Draft:  # fmt: skip
    """K drafts one at a time: each from q = the drafter's processed logits after ids + the drafts so far."""
    K = _check_K(K)
    w, c = time.perf_counter(), time.thread_time()
    seq = [int(t) for t in ids]
    tokens: list[int] = []
    rows = []
    for _ in range(K):
        q = process_logits(next_logits(seq + tokens), settings)  # (V,) float64
        rows.append(q)
        tokens.append(sample(q, float(rng.random())))
    return Draft(tokens, np.stack(rows), time.perf_counter() - w, time.thread_time() - c)


class _ModelDrafter:
    """Draft K tokens one at a time from a KV-cached session of the model (all layers or the first L)."""

    costly = False
    deterministic = False

    def __init__(self, model: Llama, settings: Settings, layers: int | None, name: str) -> None:
        if not isinstance(settings, Settings):
            raise InputError("settings", "a specviz.Settings (the drafter's own sampling settings)",
                             type(settings).__name__)  # fmt: skip
        self.settings = settings
        self.session = Session(model, layers)
        self.name = name

    def prepare(self, ids: Sequence[int]) -> None:
        if len(ids) > 1:
            self.session.logits(list(ids)[:-1])

    def propose(self, ids: Sequence[int], K: int, rng: np.random.Generator) -> Draft:
        return _autoregressive(lambda seq: self.session.logits(seq)[0].numpy(), self.settings, ids, K, rng)


class SameModel(_ModelDrafter):
    """The target's own weights at the drafter's ``settings``: labelled costly (a draft costs a target token)."""

    costly = True

    def __init__(self, model: Llama, settings: Settings) -> None:
        super().__init__(model, settings, None, f"same model at T = {settings.temperature:g} (costly)")


class EarlyExit(_ModelDrafter):
    """The first ``layers`` blocks of the model, then its final norm and head, at ``settings``."""

    def __init__(self, model: Llama, layers: int, settings: Settings) -> None:
        n = model.config.n_layers
        if isinstance(layers, bool) or not isinstance(layers, int | np.integer) or not 1 <= layers < n:
            raise InputError("layers", f"an integer from 1 to {n - 1} (fewer than the model's {n})", repr(layers))
        super().__init__(model, settings, int(layers), f"early exit after {int(layers)} of {n} layers")
        self.layers = int(layers)


class PromptLookup:
    """Copy the continuation of the longest earlier match of the sequence's final n-gram (deterministic q)."""

    costly = False
    deterministic = True

    def __init__(self, V: int, max_ngram: int = 3, min_ngram: int = 1) -> None:
        if not 1 <= int(min_ngram) <= int(max_ngram):
            raise InputError("max_ngram", f"an integer >= min_ngram = {min_ngram} >= 1", str(max_ngram))
        self.V, self.max_ngram, self.min_ngram = int(V), int(max_ngram), int(min_ngram)
        self.name = f"prompt lookup ({self.min_ngram}- to {self.max_ngram}-grams)"

    def prepare(self, ids: Sequence[int]) -> None:
        return None

    def lookup(self, ids: Sequence[int], K: int) -> list[int]:
        """Up to K tokens: what followed the earliest earlier occurrence of the longest final n-gram."""
        seq = np.asarray([int(t) for t in ids], dtype=np.int64)
        L = seq.size
        for n in range(min(self.max_ngram, L - 1), self.min_ngram - 1, -1):
            tail = seq[L - n :]
            windows = np.lib.stride_tricks.sliding_window_view(seq[: L - 1], n)  # (L - n, n): starts 0 .. L - n - 1
            for start in np.flatnonzero((windows == tail).all(axis=1)):
                follow = seq[start + n : start + n + K]
                if follow.size:
                    return [int(t) for t in follow]
        return []

    def propose(self, ids: Sequence[int], K: int, rng: np.random.Generator) -> Draft:
        K = _check_K(K)
        w, c = time.perf_counter(), time.thread_time()
        tokens = self.lookup(ids, K)
        q = np.zeros((len(tokens), self.V))  # (k, V): one-hot on each draft, the law it was "drawn" from
        q[np.arange(len(tokens)), tokens] = 1.0
        return Draft(tokens, q, time.perf_counter() - w, time.thread_time() - c)


class CallableDrafter:
    """Any model with the ``histories -> (B, V) logits`` protocol (:data:`specviz.app.text.Model`) as a drafter."""

    costly = False
    deterministic = False

    def __init__(self, model: Callable[[Sequence[Sequence[int]]], np.ndarray], V: int, settings: Settings,
                 name: str) -> None:  # fmt: skip
        if not isinstance(settings, Settings):
            raise InputError("settings", "a specviz.Settings (the drafter's own sampling settings)",
                             type(settings).__name__)  # fmt: skip
        self.model, self.V, self.settings, self.name = model, int(V), settings, name

    def prepare(self, ids: Sequence[int]) -> None:
        return None

    def propose(self, ids: Sequence[int], K: int, rng: np.random.Generator) -> Draft:
        return _autoregressive(self._logits, self.settings, ids, K, rng)

    def _logits(self, seq: list[int]) -> np.ndarray:
        logits = np.asarray(self.model([seq]), dtype=np.float64)
        if logits.shape != (1, self.V):
            raise InputError("model", f"logits of shape (1, V) = (1, {self.V})", str(logits.shape))
        return logits[0]  # (V,)
