"""Speculative sampling with your own pair of models: two local Hugging Face causal LMs.

    python examples/hf_pair.py [TARGET DRAFTER] [--prompt TEXT] [--K 4] [--tokens 40]
                               [--temperature 1.0] [--top-k 0] [--top-p 1.0] [--seed 0]
    python examples/hf_pair.py gpt2-medium gpt2 --prompt "The quick brown fox"

# B rows (histories), T positions, K drafts per round, V vocabulary (the shared tokenizer's ids)

The protocol (:data:`specviz.app.text.Model`): a model is any callable from a batch of histories
(B lists of token ids) to next-token logits (B, V), NumPy or torch, over a vocabulary the two
models share. :func:`specviz.app.text.step` drafts K tokens with the drafter (one call per draft),
asks the target once for the K + 1 rows it needs, and verifies them with :func:`specviz.verify`;
:func:`specviz.app.text.generate` does the same for n rows at once; :func:`specviz.app.text.target_law`
gives the target's exact law of the next tokens. Both models see the same sampling settings.

:func:`causal_lm_model` turns a causal LM's forward pass (ids (B, T), mask (B, T) -> logits
(B, T, V')) into such a callable. The K + 1 histories of one target call are prefixes of one
another, so they are read from a single forward pass over the longest; histories that are not
prefixes of each other are right-padded: in a causal model the logits at position t see only
positions <= t, so the padding never reaches the row that is read. Logits wider than V (vocab
sizes padded for speed) are cut to the tokenizer's V. No KV cache: every call re-reads the
whole history, which is what keeps the wrapper short, not fast.

Offline only: the weights are loaded with ``local_files_only=True`` and HF_HUB_OFFLINE=1, so a
model missing from the local cache is reported and skipped (exit status 0, "skipped: ..."),
never downloaded; so is a machine without ``torch`` or ``transformers``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

try:
    import specviz  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz import InputError
from specviz.app.text import Model, Step, tokens_per_call, transcript
from specviz.verifiers.processing import Settings

# forward(ids (B, T) int64, attention_mask (B, T) int64) -> logits (B, T, V'), torch tensors
Forward = Callable[[Any, Any], Any]


def causal_lm_model(forward: Forward, V: int, *, pad_id: int = 0, device: str = "cpu") -> Model:
    """Wrap a causal LM's forward pass as a :data:`specviz.app.text.Model`: histories -> logits (B, V).

    ``forward`` must be causal (the logits at position t depend on ids[:t + 1] only): that is what
    makes reading a prefix from a longer or right-padded row exact. Returns float64 NumPy logits.
    """
    import torch

    if int(V) < 2:
        raise InputError("V", "a vocabulary of at least 2 tokens", str(V))

    def model(histories: Sequence[Sequence[int]]) -> np.ndarray:
        hist = [[int(t) for t in h] for h in histories]
        if not hist:
            raise InputError("histories", "at least one history", "none")
        lengths = [len(h) for h in hist]
        if min(lengths) == 0:
            raise InputError("histories", "non-empty histories (a causal LM needs a first token)", "an empty one")
        longest = hist[int(np.argmax(lengths))]
        if all(h == longest[: len(h)] for h in hist):  # one target call of step(): K + 1 prefixes
            rows, ids = [0] * len(hist), [longest]
        else:
            rows, ids = list(range(len(hist))), hist
        T = max(len(h) for h in ids)
        tok = torch.full((len(ids), T), int(pad_id), dtype=torch.long)  # (R, T), R rows run
        mask = torch.zeros((len(ids), T), dtype=torch.long)
        for r, h in enumerate(ids):
            tok[r, : len(h)] = torch.tensor(h, dtype=torch.long)
            mask[r, : len(h)] = 1
        with torch.inference_mode():
            logits = forward(tok.to(device), mask.to(device))  # (R, T, V')
        if logits.ndim != 3 or logits.shape[:2] != (len(ids), T) or logits.shape[2] < V:
            raise InputError("forward", f"logits of shape (R, T, >= V) = ({len(ids)}, {T}, >= {V})",
                             str(tuple(logits.shape)))  # fmt: skip
        picked = logits[torch.tensor(rows), torch.tensor(lengths) - 1, :V]  # (B, V)
        return picked.double().cpu().numpy()

    return model


def run(
    target: Model,
    drafter: Model,
    prompt: Sequence[int],
    *,
    K: int,
    tokens: int,
    settings: Settings,
    seed: int,
    V: int,
) -> list[Step]:
    """Draft-and-verify rounds after ``prompt`` until ``tokens`` tokens are out (round r: seed, r)."""
    if not prompt:
        raise InputError("prompt", "at least one token", "an empty prompt")
    return transcript(target, drafter, prompt, K, settings, seed, until=int(tokens), V=V)


def report(steps: Sequence[Step], decode: Callable[[Sequence[int]], str]) -> list[str]:
    """One line per round (drafts, how many were accepted, what came out), then tokens per target call."""
    lines = []
    for r, s in enumerate(steps, start=1):
        drafts = " | ".join(repr(decode([x])) for x in s.drafts)
        kind = "bonus" if s.bonus else "replacement"
        lines.append(f"round {r:3d}: drafts {drafts}  accepted {s.accepted}/{len(s.drafts)}  "
                     f"emitted {decode(s.emitted)!r} (last: {kind})")  # fmt: skip
    measured, expected = tokens_per_call(steps)
    lines.append(f"{sum(len(s.emitted) for s in steps)} tokens in {len(steps)} target calls: "
                 f"{measured:.3f} tokens per call (exact expectation for the drafts met: {expected:.3f})")  # fmt: skip
    return lines


class Skip(Exception):
    """What this machine lacks to run the example (reported as "skipped: ...", status 0)."""


def load_pair(target_name: str, drafter_name: str, device: str) -> tuple[Model, Model, Any, int]:
    """(target, drafter, tokenizer, V) from the local Hugging Face cache; never downloads."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise Skip("torch is not installed (pip install '.[torch]')") from e
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        raise Skip("transformers is not installed (specviz does not need it; pip install transformers)") from e
    loaded = []
    for name in (target_name, drafter_name):
        try:
            tok = AutoTokenizer.from_pretrained(name, local_files_only=True)
            lm = AutoModelForCausalLM.from_pretrained(name, local_files_only=True).to(device).eval()
        except OSError as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise Skip(
                f"{name!r} is not in the local Hugging Face cache and specviz never downloads "
                f"(fetch it yourself, e.g. huggingface-cli download {name}): {first}"
            ) from e
        loaded.append((tok, lm))
    (tok_t, lm_t), (tok_d, lm_d) = loaded
    if tok_t.get_vocab() != tok_d.get_vocab():
        got = f"{target_name} ({len(tok_t)} tokens) and {drafter_name} ({len(tok_d)} tokens), whose ids differ"
        raise InputError("models", "two models with the same tokenizer (the same ids)", got)
    V = len(tok_t)
    pad = tok_t.pad_token_id if tok_t.pad_token_id is not None else 0

    def forward_of(lm: Any) -> Forward:
        return lambda ids, mask: lm(input_ids=ids, attention_mask=mask).logits

    return (causal_lm_model(forward_of(lm_t), V, pad_id=pad, device=device),
            causal_lm_model(forward_of(lm_d), V, pad_id=pad, device=device), tok_t, V)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("target", nargs="?", default="gpt2-medium", help="target model name or local path")
    ap.add_argument("drafter", nargs="?", default="gpt2", help="drafter model name or local path (same tokenizer)")
    ap.add_argument("--prompt", default="Speculative sampling is")
    ap.add_argument("--K", type=int, default=4, help="drafts per round")
    ap.add_argument("--tokens", type=int, default=40, help="tokens to generate")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    try:
        settings = Settings(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p)
        target, drafter, tok, V = load_pair(args.target, args.drafter, args.device)
        prompt = tok(args.prompt).input_ids
        steps = run(target, drafter, prompt, K=args.K, tokens=args.tokens, settings=settings, seed=args.seed, V=V)
    except Skip as e:
        print(f"skipped: {e}")
        return 0
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"target {args.target}, drafter {args.drafter}, V = {V}, K = {args.K}, prompt {args.prompt!r}")
    for line in report(steps, tok.decode):
        print(line)
    print("text:", repr(args.prompt + tok.decode([t for s in steps for t in s.emitted])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
