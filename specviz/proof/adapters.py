"""Adapters: engines' verifier conventions behind :func:`specviz.verify`'s signature.

# B rows, K drafts (padded width), V vocabulary, N total drafts (flat layout)

Each adapter takes a function written in one engine's convention and returns a verifier
with :func:`specviz.verify`'s arguments, so ``prove``, the paired test, the probes and the
sweep run it unchanged. ``--verifier vllm:M:F``, ``--verifier flashinfer:M:F`` and
``--verifier hf`` (Hugging Face's own function; ``hf:M:F`` for one written like it) name them.

- **vLLM style** (:func:`from_vllm`): ``fn(draft_token_ids (N,) int32, cu_num_draft_tokens
  (B,) int32, draft_probs (N, V) or None, target_probs (N, V), bonus_token_ids (B, 1) int32,
  uniforms=(accept (N,), sample (B,)))`` returns ``output_token_ids`` (B, K+1) int32 with -1
  placeholders. The flat layout holds the target rows of the drafts only; the bonus token is
  sampled outside, as vLLM's sampler does, here by the reference from target row num_draft[b]
  with the row's sample uniform (the same uniform the rule uses for its one draw per row).
  cu_num_draft_tokens[b] is the inclusive running count: row b owns drafts
  cu[b-1]:cu[b].
- **FlashInfer's chain_speculative_sampling** (:func:`from_flashinfer`): draft first,
  ``fn(draft_probs (B, K, V), draft_token_ids (B, K) int32, uniform_samples (B, K+1),
  target_probs (B, K+1, V))`` returns ``(output_token_ids (B, K+1), output_accepted_token_num
  (B,), output_emitted_token_num (B,))``; every row has K drafts, so the adapter calls it
  once per draft count in the batch. Its uniforms are ours side by side, (accept, sample);
  FlashInfer draws the replacement with column min(first rejection + 1, K), another valid
  convention, so the paired test sees mismatches where the sweep sees the right law. The
  emitted count must equal the emitted drafts, and the accepted count (every coin that
  passed, after the first rejection too) at least that: the adapter checks both.
- **Hugging Face's _speculative_sampling** (:func:`from_hf`): logits in, one sequence at a
  time, ``fn(candidate_input_ids (1, j), candidate_logits (1, j, V), candidate_length j,
  new_logits (1, j+1, V), assistant_ensemble_weight)`` returns ``(valid_tokens (1, n+1),
  n_matches)``. It draws from torch's global generator (``torch.rand_like``,
  ``torch.multinomial``), so the adapter takes ``rng`` only (seeding a forked torch generator
  from it) and refuses ``uniforms``: the black-box tests judge it. Logits are log(p) (-inf
  at zeros), so softmax gives back the rows.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..verifiers.verify import PAD_TOKEN
from .handover import as_numpy, reference_verify

ADAPTERS = ("vllm", "flashinfer", "hf")


class Result(NamedTuple):
    """What the adapters return: the fields prove and the paired test read."""

    tokens: np.ndarray  # (B, K+1) int64, -1 after num_tokens
    num_tokens: np.ndarray  # (B,)
    num_accepted: np.ndarray  # (B,)


def _torch() -> Any:
    import torch

    return torch


def _tensor(a: Any, device: Any = None) -> Any:
    t = _torch()
    out = a if isinstance(a, t.Tensor) else t.from_numpy(np.require(np.asarray(a), requirements=["C", "W"]))
    return out.to(device=device or out.device)


def _uniforms(rng: Any, uniforms: Any, B: int, K: int) -> tuple[np.ndarray, np.ndarray]:
    """(accept (B, K), sample (B,)) float64 NumPy: the given ones, or drawn from ``rng``."""
    if uniforms is not None:
        return as_numpy(uniforms[0]).astype(np.float64), as_numpy(uniforms[1]).astype(np.float64)
    t = _torch()
    if isinstance(rng, t.Generator):
        return (t.rand((B, K), generator=rng, dtype=t.float64).numpy(),
                t.rand((B,), generator=rng, dtype=t.float64).numpy())  # fmt: skip
    g = rng if rng is not None else np.random.default_rng()
    return g.random((B, K)), g.random(B)


def _result(tokens: np.ndarray) -> Result:
    tokens = tokens.astype(np.int64)
    n = (tokens != PAD_TOKEN).sum(axis=1)
    return Result(tokens, n, n - 1)


def from_vllm(fn: Callable[..., Any]) -> Callable[..., Result]:
    """A vLLM-style rejection sampler as a verifier of :func:`specviz.verify`'s signature."""

    def verifier(target_probs: Any, draft_probs: Any, draft_tokens: Any, num_draft: Any, *, rng: Any = None,
                 uniforms: Any = None, validate: bool = True) -> Result:  # fmt: skip
        P = _tensor(target_probs)
        device = P.device
        x, j = as_numpy(draft_tokens).astype(np.int64), as_numpy(num_draft).astype(np.int64)
        B, K = x.shape
        ua, us = _uniforms(rng, uniforms, B, K)
        valid = np.arange(K)[None, :] < j[:, None]  # (B, K)
        vb, vk = np.nonzero(valid)  # row-major: each row's drafts contiguous
        t = _torch()
        ib, ik = _tensor(vb, device=device), _tensor(vk, device=device)
        target_rows = P[ib, ik]  # (N, V)
        Q = None if draft_probs is None else _tensor(draft_probs)[ib, ik]
        bonus_rows = P[t.arange(B, device=device), _tensor(j, device=device)]  # (B, V)
        if bonus_rows.dtype != t.float64:  # half precision read as float32, the engine's type for it
            bonus_rows = bonus_rows.float()
        ref_rows = as_numpy(bonus_rows)
        V = ref_rows.shape[1]
        res = reference_verify(ref_rows[:, None], np.zeros((B, 0, V), ref_rows.dtype), np.zeros((B, 0), np.int64),
                               np.zeros(B, np.int64), uniforms=(np.zeros((B, 0)), us), validate=validate)
        bonus = as_numpy(res.tokens)[:, 0]  # (B,) sampled outside, from target row num_draft[b]
        cu = _tensor(np.cumsum(j).astype(np.int32), device=device)  # (B,) inclusive
        out = fn(_tensor(x[valid].astype(np.int32), device=device), cu, Q, target_rows,
                 _tensor(bonus.astype(np.int32)[:, None], device=device),
                 uniforms=(_tensor(ua[valid], device=device), _tensor(us, device=device)))  # fmt: skip
        tokens = as_numpy(out).astype(np.int64)
        if tokens.ndim != 2 or tokens.shape[0] != B or not 1 <= tokens.shape[1] <= K + 1:
            raise InputError("output_token_ids", f"shape (B, max drafts + 1) with B = {B}, at most {K + 1} wide",
                             str(tokens.shape))  # fmt: skip
        pad = np.full((B, K + 1 - tokens.shape[1]), PAD_TOKEN, dtype=np.int64)  # max_spec_len may be below K
        return _result(np.concatenate([tokens, pad], axis=1))

    verifier.__name__ = f"vllm({getattr(fn, '__name__', 'fn')})"
    return verifier


