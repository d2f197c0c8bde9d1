"""The Numba block-sum pass (specviz.verifiers._fused) against the NumPy passes it replaces.

Both must return the same tokens on every input, and raise for the same argument on every bad
one, with ``validate`` on and off: the Numba pass is an optimization, never a different
verifier. Each comparison also checks that the Numba pass really ran (a spy counts its rows), and
a negative control shows that a kernel off by one integer weight is caught.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import random_batch, random_probs

import specviz
from specviz import InputError, Uniforms, verify, verify_flat
from specviz.verifiers import _fused

pytest.importorskip("numba")


@pytest.fixture
def spy(monkeypatch):
    """Counts the rows the Numba pass computes; tests switch it on and off with SPECVIZ_NUMBA."""
    calls = {"rows": 0}
    real = _fused.block_sums

    def counting(P1, poff, *rest):
        calls["rows"] += int(poff.shape[0])
        return real(P1, poff, *rest)

    monkeypatch.setattr(_fused, "block_sums", counting)
    return calls


def outcome(fn):
    try:
        return "ok", np.asarray(fn().tokens)
    except InputError as e:
        return "raised", (e.argument, str(e))


def both(monkeypatch, spy, fn):
    """(NumPy passes, Numba pass) outcomes of fn, and the rows the Numba pass computed."""
    monkeypatch.setenv(_fused.ENV, "0")
    before = spy["rows"]
    pure = outcome(fn)
    assert spy["rows"] == before, "SPECVIZ_NUMBA=0 must not run the Numba pass"
    monkeypatch.setenv(_fused.ENV, "1")
    fused = outcome(fn)
    return pure, fused, spy["rows"] - before


def assert_same(pure, fused):
    assert pure[0] == fused[0], (pure, fused)
    if pure[0] == "ok":
        np.testing.assert_array_equal(pure[1], fused[1])
    else:
        assert pure[1] == fused[1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("V", [257, 1000, 8232, 20000])
@pytest.mark.parametrize("deterministic", [False, True])
def test_same_tokens_as_the_numpy_passes(monkeypatch, spy, dtype, V, deterministic):
    rng = np.random.default_rng(V + 7 * deterministic)
    B, K = 24, 3
    target, draft, tokens, num = random_batch(rng, B, K, V, zero_fraction=0.3, dtype=dtype)
    if deterministic:
        draft = None
    ua, us = rng.random((B, K)), rng.random(B)
    ua[rng.random((B, K)) < 0.3] = 0.0  # some coins accept everything: bonus rows too
    us[:3] = [0.0, np.nextafter(1.0, 0.0), 0.5]  # the first and last tokens of a row's law
    u = Uniforms(ua, us)
    valid = np.arange(K)[None, :] < num[:, None]
    flat = specviz.padded_to_flat(target, draft, tokens, num)
    calls = {
        "padded": lambda: verify(target, draft, tokens, num, uniforms=u),
        "padded, validate=False": lambda: verify(target, draft, tokens, num, uniforms=u, validate=False),
        "flat": lambda: verify_flat(*flat, uniforms=Uniforms(ua[valid], us)),
        "torch": lambda: verify(*[None if a is None else torch.as_tensor(a) for a in (target, draft, tokens, num)],
                                uniforms=Uniforms(torch.as_tensor(ua), torch.as_tensor(us))),
    }  # fmt: skip
    for name, fn in calls.items():
        pure, fused, rows = both(monkeypatch, spy, fn)
        assert rows >= B, f"{name}: the Numba pass did not run"
        assert pure[0] == "ok", (name, pure)
        assert_same(pure, fused)


def test_tables_read_in_place_sliced_and_broadcast(monkeypatch, spy):
    rng = np.random.default_rng(3)
    B, K, V = 12, 2, 3000
    big = random_probs(rng, (B, 2 * K + 1, V)).astype(np.float32)
    target = big[:, : K + 1]  # a slice: rows of one batch row do not follow the previous one's
    d = random_probs(rng, (B, K, V)).astype(np.float32)
    draft = np.concatenate([d, d], axis=1)[:, ::2]  # every other row of a larger table
    tokens = rng.integers(0, V, size=(B, K))
    num = np.full(B, K)
    one = random_probs(rng, (V,)).astype(np.float32)
    broadcast_t = np.broadcast_to(one, (B, K + 1, V))  # strides (0, 0, 4)
    broadcast_d = np.broadcast_to(random_probs(rng, (V,)).astype(np.float32), (B, K, V))
    u = Uniforms(rng.random((B, K)), rng.random(B))
    for t, d in [(target, draft), (broadcast_t, broadcast_d), (broadcast_t, None)]:
        pure, fused, rows = both(monkeypatch, spy, lambda t=t, d=d: verify(t, d, tokens, num, uniforms=u))
        assert rows >= B
        assert pure[0] == "ok"
        assert_same(pure, fused)


@pytest.mark.parametrize("validate", [True, False])
@pytest.mark.parametrize(
    "bad",
    ["nan_p", "nan_q", "inf_p", "negative_p", "negative_q", "huge_p", "sum_p", "sum_q", "above_one_q"],
)
def test_bad_rows_raise_for_the_same_argument(monkeypatch, spy, validate, bad):
    rng = np.random.default_rng(5)
    B, K, V = 8, 1, 9000
    target = random_probs(rng, (B, K + 1, V)).astype(np.float32)
    draft = random_probs(rng, (B, K, V)).astype(np.float32)
    tokens = rng.integers(0, V, size=(B, K))
    num = np.full(B, K)
    coin = np.where(np.arange(B) < B // 2, 0.0, 0.999999)  # half the rows accept (bonus), half reject
    u = Uniforms(coin[:, None], rng.random(B))
    rows = {"p": target[:, 0], "q": draft[:, 0]}  # the rows of the residual (and p's bonus row below)
    kind, which = bad.rsplit("_", 1)
    row = rows[which]
    if kind == "nan":
        row[B // 2 :, 300:600] = np.nan
        target[: B // 2, 1, 300:600] = np.nan
    elif kind == "inf":
        row[:, 17] = np.inf
        target[:, 1, 17] = np.inf
    elif kind == "negative":
        row[:, 5] = -0.25
        target[:, 1, 5] = -0.25
    elif kind == "huge":
        row[:, 9] = 1e30
        target[:, 1, 9] = 1e30
    elif kind == "sum":
        row *= 1.01
        target[:, 1] *= 1.01
    elif bad == "above_one_q":
        row[:, 11] = 1.5
    pure, fused, n = both(monkeypatch, spy, lambda: verify(target, draft, tokens, num, uniforms=u, validate=validate))
    assert n > 0
    assert_same(pure, fused)
    if validate or kind in ("nan", "inf", "huge") or bad == "negative_p":
        assert pure[0] == "raised", pure  # what the guard catches whatever validate says, and all with it


def test_negative_control_a_kernel_off_by_one_weight_is_caught(monkeypatch, spy):
    rng = np.random.default_rng(9)
    B, K, V = 64, 2, 2000
    target, draft, tokens, num = random_batch(rng, B, K, V, zero_fraction=0.0, dtype=np.float32)
    u = Uniforms(rng.random((B, K)), rng.random(B))
    real = _fused.block_sums

    def off_by_one(P1, poff, Q1, qoff, drop, V, bs, S, checks):
        out = real(P1, poff, Q1, qoff, drop, V, bs, S, checks)
        S[:, 0] += 2.0**40  # 2^-8 more mass on the first block: a wrong law
        return out

    fn = lambda: verify(target, draft, tokens, num, uniforms=u)  # noqa: E731
    pure, fused, _ = both(monkeypatch, spy, fn)
    assert_same(pure, fused)
    monkeypatch.setattr(_fused, "block_sums", off_by_one)
    monkeypatch.setenv(_fused.ENV, "1")
    assert not np.array_equal(outcome(fn)[1], pure[1])


def test_switched_off_or_missing_numba_falls_back(monkeypatch):
    monkeypatch.setenv(_fused.ENV, "0")
    assert not _fused.enabled()
    monkeypatch.setenv(_fused.ENV, "1")
    assert _fused.enabled()
    monkeypatch.setattr(_fused, "_kernel", False)  # what _get() leaves when Numba cannot be imported
    assert not _fused.enabled()
    rng = np.random.default_rng(1)
    target, draft, tokens, num = random_batch(rng, 4, 2, 600, dtype=np.float32)
    res = verify(target, draft, tokens, num, rng=np.random.default_rng(0))
    assert (res.num_tokens >= 1).all()
