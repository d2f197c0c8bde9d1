"""Speculative sampling rounds on the real model, measured.

# K drafts asked for, k <= K proposed, V vocabulary

One round after a sequence ``ids`` (its last token not yet in the target's KV cache):

1. the drafter proposes k <= K tokens x_1..x_k with their q rows (:mod:`specviz.models.drafters`);
2. the target runs **one** forward over the k + 1 positions [ids[-1], x_1, ..., x_k] and gives
   its rows p_0..p_k after the request's processing (:func:`specviz.process_logits`);
3. :func:`specviz.verify` (or any verifier of its signature) accepts, rejects and draws the
   replacement or bonus with explicit uniforms, so a round is a function of its uniforms;
4. the target's cache is rolled back to ids + the accepted drafts: the rejected drafts' keys and
   values are dropped, and the emitted replacement or bonus is the next round's pending token.

Each :class:`Round` carries what a page shows and what the cost model needs: the drafts, p(x),
q(x), the coins, what was accepted and emitted, sum_x min(p, q) per position (the acceptance
probability there: the measured acceptance is compared with it), and the seconds spent drafting,
in the target's pass, processing its rows and in the verifier call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..verifiers.processing import Settings, process_logits
from ..verifiers.verify import Uniforms, verify
from .drafters import Drafter
from .llama import Llama, Session


class Rows(NamedTuple):
    probs: np.ndarray  # (k + 1, V) float64 processed target rows p_0..p_k
    seconds: float  # wall time of the forward over the k + 1 positions
    cpu_seconds: float
    process_seconds: float  # wall time of process_logits on the rows


class Target:
    """The target model's side of the rounds: a KV-cached session and the request's settings."""

    def __init__(self, model: Llama, settings: Settings) -> None:
        if not isinstance(settings, Settings):
            raise InputError("settings", "a specviz.Settings (the request's settings)", type(settings).__name__)
        self.session = Session(model)
        self.settings = settings

    def prepare(self, ids: Sequence[int]) -> None:
        """Prefill: the cache holds every token of ``ids`` but the last (the first round's pending one)."""
        if len(ids) > 1:
            self.session.logits(list(ids)[:-1])

    def rows(self, ids: Sequence[int], drafts: Sequence[int]) -> Rows:
        """p_0..p_k (k + 1, V): the processed next-token rows after ids, ids + x_1, ..., ids + x_1..x_k."""
        w, c = time.perf_counter(), time.thread_time()
        logits = self.session.logits([*ids, *drafts], rows=len(drafts) + 1).numpy()  # (k + 1, V) float32
        w2, c2 = time.perf_counter(), time.thread_time()
        probs = process_logits(logits, self.settings)  # (k + 1, V) float64
        return Rows(probs, w2 - w, c2 - c, time.perf_counter() - w2)

    def rollback(self, length: int) -> None:
        self.session.rollback(length)


class Round(NamedTuple):
    """One measured round. Lists run over the k proposed drafts unless said otherwise."""

    drafts: list[int]
    p_draft: list[float]  # p_i(x_i)
    q_draft: list[float]  # q_i(x_i)
    coins: list[float]  # the acceptance uniform at each tested position, NaN past the first rejection
    accepted: int  # drafts kept
    emitted: list[int]  # the accepted drafts, then the replacement or the bonus
    bonus: bool  # every draft survived and the last emitted token is the bonus
    overlap: list[float]  # sum_x min(p_i(x), q_i(x)): the probability that position i accepts
    expected_tokens: float  # E[tokens | these drafts] = 1 + sum_i prod_{j<=i} min(1, p_j(x_j)/q_j(x_j))
    draft_seconds: float  # proposing the drafts (wall)
    draft_cpu_seconds: float
    target_seconds: float  # the target's forward over k + 1 positions (wall)
    target_cpu_seconds: float
    process_seconds: float  # process_logits on the target's k + 1 rows
    verify_seconds: float  # the verifier call
    target_probs: np.ndarray | None  # (k + 1, V) p rows (None unless kept)
    draft_probs: np.ndarray | None  # (k, V) q rows (None unless kept)


def round_uniforms(rng: np.random.Generator, K: int) -> Uniforms:
    """A round's verifier uniforms: K coins (1, K), then the replacement/bonus draw (1,)."""
    return Uniforms(accept=rng.random((1, K)), sample=rng.random(1))


def speculative_round(
    target: Target,
    drafter: Drafter,
    ids: Sequence[int],
    K: int,
    rng: np.random.Generator,
    *,
    uniforms: Uniforms | None = None,
    verifier: Callable[..., Any] = verify,
    keep_rows: bool = False,
) -> Round:
    """One draft-and-verify round after ``ids`` (see the module docstring).

    ``rng`` draws the drafts; the verifier's uniforms are ``uniforms`` (accept (1, K), sample
    (1,)) if given, else :func:`round_uniforms` from ``rng`` after the drafts. A drafter that
    proposes k < K tokens uses the first k coins. The target's cache ends holding ids + the
    accepted drafts.
    """
    ids = [int(t) for t in ids]
    if not ids:
        raise InputError("ids", "at least one token (the prompt)", "an empty sequence")
    draft = drafter.propose(ids, K, rng)
    k = len(draft.tokens)
    if uniforms is None:
        uniforms = round_uniforms(rng, K)
    accept, sample = np.asarray(uniforms.accept, dtype=np.float64), np.asarray(uniforms.sample, dtype=np.float64)
    if accept.shape != (1, K) or sample.shape != (1,):
        raise InputError("uniforms", f"accept of shape (1, {K}) and sample of shape (1,)",
                         f"{accept.shape} and {sample.shape}")  # fmt: skip
    rows = target.rows(ids, draft.tokens)
    P, Q = rows.probs, draft.probs  # (k + 1, V), (k, V)
    w = time.perf_counter()
    res = verifier(P[None], Q[None], np.array([draft.tokens], dtype=np.int64).reshape(1, k), np.array([k]),
                   uniforms=Uniforms(accept[:, :k], sample))  # fmt: skip
    verify_seconds = time.perf_counter() - w
    acc, num = int(np.asarray(res.num_accepted)[0]), int(np.asarray(res.num_tokens)[0])
    target.rollback(len(ids) + acc)
    px = [float(P[i, x]) for i, x in enumerate(draft.tokens)]
    qx = [float(Q[i, x]) for i, x in enumerate(draft.tokens)]
    ratio = [min(1.0, a / b) if b > 0 else 0.0 for a, b in zip(px, qx, strict=True)]
    return Round(
        drafts=list(draft.tokens), p_draft=px, q_draft=qx,
        coins=[float(u) for u in np.asarray(res.accept_uniforms)[0]], accepted=acc,
        emitted=[int(t) for t in np.asarray(res.tokens)[0, :num]], bonus=bool(np.asarray(res.bonus)[0]),
        overlap=[float(v) for v in np.minimum(P[:k], Q).sum(axis=1)],
        expected_tokens=1.0 + float(np.cumprod(ratio).sum()),
        draft_seconds=draft.seconds, draft_cpu_seconds=draft.cpu_seconds,
        target_seconds=rows.seconds, target_cpu_seconds=rows.cpu_seconds, process_seconds=rows.process_seconds,
        verify_seconds=verify_seconds,
        target_probs=P if keep_rows else None, draft_probs=Q if keep_rows else None,
    )  # fmt: skip


def round_rng(seed: int, round_index: int) -> np.random.Generator:
    """The random source of one round: a function of (seed, round), so a run is reproduced by its seed."""
    return np.random.default_rng([int(seed), int(round_index)])


def run(
    target: Target,
    drafter: Drafter,
    prompt: Sequence[int],
    K: int,
    seed: int,
    *,
    max_tokens: int,
    stop: Sequence[int] = (),
    keep_rows: bool = False,
) -> Iterator[Round]:
    """Rounds after ``prompt`` until ``max_tokens`` are emitted or a ``stop`` token is: a generator,
    so a caller streams each round as it comes and stops by not asking for more. Round r draws from
    :func:`round_rng` (seed, r). The last round's tokens may run past ``max_tokens``."""
    if int(max_tokens) < 1:
        raise InputError("max_tokens", "an integer >= 1", str(max_tokens))
    ids = [int(t) for t in prompt]
    target.prepare(ids)
    drafter.prepare(ids)
    emitted, r = 0, 0
    stops = {int(t) for t in stop}
    while emitted < int(max_tokens):
        step = speculative_round(target, drafter, ids, K, round_rng(seed, r), keep_rows=keep_rows)
        yield step
        ids += step.emitted
        emitted += len(step.emitted)
        r += 1
        if stops.intersection(step.emitted):
            return
