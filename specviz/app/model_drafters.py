"""The real model's drafters by name, with the *Real text* n-grams retrained on its token ids.

# V vocabulary (the model's, 49,152 for SmolLM2)

:mod:`specviz.models.drafters` holds the drafters; this module picks one from a page's choice and
builds the cheap one: :class:`specviz.app.text.NGram`, the page's Witten-Bell n-gram, trained on
the same corpus (Python's documentation topics) tokenized by the model's own tokenizer (113,000
tokens; 0.4 s the first time in a process), so its V is the model's and its drafts are token ids
the target can verify.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from ..verifiers.processing import Settings
from . import text

if TYPE_CHECKING:
    from ..models import Drafter, SmolLM2

# NGram codes an n-gram as an int64 in base V: V**order must stay below 2**63 (49152**4 = 5.7e18,
# 49152**5 overflows), so order 4 is the longest the model's vocabulary allows.
MAX_TOKEN_ORDER = 4
KINDS = ("same", "early", "lookup", "ngram")  # SameModel, EarlyExit, PromptLookup, the token n-gram


@functools.cache
def _token_ngram(model: SmolLM2, order: int) -> text.NGram:
    ids = np.asarray(model.encode(text.corpus()), dtype=np.int64)
    return text.NGram(ids, order, V=model.llama.config.vocab_size)


def token_ngram(model: SmolLM2, order: int = 3) -> text.NGram:
    """The *Real text* n-gram of ``order`` over the model's token ids (cached per model and order)."""
    if isinstance(order, bool) or not isinstance(order, int) or not 1 <= order <= MAX_TOKEN_ORDER:
        raise InputError("order", f"an integer from 1 to {MAX_TOKEN_ORDER} (V**order must fit in int64)", repr(order))
    return _token_ngram(model, order)


def drafter(kind: str, model: SmolLM2, settings: Settings, *, layers: int = 24, order: int = 3) -> Drafter:
    """A fresh drafter (its own KV cache) of ``kind`` in :data:`KINDS`, drawing at ``settings``.

    ``layers``: the early-exit depth; ``order``: the n-gram's. Prompt lookup ignores ``settings``
    (its drafts are copies, q one-hot).
    """
    from .. import models

    if kind == "same":
        return models.SameModel(model.llama, settings)
    if kind == "early":
        return models.EarlyExit(model.llama, layers, settings)
    if kind == "lookup":
        return models.PromptLookup(model.llama.config.vocab_size)
    if kind == "ngram":
        return models.CallableDrafter(token_ngram(model, order), model.llama.config.vocab_size, settings,
                                      f"token {order}-gram (Real text's n-gram on the model's tokens)")  # fmt: skip
    raise InputError("kind", f"one of {', '.join(KINDS)}", repr(kind))
