"""A torch that another thread is still importing must not break a NumPy call.

The app imports torch in a background thread (specviz/app/warm.py) while students' scripts verify
NumPy arrays. During that import ``sys.modules["torch"]`` exists without ``Tensor``: a check that
read ``torch.Tensor`` raised AttributeError inside the Bug lab ("partially initialized module
'torch' has no attribute 'Tensor'"), found by tests/test_serve.py's crowd behind the proxy.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import specviz
from specviz.verifiers import _xp


@pytest.fixture
def half_imported_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))  # no Tensor yet


def test_is_torch_is_false_while_torch_is_half_imported(half_imported_torch):
    assert _xp.is_torch(np.zeros(3)) is False


def test_verify_runs_on_numpy_while_torch_is_half_imported(half_imported_torch, rng):
    target = rng.dirichlet(np.ones(5), size=(4, 3))  # (B, K+1, V)
    draft = rng.dirichlet(np.ones(5), size=(4, 2))  # (B, K, V)
    tokens = rng.integers(0, 5, size=(4, 2))
    u = specviz.Uniforms(rng.random((4, 2)), rng.random(4))
    res = specviz.verify(target, draft, tokens, np.array([2, 1, 0, 2]), uniforms=u)
    sys.modules.pop("torch")  # the same call with torch absent gives the same tokens
    again = specviz.verify(target, draft, tokens, np.array([2, 1, 0, 2]), uniforms=u)
    assert (res.tokens == again.tokens).all()


def test_control_the_old_check_raises_on_a_half_imported_torch(half_imported_torch):
    def old_is_torch(x):  # what _xp.is_torch read before
        torch = sys.modules.get("torch")
        return torch is not None and isinstance(x, torch.Tensor)

    with pytest.raises(AttributeError, match="Tensor"):
        old_is_torch(np.zeros(3))
