"""Exact conversions between the padded and the flat (indptr) ragged layouts.

# B rows, K drafts (padded width), V vocabulary, N total drafts

Padded: ``target_probs`` (B, K+1, V), ``draft_probs`` (B, K, V), ``draft_tokens`` (B, K),
``num_draft`` (B,). Flat: ``target_probs`` (N+B, V) with row b's K_b + 1 rows contiguous
from ``draft_indptr[b] + b``, ``draft_probs`` (N, V), ``draft_tokens`` (N,),
``draft_indptr`` (B+1,). See :func:`specviz.verify_flat`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._types import Array
from ..errors import InputError


class PaddedBatch(NamedTuple):
    target_probs: Array  # (B, K+1, V)
    draft_probs: Array | None  # (B, K, V)
    draft_tokens: Array  # (B, K), -1 past num_draft
    num_draft: Array  # (B,)


class FlatBatch(NamedTuple):
    target_probs: Array  # (N+B, V)
    draft_probs: Array | None  # (N, V)
    draft_tokens: Array  # (N,)
    draft_indptr: Array  # (B+1,)


def padded_to_flat(
    target_probs: np.ndarray, draft_probs: np.ndarray | None, draft_tokens: np.ndarray, num_draft: np.ndarray
) -> FlatBatch:
    """Drop the padding: keep row b's first num_draft[b] drafts and num_draft[b]+1 target rows."""
    target_probs, draft_tokens = np.asarray(target_probs), np.asarray(draft_tokens)
    num_draft = np.asarray(num_draft, dtype=np.int64)
    if draft_tokens.ndim != 2 or num_draft.shape != draft_tokens.shape[:1]:
        raise InputError("num_draft", "shape (B,) matching draft_tokens (B, K)",
                         f"{num_draft.shape} and {draft_tokens.shape}")  # fmt: skip
    B, K = draft_tokens.shape
    if target_probs.ndim != 3 or target_probs.shape[:2] != (B, K + 1):
        raise InputError("target_probs", f"shape (B, K+1, V) with B = {B}, K = {K}", str(target_probs.shape))
    if B and (num_draft.min() < 0 or num_draft.max() > K):
        raise InputError("num_draft", f"draft counts in [0, {K}]", f"{num_draft.min()}..{num_draft.max()}")
    valid = np.arange(K)[None, :] < num_draft[:, None]  # (B, K)
    valid_t = np.arange(K + 1)[None, :] <= num_draft[:, None]  # (B, K+1)
    indptr = np.concatenate([[0], np.cumsum(num_draft)]).astype(np.int64)
    return FlatBatch(
        target_probs=target_probs[valid_t],  # (N+B, V), row-major order keeps rows contiguous
        draft_probs=None if draft_probs is None else np.asarray(draft_probs)[valid],  # (N, V)
        draft_tokens=draft_tokens[valid].astype(np.int64),  # (N,)
        draft_indptr=indptr,
    )


def flat_to_padded(
    target_probs: np.ndarray, draft_probs: np.ndarray | None, draft_tokens: np.ndarray, draft_indptr: np.ndarray
) -> PaddedBatch:
    """Pad to K = max K_b: unused draft tokens are -1, unused probability rows are 0."""
    target_probs, draft_tokens = np.asarray(target_probs), np.asarray(draft_tokens)
    indptr = np.asarray(draft_indptr, dtype=np.int64)
    N = len(draft_tokens)
    if indptr.ndim != 1 or len(indptr) < 1 or indptr[0] != 0 or indptr[-1] != N:
        raise InputError("draft_indptr", f"(B+1,) offsets from 0 to N = {N}", f"{indptr.tolist()[:8]}")
    num_draft = np.diff(indptr)  # (B,)
    if (num_draft < 0).any():
        raise InputError("draft_indptr", "non-decreasing offsets", f"{indptr.tolist()[:8]}")
    B, V = len(num_draft), target_probs.shape[-1]
    if target_probs.shape[0] != N + B:
        raise InputError("target_probs", f"N + B = {N + B} rows", f"{target_probs.shape[0]}")
    K = int(num_draft.max()) if B else 0
    valid = np.arange(K)[None, :] < num_draft[:, None]  # (B, K)
    valid_t = np.arange(K + 1)[None, :] <= num_draft[:, None]  # (B, K+1)
    tokens = np.full((B, K), -1, dtype=np.int64)
    tokens[valid] = draft_tokens
    target = np.zeros((B, K + 1, V), dtype=target_probs.dtype)
    target[valid_t] = target_probs
    draft = None
    if draft_probs is not None:
        draft = np.zeros((B, K, V), dtype=np.asarray(draft_probs).dtype)
        draft[valid] = draft_probs
    return PaddedBatch(target, draft, tokens, num_draft)
