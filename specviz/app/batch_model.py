"""The Batch page's real rows: several prompts, each row its own number of drafts, on SmolLM2.

# B rows, K drafts (padded width), V vocabulary (the model's, 49,152)

Row b continues prompt b (:func:`specviz.models.batch.prompt_contexts`): the chosen drafter
proposes num_draft[b] tokens with their q rows and the target gives its num_draft[b] + 1
processed rows p (temperature 1, top-p 0.95), exactly one speculative round per row
(:func:`specviz.models.batch.ragged_rows`). The page then verifies the padded batch in one call
on NumPy and on torch with the same uniforms, as for random rows, and shows each row's text.
Without the model (:func:`specviz.models.missing`) the page keeps its random rows and says how
to install it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..verifiers.processing import Settings
from ..verifiers.verify import Verification
from . import model_drafters

SOURCE = "real model (SmolLM2)"
MAX_ROWS = 8  # each row costs its drafts and one target pass (about 1 s of CPU at K = 4): a click that answers
REQUEST = Settings(temperature=1.0, top_p=0.95)  # the target's processing (what plain decoding samples)
HOT_TEMPERATURE = 1.5  # the same-model drafter's
EARLY_LAYERS = 24  # of 30: the early-exit drafter's depth (a = 0.3-0.4 on these prompts)
DRAFTERS = {  # the page's labels for model_drafters.KINDS
    "early": f"early exit ({EARLY_LAYERS} of 30 layers)",
    "same": f"same model at T = {HOT_TEMPERATURE:g} (costly)",
    "lookup": "prompt lookup",
    "ngram": "token 3-gram",
}


def missing() -> str | None:
    """None when the model can run here; otherwise what to install (no loading)."""
    from .. import models

    reason = models.missing()
    return None if reason is None else f"The real model is not installed here: {reason}"


def vocab() -> int:
    """The model's vocabulary V (loads the model, once per process)."""
    from .. import models

    return int(models.load().llama.config.vocab_size)


class ModelRows(NamedTuple):
    target_probs: np.ndarray  # (B, K+1, V) float64
    draft_probs: np.ndarray  # (B, K, V) float64
    draft_tokens: np.ndarray  # (B, K) int64, -1 past num_draft
    num_draft: np.ndarray  # (B,) drafts proposed (prompt lookup may propose fewer than asked)
    prompts: list[str]  # (B,) each row's context as text


def make_rows(B: int, K: int, num_draft: np.ndarray, drafter: str, seed: int) -> ModelRows:
    """B rows of the model's, padded to K: row b's drafter proposes up to num_draft[b] tokens."""
    from .. import models
    from ..models.batch import prompt_contexts, ragged_rows

    if drafter not in DRAFTERS:
        raise InputError("drafter", "one of " + ", ".join(DRAFTERS), repr(drafter))
    if not 1 <= B <= MAX_ROWS:
        raise InputError("B", f"1 to {MAX_ROWS} rows with the real model (each row is a model round)", str(B))
    j = np.asarray(num_draft, dtype=np.int64)
    if j.shape != (B,) or (j.size and (j.min() < 0 or j.max() > K)):
        raise InputError("num_draft", f"(B,) = ({B},) counts in [0, {K}]", f"{j.tolist()[:8]}")
    model = models.load()
    settings = Settings(temperature=HOT_TEMPERATURE) if drafter == "same" else REQUEST
    d = model_drafters.drafter(drafter, model, settings, layers=EARLY_LAYERS)
    contexts = prompt_contexts(model.encode, B)
    rows = ragged_rows(model.llama, contexts, [d] * B, j, REQUEST, np.random.default_rng([seed, 3]))
    V, width = model.llama.config.vocab_size, rows.draft_tokens.shape[1]
    P = np.empty((B, K + 1, V))  # (B, K+1, V): padded from the batch's own width to the page's K
    P[:, : width + 1] = rows.target_probs
    P[:, width + 1 :] = rows.target_probs[:, -1:]
    Q = np.full((B, K, V), 1.0 / V)  # (B, K, V)
    Q[:, :width] = rows.draft_probs
    X = np.full((B, K), -1, dtype=np.int64)  # (B, K)
    X[:, :width] = rows.draft_tokens
    return ModelRows(P, Q, X, rows.num_draft, [model.decode(c) for c in contexts])


def row_table(rows: ModelRows, shown: Verification, agrees: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """One line per shown row: its prompt, the drafts and what was emitted as text, and whether
    each backend emitted NumPy's tokens for it (``agrees``: backend -> (R,) bool)."""
    from .. import models

    model = models.load()
    out = []
    for b in range(len(np.asarray(shown.num_tokens))):
        k, n = int(rows.num_draft[b]), int(shown.num_tokens[b])
        line = {
            "row": b,
            "prompt": rows.prompts[b][-60:],
            "drafts": " | ".join(model.token_strings(rows.draft_tokens[b, :k])),
            "accepted": f"{int(shown.num_accepted[b])} of {k}",
            "emitted": " | ".join(model.token_strings(np.asarray(shown.tokens)[b, :n])),
        }
        for backend, same in agrees.items():
            line[f"{backend} = NumPy"] = "yes" if same[b] else "NO"
        out.append(line)
    return out
