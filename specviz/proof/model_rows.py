"""``prove --model smollm2``: the real model's rows in place of the synthetic large-V ones.

# B rows, K drafts (padded width), V vocabulary (49,152 for SmolLM2), R rows in the pool

:func:`specviz.proof.handover.realistic_tables` makes up rows shaped like a model's. This
module takes them from one: SmolLM2-135M (:mod:`specviz.models`) after several prompts
(:data:`specviz.models.batch.PROMPTS`, each also cut shorter), each continued by several real
drafters: the same weights at a hotter temperature, early exit after a few and after most
layers, and prompt lookup (q one-hot). Each (context, drafter) is one speculative round's
input (:func:`specviz.models.batch.ragged_rows`): the drafter's K tokens and their q rows, and
the target's K + 1 processed rows p (temperature 1, top-p 0.95, so p has exact zeros where q
has not, and the other way round). That pool of R rows is built once (seconds per row on a
CPU); each table the paired test, the sweep or the black-box tests ask for is B rows drawn from
it, with ragged draft counts, in the asked dtype.

What this covers and what it does not: every p and q row is the model's and the drafter's own
law after a real context; the paired test then draws fresh drafts from each q row as given (as
it does for synthetic rows), so a row's later positions keep the context of the drafts first
proposed. The verifier's law is judged per step on those rows, which is what the verifier sees.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ..errors import InputError
from .handover import Tables, _round_to

MODELS = ("smollm2",)
CONTEXTS = 4  # prompts (each a context); with the four drafters below, 16 rows in the pool
EARLY_LAYERS = (8, 24)  # of SmolLM2's 30: far from p (a = 0.1) and near it (a = 0.3-0.4)
HOT_TEMPERATURE = 1.5  # the same weights, hotter: a = 0.6


class ModelSource:
    """A pool of the model's rows at K drafts, and tables of B rows drawn from it (a table source)."""

    def __init__(self, K: int, *, seed: int = 0, contexts: int = CONTEXTS,
                 progress: Callable[[str], None] | None = None) -> None:  # fmt: skip
        from .. import models
        from ..models.batch import prompt_contexts, ragged_rows
        from ..verifiers.processing import Settings

        reason = models.missing()
        if reason is not None:
            raise models.ModelUnavailable(reason)
        if isinstance(K, bool) or not isinstance(K, int | np.integer) or not 1 <= K <= 8:
            raise InputError("K", "an integer in [1, 8] (drafts per row)", repr(K))
        t0 = time.perf_counter()
        model = models.load()
        llama = model.llama
        request = Settings(temperature=1.0, top_p=0.95)
        drafters: list[models.Drafter] = [models.SameModel(llama, Settings(temperature=HOT_TEMPERATURE)),
                    *(models.EarlyExit(llama, L, request) for L in EARLY_LAYERS),
                    models.PromptLookup(llama.config.vocab_size)]  # fmt: skip
        ctx = prompt_contexts(model.encode, contexts)
        rows_ctx = [c for c in ctx for _ in drafters]
        rows_drafters = [d for _ in ctx for d in drafters]
        if progress is not None:
            progress(f"model rows: {len(rows_ctx)} rounds of SmolLM2 at K = {K} (a few seconds each on a CPU)")
        batch = ragged_rows(llama, rows_ctx, rows_drafters, np.full(len(rows_ctx), K), request,
                            np.random.default_rng([seed, 28]))  # fmt: skip
        self.K, self.V = int(K), llama.config.vocab_size
        self.batch = batch
        self.seconds = time.perf_counter() - t0
        self.description = (f"SmolLM2-135M's rows: {len(ctx)} prompts x {len(drafters)} drafters ("
                            + ", ".join(d.name for d in drafters) + "), target T = 1, top-p 0.95")  # fmt: skip

    def __call__(self, K: int, B: int, *, seed: int, dtype: str) -> Tables:
        """B rows drawn from the pool, K <= the pool's drafts, ragged counts (row 0 none, the last all it has)."""
        if not 1 <= K <= self.K:
            raise InputError("K", f"1 to the pool's K = {self.K}", str(K))
        rng = np.random.default_rng([seed, 29])
        pool = self.batch
        have = np.minimum(pool.num_draft, K)  # (R,)
        full = np.flatnonzero(have == K)
        pick = rng.integers(0, len(have), size=B)  # (B,)
        if full.size:
            pick[-1] = full[rng.integers(full.size)]  # at least one row with every draft
        j = np.minimum(rng.integers(0, K + 1, size=B), have[pick])
        most = rng.random(B) < 0.5  # half the rows with every draft they have, the rest ragged
        j[most] = have[pick][most]
        j[0], j[-1] = 0, have[pick[-1]]
        target = _round_to(pool.target_probs[pick, : K + 1], dtype)  # (B, K+1, V)
        draft = _round_to(pool.draft_probs[pick, :K], dtype)  # (B, K, V)
        return Tables(target, draft, j.astype(np.int64), np.cumsum(draft, axis=-1))


def source(name: str, K: int, *, seed: int = 0, progress: Callable[[str], None] | None = None) -> ModelSource:
    """The table source of ``--model name`` at K drafts."""
    if name not in MODELS:
        raise InputError("--model", "one of " + ", ".join(MODELS), repr(name))
    return ModelSource(K, seed=seed, progress=progress)