def from_flashinfer(fn: Callable[..., Any]) -> Callable[..., Result]:
    """A function in FlashInfer's chain_speculative_sampling convention as a verifier."""

    def verifier(target_probs: Any, draft_probs: Any, draft_tokens: Any, num_draft: Any, *, rng: Any = None,
                 uniforms: Any = None, validate: bool = True) -> Result:  # fmt: skip
        if draft_probs is None:
            raise InputError("draft_probs", "the draft rows (FlashInfer's chain sampling takes them)", "None")
        P, Q = _tensor(target_probs), _tensor(draft_probs)
        x, j = as_numpy(draft_tokens).astype(np.int64), as_numpy(num_draft).astype(np.int64)
        B, K = x.shape
        ua, us = _uniforms(rng, uniforms, B, K)
        tokens = np.full((B, K + 1), PAD_TOKEN, dtype=np.int64)
        for k in np.unique(j):  # one call per draft count: FlashInfer has no ragged rows
            rows = np.flatnonzero(j == k)
            r = _tensor(rows, device=P.device)
            u = np.concatenate([ua[rows, :k], us[rows, None]], axis=1)  # (G, k+1): coins, then the sample
            out, accepted, emitted = fn(Q[r, :k], _tensor(x[rows, :k].astype(np.int32), device=P.device),
                                        _tensor(u, device=P.device), P[r, : k + 1])  # fmt: skip
            out, accepted, emitted = as_numpy(out), as_numpy(accepted), as_numpy(emitted)
            n = (out != PAD_TOKEN).sum(axis=1)
            if out.shape != (len(rows), k + 1) or (n != emitted + 1).any() or (accepted < emitted).any():
                raise InputError("chain_speculative_sampling result",
                                 "tokens (B, K+1) with emitted + 1 tokens and accepted >= emitted",
                                 f"shape {out.shape}, tokens {n.tolist()}, emitted {emitted.tolist()}, "
                                 f"accepted {accepted.tolist()}")  # fmt: skip
            tokens[rows, : k + 1] = out
        return _result(tokens)

    verifier.__name__ = f"flashinfer({getattr(fn, '__name__', 'fn')})"
    return verifier


