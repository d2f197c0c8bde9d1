"""Ragged batches of the real model's rows: several contexts, each row its own drafter and drafts.

# B rows, K drafts (padded width), V vocabulary

Row b continues its context c_b: its drafter proposes k_b <= num_draft[b] tokens x_1..x_k with
their q rows (the law each was drawn from), and the target gives p_0..p_k, its processed
next-token rows after c_b, c_b + x_1, ..., c_b + x_1..x_k, from one forward over the k + 1
positions. That is exactly what one speculative round hands the verifier, for B requests at
once: the *Batch* page verifies such a batch on NumPy and torch, and ``prove --model``
(:func:`pool_source`) hands such rows to a verifier in place of the synthetic large-V rows.

A prompt-lookup row may propose fewer drafts than asked (no earlier match: none), so
``num_draft`` is what was proposed. Padding, never read by a verifier: target rows past
num_draft[b] repeat row num_draft[b], draft rows past it are uniform, draft tokens are -1.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ..errors import InputError
from ..verifiers.processing import Settings, process_logits
from ..verifiers.verify import PAD_TOKEN

if TYPE_CHECKING:
    from .drafters import Drafter
    from .llama import Llama

PROMPTS = (  # short, varied contexts: prose, code, a list, dialogue, numbers
    "A hash table is a data structure that",
    'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
    "The three most important rules of writing clearly are",
    "Once upon a time, in a small village by the sea,",
    "Ingredients: 2 cups of flour, 1 cup of sugar,",
    "Q: What is the capital of France?\nA:",
    "import numpy as np\n\nx = np.arange(10)\nprint(",
    "The mitochondria is the powerhouse of the cell because",
)


class RealBatch(NamedTuple):
    """A padded ragged batch of the model's rows, as one speculative round gives them."""

    target_probs: np.ndarray  # (B, K+1, V) float64 processed p rows (padding: row num_draft[b] repeated)
    draft_probs: np.ndarray  # (B, K, V) float64 q rows (padding: uniform)
    draft_tokens: np.ndarray  # (B, K) int64, -1 past num_draft
    num_draft: np.ndarray  # (B,) int64 drafts proposed, <= those asked
    contexts: list[list[int]]  # (B,) the token ids each row continues
    drafters: list[str]  # (B,) each row's drafter, by name
    draft_seconds: float  # wall time of every row's drafting
    target_seconds: float  # wall time of every row's target pass (forward and processing)


def ragged_rows(
    llama: Llama,
    contexts: Sequence[Sequence[int]],
    drafters: Sequence[Drafter],
    num_draft: Sequence[int] | np.ndarray,
    settings: Settings,
    rng: np.random.Generator,
) -> RealBatch:
    """Row b: ``drafters[b]`` proposes up to ``num_draft[b]`` tokens after ``contexts[b]``, drawing
    from ``rng``; the target (``llama`` at the request's ``settings``) gives its k_b + 1 rows.

    One target session serves every row (a context that extends the previous row's reuses its cache).
    """
    from .llama import Session

    B = len(contexts)
    j = np.asarray(num_draft, dtype=np.int64).reshape(-1)
    if B < 1 or len(drafters) != B or j.shape != (B,) or (j < 0).any():
        raise InputError("batch", "B >= 1 contexts, as many drafters and num_draft counts >= 0",
                         f"{B} contexts, {len(drafters)} drafters, num_draft {j.tolist()[:8]}")  # fmt: skip
    if not isinstance(settings, Settings):
        raise InputError("settings", "a specviz.Settings (the request's settings)", type(settings).__name__)
    V, K = llama.config.vocab_size, int(j.max())
    target = Session(llama)
    P = np.empty((B, K + 1, V))  # (B, K+1, V)
    Q = np.full((B, K, V), 1.0 / V)  # (B, K, V)
    X = np.full((B, K), PAD_TOKEN, dtype=np.int64)  # (B, K)
    got = np.zeros(B, dtype=np.int64)
    seqs: list[list[int]] = []
    draft_s = target_s = 0.0
    for b in range(B):
        seq = [int(t) for t in contexts[b]]
        if not seq:
            raise InputError("contexts", "at least one token per row", f"an empty context at row {b}")
        seqs.append(seq)
        tokens: list[int] = []
        if j[b]:
            w = time.perf_counter()
            d = drafters[b].propose(seq, int(j[b]), rng)
            draft_s += time.perf_counter() - w
            tokens, k = list(d.tokens), len(d.tokens)
            Q[b, :k], X[b, :k] = d.probs, tokens
        k = got[b] = len(tokens)
        w = time.perf_counter()
        P[b, : k + 1] = process_logits(target.logits(seq + tokens, rows=k + 1).numpy(), settings)  # (k+1, V)
        target_s += time.perf_counter() - w
        P[b, k + 1 :] = P[b, k]
    return RealBatch(P, Q, X, got, seqs, [d.name for d in drafters], draft_s, target_s)


def prompt_contexts(encode: Callable[[str], list[int]], B: int, prompts: Sequence[str] = PROMPTS) -> list[list[int]]:
    """B contexts: the prompts in turn; a prompt's second use is it cut a quarter shorter, and so on
    (real, different contexts that share their cache with the prompt's first use)."""
    if isinstance(B, bool) or not isinstance(B, int | np.integer) or B < 1:
        raise InputError("B", "an integer >= 1 (rows)", repr(B))
    full = [encode(p) for p in prompts]
    out = []
    for b in range(int(B)):
        ids, use = full[b % len(full)], b // len(full)
        out.append(ids[: max(1, len(ids) - use * max(1, len(ids) // 4))])
    return out
