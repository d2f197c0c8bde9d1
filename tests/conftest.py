"""Shared builders for verifier tests: context-dependent, non-uniform, with zeros."""

from __future__ import annotations

import hashlib
import math
import os

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


# The exact court's strongest evidence is the `slow` exact and mutant runs (~300 tests, minutes each
# file). The default run (README's test command, CI) draws a seeded tenth of them, the same tenth for
# the same seed, so every change is checked against some of them; `-m slow` still runs them all.
SAMPLED_FILES = ("test_exact.py", "test_exact_mutants.py")
SAMPLE_FRACTION = 10  # one in ten
SAMPLE_SEED = os.environ.get("SPECVIZ_TEST_SAMPLE_SEED", "20261202")  # another seed draws another tenth


@pytest.hookimpl(tryfirst=True)  # before -m deselects: a drawn test is `sampled` when the marks are read
def pytest_collection_modifyitems(config, items):
    slow = {}
    for item in items:
        if item.path.name in SAMPLED_FILES and item.get_closest_marker("slow"):
            slow.setdefault(item.path.name, []).append(item)
    for group in slow.values():
        group.sort(key=lambda it: hashlib.sha256(f"{SAMPLE_SEED}:{it.nodeid}".encode()).digest())
        for item in group[: math.ceil(len(group) / SAMPLE_FRACTION)]:
            item.add_marker(pytest.mark.sampled)