def hf_function() -> Callable[..., Any]:
    """transformers' own ``_speculative_sampling`` (InputError when transformers is not installed)."""
    try:
        from transformers.generation.utils import _speculative_sampling
    except ImportError as e:
        raise InputError("--verifier hf", "transformers installed (pip install transformers)",
                         f"{type(e).__name__}: {e}") from e  # fmt: skip
    return _speculative_sampling


def from_hf(fn: Callable[..., Any], *, assistant_ensemble_weight: float | None = None) -> Callable[..., Result]:
    """A Hugging Face-style ``_speculative_sampling`` as a verifier (rng only: it draws its own uniforms)."""

    def verifier(target_probs: Any, draft_probs: Any, draft_tokens: Any, num_draft: Any, *, rng: Any = None,
                 uniforms: Any = None, validate: bool = True) -> Result:  # fmt: skip
        if uniforms is not None:
            raise TypeError("the Hugging Face function draws from torch's generator: it takes no uniforms=")
        t = _torch()
        P = _tensor(target_probs).double()
        Q = None if draft_probs is None else _tensor(draft_probs).double()
        x, j = as_numpy(draft_tokens).astype(np.int64), as_numpy(num_draft).astype(np.int64)
        B, K = x.shape
        V = P.shape[-1]
        if Q is None:  # a deterministic drafter: q one-hot on the draft
            Q = t.nn.functional.one_hot(_tensor(np.clip(x, 0, V - 1)), V).double()
        seed = int((rng if rng is not None else np.random.default_rng()).integers(1 << 62)) \
            if not isinstance(rng, t.Generator) else int(t.randint(1 << 62, (1,), generator=rng))  # fmt: skip
        tokens = np.full((B, K + 1), PAD_TOKEN, dtype=np.int64)
        with t.random.fork_rng(devices=[]), np.errstate(divide="ignore"):
            t.manual_seed(seed)
            logp, logq = P.log(), Q.log()  # -inf at zeros
            for b in range(B):
                k = int(j[b])
                ids = _tensor(x[b : b + 1, :k])
                out, n = fn(ids, logq[b : b + 1, :k], k, logp[b : b + 1, : k + 1],
                            assistant_ensemble_weight=assistant_ensemble_weight)  # fmt: skip
                row = as_numpy(out).reshape(-1)
                if row.size != int(n) + 1:
                    raise InputError("_speculative_sampling result", f"n_matches + 1 = {int(n) + 1} tokens",
                                     f"{row.size}")  # fmt: skip
                tokens[b, : row.size] = row
        return _result(tokens)

    weight = "" if assistant_ensemble_weight is None else f", ensemble {assistant_ensemble_weight}"
    verifier.__name__ = f"hf({getattr(fn, '__name__', 'fn')}{weight})"
    return verifier


def _load(spec: str) -> Callable[..., Any]:
    mod, _, name = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError) as e:
        raise InputError("--verifier", f"an importable module:function, got {spec!r}",
                         f"{type(e).__name__}: {e}") from e  # fmt: skip
    return fn


def resolve(spec: str, load: Callable[[str], Callable[..., Any]] = _load) -> tuple[Callable[..., Any], str] | None:
    """``--verifier`` by adapter name: ``hf``, ``hf:M:F``, ``vllm:M:F``, ``flashinfer:M:F``; None otherwise.

    ``load`` turns ``M:F`` into the function (the CLI passes its own loader).
    """
    head, sep, rest = spec.partition(":")
    if head not in ADAPTERS:
        return None
    _torch()  # every adapter runs torch: imported now, so prove sets its threads before the first call
    if head == "hf" and not sep:
        return from_hf(hf_function()), "hf (transformers' _speculative_sampling)"
    if not rest:
        raise InputError("--verifier", f"{head}:module:function", repr(spec))
    wrap = {"vllm": from_vllm, "flashinfer": from_flashinfer, "hf": from_hf}[head]
    return wrap(load(rest)), spec
