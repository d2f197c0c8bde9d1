"""A plain Llama forward in torch (nanoGPT-style), with a KV cache that rolls back.

# B rows, T new positions, L cached positions, D model width, H heads, G kv heads, E head width, V vocabulary

The architecture of SmolLM2 (and Llama 2/3): token embedding, then per layer
``x += attn(rmsnorm(x))`` and ``x += mlp(rmsnorm(x))``, a final RMSNorm and the output
projection (tied to the embedding when the file has no ``output.weight``). Attention uses
grouped queries (G kv heads, each shared by H / G query heads) and rotary position embeddings
in Hugging Face's half-split layout (:func:`rotate_half`); MLP is ``down(silu(gate(x)) * up(x))``.
Every operation is float32 and follows ``transformers``' LlamaModel op for op, so the logits
equal Hugging Face's on the same weights within float32 rounding (tests/test_models.py).

The forward runs at one torch thread (:func:`one_thread`): the model serves one request per
call on a small machine, and a second thread would compete with the other app processes.

:class:`Session` is the KV cache one sequence keeps between calls: it remembers which tokens it
holds, reuses the longest prefix it shares with the next request, and rolls back the rest, so a
speculative round that rejected drafts costs no recomputation of the accepted context.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import InputError
from ..verifiers.processing import Settings, process_logits

CACHE_CHUNK = 256  # the cache grows in blocks of this many positions (a copy per block, not per token)


@dataclass(frozen=True)
class Config:
    """The shape of a Llama model, as its GGUF metadata states it."""

    n_layers: int
    dim: int  # D
    n_heads: int  # H
    n_kv_heads: int  # G
    ffn_dim: int
    vocab_size: int  # V
    context_length: int
    rope_theta: float
    norm_eps: float

    @property
    def head_dim(self) -> int:  # E
        return self.dim // self.n_heads


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch at one intra-op thread inside the block, the process's setting restored after it."""
    before = torch.get_num_threads()
    if before != 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if before != 1:
            torch.set_num_threads(before)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Llama:
    """The forward pass over a dict of float32 weights named as in GGUF (``blk.{i}.attn_q.weight``...).

    The q and k projections must be in Hugging Face's half-split rotary layout (GGUF files store
    them interleaved; :mod:`specviz.models.smollm2` converts them once).
    """

    def __init__(self, config: Config, weights: dict[str, torch.Tensor]) -> None:
        self.config = config
        self.w = weights
        c = config
        # Rotary frequencies, as transformers computes them (float32 from an int64 arange).
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, c.head_dim, 2, dtype=torch.int64).float() / c.head_dim))
        self.inv_freq = inv_freq  # (E/2,)
        self.embed = weights["token_embd.weight"]  # (V, D)
        self.head = weights.get("output.weight", self.embed)  # (V, D), tied when the file has none
        names = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")
        self.layer_weights = [{n: weights[f"blk.{i}.{n}.weight"] for n in names} for i in range(c.n_layers)]

    def _rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions[:, None].float() * self.inv_freq[None, :]  # (T, E/2)
        emb = torch.cat((freqs, freqs), dim=-1)  # (T, E)
        return emb.cos(), emb.sin()

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        variance = x.pow(2).mean(-1, keepdim=True)
        return weight * (x * torch.rsqrt(variance + self.config.norm_eps))

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, cache: KVCache | None = None, layers: int | None = None) -> torch.Tensor:
        """Logits (B, T, V) float32 for ``ids`` (B, T) int64 placed after the cache's positions.

        ``cache``: the keys and values of the positions before (appended to in place); None: a
        fresh sequence. ``layers``: run only the first ``layers`` blocks, then the final norm and
        the output projection (early exit); the cache must have been built with the same count.
        Rows are right-padded sequences of one length each: a causal model's logits at position t
        never see later positions, so padding after a row's end does not change its rows.
        """
        c = self.config
        n = c.n_layers if layers is None else int(layers)
        if not 1 <= n <= c.n_layers:
            raise InputError("layers", f"1 to {c.n_layers} layers", str(layers))
        B, T = ids.shape
        start = 0 if cache is None else cache.length
        if start + T > c.context_length:
            raise InputError("ids", f"at most {c.context_length} positions in all", f"{start} cached + {T} new")
        if cache is not None and (cache.layers != n or cache.batch != B):
            raise InputError("cache", f"a cache of {n} layers and {B} rows", f"{cache.layers} and {cache.batch}")
        H, G, E = c.n_heads, c.n_kv_heads, c.head_dim
        cos, sin = self._rope(torch.arange(start, start + T))  # (T, E)
        # Causal mask over the cached positions and the new ones: position start + t sees 0 .. start + t.
        mask = torch.ones(T, start + T, dtype=torch.bool).tril(diagonal=start)  # (T, L + T)
        with one_thread():
            x = self.embed[ids]  # (B, T, D)
            for i in range(n):
                w = self.layer_weights[i]
                h = self._norm(x, w["attn_norm"])
                q = (h @ w["attn_q"].T).view(B, T, H, E).transpose(1, 2)  # (B, H, T, E)
                k = (h @ w["attn_k"].T).view(B, T, G, E).transpose(1, 2)  # (B, G, T, E)
                v = (h @ w["attn_v"].T).view(B, T, G, E).transpose(1, 2)  # (B, G, T, E)
                q = q * cos + rotate_half(q) * sin
                k = k * cos + rotate_half(k) * sin
                if cache is not None:
                    k, v = cache.append(i, k, v, start)  # (B, G, L + T, E)
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)  # (B, H, T, E)
                x = x + y.transpose(1, 2).reshape(B, T, c.dim) @ w["attn_output"].T
                h = self._norm(x, w["ffn_norm"])
                x = x + (F.silu(h @ w["ffn_gate"].T) * (h @ w["ffn_up"].T)) @ w["ffn_down"].T
            if cache is not None:
                cache.length = start + T
            return self._norm(x, self.w["output_norm.weight"]) @ self.head.T  # (B, T, V)

    def last_logits(self, prefixes: Sequence[Sequence[int]], layers: int | None = None) -> torch.Tensor:
        """Next-token logits (B, V) after each prefix: one forward over the right-padded batch, no cache."""
        seqs = _check_prefixes(prefixes, self.config.vocab_size)
        T = max(len(s) for s in seqs)
        ids = torch.zeros(len(seqs), T, dtype=torch.int64)  # (B, T), padded with token 0 after each row's end
        for b, s in enumerate(seqs):
            ids[b, : len(s)] = torch.tensor(s)
        out = self.forward(ids, None, layers)  # (B, T, V)
        return out[torch.arange(len(seqs)), torch.tensor([len(s) - 1 for s in seqs])]  # (B, V)


