"""Shared builders for verifier tests: context-dependent, non-uniform, with zeros."""

from __future__ import annotations

import numpy as np
import pytest


def random_probs(rng: np.random.Generator, shape: tuple[int, ...], zero_fraction: float = 0.0) -> np.ndarray:
    """Dirichlet rows of the last axis, with a fraction of exact zeros (never a whole row)."""
    x = rng.gamma(0.5, size=shape)
    if zero_fraction:
        x[rng.random(shape) < zero_fraction] = 0.0
        x[..., 0] += x.sum(-1) == 0  # keep every row a distribution
    return x / x.sum(-1, keepdims=True)


def random_batch(
    rng: np.random.Generator,
    B: int,
    K: int,
    V: int,
    *,
    zero_fraction: float = 0.2,
    ragged: bool = True,
    dtype: type = np.float64,
):
    """(target (B,K+1,V), draft (B,K,V), tokens (B,K), num_draft (B,)) with tokens drawn from q."""
    target = random_probs(rng, (B, K + 1, V), zero_fraction).astype(dtype)
    draft = random_probs(rng, (B, K, V), zero_fraction).astype(dtype)
    cdf = np.cumsum(draft.astype(np.float64), -1)
    u = rng.random((B, K, 1)) * cdf[..., -1:]
    tokens = np.minimum((cdf <= u).sum(-1), V - 1)
    num = rng.integers(0, K + 1, size=B) if ragged else np.full(B, K)
    tokens = np.where(np.arange(K)[None, :] < num[:, None], tokens, -1)
    return target, draft, tokens, num


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261130)
