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


# The files the quick development subset leaves out (README: `python -m pytest -m "not slow and not browser and not
# heavy"`): each spends most of its time in subprocesses, servers or long CLI runs. They stay in the
# default run, the one README gives and CI runs; `heavy` only names them.
HEAVY_FILES = frozenset({
    "test_install.py",  # builds and installs the wheel
    "test_serve.py",  # nginx and app processes
    "test_numba_faults.py",  # a fresh interpreter per broken cache
    "test_ship.py",  # prove --vocab end to end
    "test_app_faults.py",  # the app without torch, in a subprocess
    "test_cli.py",  # prove runs through the CLI
    "test_cli_kind.py",
    "test_safety.py",  # hostile links on every page
    "test_families.py",  # failing prove runs with their family fits
    "test_large_vocab.py",  # V up to 32001, chi-square at V = 600
    "test_text.py",  # the n-gram models trained and run
    "test_models.py",  # the real model (SmolLM2-135M) loaded, run and sampled
    "test_prove_coverage.py",  # the mutants through whole prove runs
    "test_harness.py",  # verifiers that hang, run to their time limit
    "test_cli_ergonomics.py",  # fresh interpreters
})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in HEAVY_FILES:
            item.add_marker(pytest.mark.heavy)