def _check_prefixes(prefixes: Sequence[Sequence[int]], V: int) -> list[list[int]]:
    seqs = [[int(t) for t in p] for p in prefixes]
    if not seqs or any(not s for s in seqs):
        raise InputError("prefixes", "a non-empty list of non-empty token lists", f"{len(seqs)} prefixes, "
                         f"{sum(not s for s in seqs)} empty")  # fmt: skip
    bad = [t for s in seqs for t in s if not 0 <= t < V]
    if bad:
        raise InputError("prefixes", f"token ids in [0, {V})", str(bad[:3]))
    return seqs


class KVCache:
    """Keys and values (B, G, capacity, E) per layer; positions past ``length`` are stale.

    :meth:`rollback` forgets the positions after a length in O(1): the next forward overwrites them.
    """

    def __init__(self, config: Config, layers: int, batch: int = 1) -> None:
        self.config, self.layers, self.batch = config, int(layers), int(batch)
        self.length = 0
        self.k: list[torch.Tensor] = []
        self.v: list[torch.Tensor] = []

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor, start: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Write k, v (B, G, T, E) at positions start .. start + T; return the layer's (B, G, start + T, E)."""
        B, G, T, E = k.shape
        end = start + T
        if layer == len(self.k):  # the layer's first use
            self.k.append(k.new_empty(B, G, 0, E))
            self.v.append(v.new_empty(B, G, 0, E))
        if self.k[layer].shape[2] < end:  # grow by whole chunks, keeping the valid positions
            cap = -(-end // CACHE_CHUNK) * CACHE_CHUNK
            grown_k, grown_v = k.new_empty(B, G, cap, E), v.new_empty(B, G, cap, E)
            grown_k[:, :, :start] = self.k[layer][:, :, :start]
            grown_v[:, :, :start] = self.v[layer][:, :, :start]
            self.k[layer], self.v[layer] = grown_k, grown_v
        self.k[layer][:, :, start:end] = k
        self.v[layer][:, :, start:end] = v
        return self.k[layer][:, :, :end], self.v[layer][:, :, :end]

    def rollback(self, length: int) -> None:
        """Keep the first ``length`` positions (0 <= length <= the current length)."""
        if not 0 <= int(length) <= self.length:
            raise InputError("length", f"0 to {self.length} (the cached positions)", str(length))
        self.length = int(length)


class Session:
    """One sequence's KV cache, kept between calls: next-token logits after prefixes of a sequence.

    The session knows which tokens its cache holds. A call for a sequence reuses the longest
    prefix the two share, rolls the cache back to it, and runs only the positions after it; so
    the next call after a speculative round (the accepted drafts kept, the rejected ones not)
    recomputes nothing that was accepted. ``layers`` < the model's count is an early-exit model.
    """

    def __init__(self, model: Llama, layers: int | None = None) -> None:
        self.model = model
        self.layers = model.config.n_layers if layers is None else int(layers)
        if not 1 <= self.layers <= model.config.n_layers:
            raise InputError("layers", f"1 to {model.config.n_layers} layers", str(layers))
        self.cache = KVCache(model.config, self.layers)
        self.tokens: list[int] = []  # what the cache holds, position by position

    @property
    def length(self) -> int:
        return self.cache.length

    def rollback(self, length: int) -> None:
        """Forget every position from ``length`` on (speculative decoding: back to the accepted length)."""
        self.cache.rollback(length)
        del self.tokens[int(length) :]

    def logits(self, seq: Sequence[int], rows: int = 1) -> torch.Tensor:
        """Next-token logits (rows, V) float32 after seq[:len - rows + 1], ..., after seq.

        Row j is the model's output at position len(seq) - rows + j. One forward over the
        positions the cache does not already hold (at least the ``rows`` asked for).
        """
        seq = _check_prefixes([seq], self.model.config.vocab_size)[0]
        if not 1 <= int(rows) <= len(seq):
            raise InputError("rows", f"1 to len(seq) = {len(seq)} rows", str(rows))
        first = len(seq) - int(rows)  # first position whose output is asked for
        keep = 0
        for a, b in zip(self.tokens, seq[:first], strict=False):
            if a != b:
                break
            keep += 1
        self.rollback(keep)
        new = seq[keep:]
        out = self.model.forward(torch.tensor([new], dtype=torch.int64), self.cache, self.layers)  # (1, T, V)
        self.tokens = list(seq)
        return out[0, len(new) - int(rows) :]  # (rows, V)

    def last_logits(self, prefixes: Sequence[Sequence[int]]) -> torch.Tensor:
        """Next-token logits (B, V) after each prefix. Prefixes of one sequence (a round's K + 1
        target rows, say) come from one cached call; others from one padded forward, uncached."""
        seqs = _check_prefixes(prefixes, self.model.config.vocab_size)
        longest = max(seqs, key=len)
        shortest = min(len(s) for s in seqs)
        if all(s == longest[: len(s)] for s in seqs):
            out = self.logits(longest, rows=len(longest) - shortest + 1)  # (rows, V)
            return out[torch.tensor([len(s) - shortest for s in seqs])]
        return self.model.last_logits(seqs, self.layers)


def next_probs(session: Session, prefixes: Sequence[Sequence[int]], settings: Settings) -> np.ndarray:
    """Next-token probabilities (B, V) float64 after each prefix, after the request's processing
    (:func:`specviz.process_logits`: temperature, top-k, top-p, min-p), through the session's cache."""
    return np.asarray(process_logits(session.last_logits(prefixes).numpy(), settings))
