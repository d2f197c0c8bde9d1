"""The verifier's hot path cannot be talked into garbage: guards that hold with validate=False,
NumPy and torch agreeing on every input both accept, batch invariance, and what validate=True
checks on the rows a call reads.

Sizes: V = 300 and 600 run the gathered column-chunk path of ``specviz.verifiers._sample`` (several
blocks of 256 tokens); V = 9000 runs its per-row path (V >= 8192 on the CPU).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import random_batch, random_probs

import specviz
from specviz import InputError, Uniforms, verify, verify_flat
from specviz.verifiers.layout import padded_to_flat

BACKENDS = ["numpy", "torch"]


def as_torch(*arrays):
    return [None if a is None else torch.as_tensor(np.asarray(a)) for a in arrays]


def to_np(res) -> specviz.Verification:
    return specviz.Verification(*[f.numpy() if isinstance(f, torch.Tensor) else np.asarray(f) for f in res])


def run(backend, target, draft, tokens, num, u, validate=True):
    if backend == "torch":
        target, draft, tokens, num = as_torch(target, draft, tokens, num)
        u = Uniforms(*as_torch(*u))
    return to_np(verify(target, draft, tokens, num, uniforms=u, validate=validate))


def run_flat(backend, flat, u, validate=True):
    if backend == "torch":
        flat = as_torch(*flat)
        u = Uniforms(*as_torch(*u))
    return to_np(verify_flat(*flat, uniforms=u, validate=validate))


def outcome(fn):
    """('raised', argument) or ('ok', tokens): what a call did."""
    try:
        return "ok", fn().tokens
    except InputError as e:
        return "raised", e.argument


# --- 1. non-finite and oversized weights raise whatever validate says --------------------------


def one_draft_case(V, seed=0):
    rng = np.random.default_rng(seed)
    target = random_probs(rng, (3, 2, V))
    draft = random_probs(rng, (3, 1, V))
    tokens = np.array([[290], [291], [292]])  # outside the first block of 256 tokens
    return target, draft, tokens, np.ones(3, dtype=np.int64)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("V", [300, 9000])
@pytest.mark.parametrize("bad", ["nan_block", "ones_block", "inf"])
@pytest.mark.parametrize("where", ["residual", "bonus"])
def test_non_finite_or_oversized_rows_raise_with_validate_false(backend, V, bad, where):
    # 256 NaNs (or 256 ones) in one block used to sum to 0 in int64 weights (256 * INT64_MIN
    # wraps to 0, as does 256 * 2^58) and a token came out. Now the row total says it.
    target, draft, tokens, num = one_draft_case(V)
    row = target[:, 0] if where == "residual" else target[:, 1]
    if bad == "nan_block":
        row[:, :256] = np.nan
    elif bad == "ones_block":
        row[:, :256] = 1.0
    else:
        row[:, 7] = np.inf
    # coin 0.999 rejects (p(x) < q(x) for most rows) or coin 0 accepts every draft: the bonus row is read
    coin = 0.999999 if where == "residual" else 0.0
    if where == "residual":
        draft[np.arange(3), 0, tokens[:, 0]] = 1.0  # q(x) = 1 > p(x): the coin rejects
    u = Uniforms(np.full((3, 1), coin), np.full(3, 0.5))
    with pytest.raises(InputError, match="target_probs: expected"):
        run(backend, target, draft, tokens, num, u, validate=False)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("V", [300, 9000])
def test_nan_in_the_draft_row_of_a_residual_raises_with_validate_false(backend, V):
    target, draft, tokens, num = one_draft_case(V, seed=1)
    draft[:, 0, 100:356] = np.nan
    u = Uniforms(np.full((3, 1), 0.5), np.full(3, 0.5))  # q(x) is finite; the row is not
    draft[np.arange(3), 0, tokens[:, 0]] = 1.0  # a large q(x): rejected, so the residual reads the whole q row
    with pytest.raises(InputError, match="draft_probs: expected finite probabilities"):
        run(backend, target, draft, tokens, num, u, validate=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_entries_in_a_row_drawn_from_p_raise_with_validate_false(backend):
    # Negative weights would make the running sum non-monotone and the sums inexact.
    target, draft, tokens, num = one_draft_case(300, seed=2)
    target[:, 1, 5] = -0.5
    u = Uniforms(np.zeros((3, 1)), np.full(3, 0.5))  # u = 0 accepts: the bonus row is drawn from
    with pytest.raises(InputError, match="target_probs: expected non-negative probabilities"):
        run(backend, target, draft, tokens, num, u, validate=False)


@pytest.mark.parametrize("V", [5, 300, 9000])
def test_numpy_and_torch_agree_on_every_input_both_accept(V):
    # Garbage of every kind the fast path might meet with validate=False: both raise, or both
    # return the same tokens (bit for bit).
    rng = np.random.default_rng(V)
    kinds = ["nan", "neg_nan", "inf", "neg_inf", "negative", "neg_zero", "big", "huge", "scaled", "clean"]
    seen = {"ok": 0, "raised": 0}
    n_cases = 60 if V < 9000 else 12
    for case in range(n_cases):
        B, K = 4, 2
        target, draft, tokens, num = random_batch(rng, B, K, V, zero_fraction=0.3)
        kind = kinds[case % len(kinds)]
        arr = target if rng.random() < 0.5 else draft
        b, i = rng.integers(B), rng.integers(arr.shape[1])
        cols = rng.choice(V, size=min(V, int(rng.integers(1, 300))), replace=False)
        value = {"nan": np.nan, "neg_nan": -np.nan, "inf": np.inf, "neg_inf": -np.inf, "negative": -0.3,
                 "neg_zero": -0.0, "big": 3.0, "huge": 1e30, "scaled": None, "clean": None}[kind]  # fmt: skip
        if kind == "scaled":
            arr[b, i] *= 1.5
        elif kind == "neg_nan":
            arr[b, i, cols] = -np.abs(np.full(len(cols), np.nan))  # NaN with its sign bit set
        elif value is not None:
            arr[b, i, cols] = value
        u = Uniforms(rng.random((B, K)), rng.random(B))
        a = outcome(lambda: run("numpy", target, draft, tokens, num, u, validate=False))  # noqa: B023
        t = outcome(lambda: run("torch", target, draft, tokens, num, u, validate=False))  # noqa: B023
        assert a[0] == t[0], (kind, a, t)
        if a[0] == "ok":
            np.testing.assert_array_equal(a[1], t[1], err_msg=kind)
        else:
            assert a[1] == t[1], (kind, a[1], t[1])
        seen[a[0]] += 1
    assert seen["ok"] and seen["raised"]  # both outcomes were exercised


@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_zero_is_a_probability(backend, rng):
    # The fast check flags any sign bit; the precise one lets -0.0 through, as 0.0.
    target, draft, tokens, num = random_batch(rng, 50, 3, 300, zero_fraction=0.4)
    u = Uniforms(rng.random((50, 3)), rng.random(50))
    plus = run(backend, target, draft, tokens, num, u)
    minus = run(backend, np.where(target == 0, -0.0, target), np.where(draft == 0, -0.0, draft), tokens, num, u)
    assert np.signbit(np.where(target == 0, -0.0, target)).any()
    np.testing.assert_array_equal(plus.tokens, minus.tokens)


# --- 2. an out-of-range draft is never accepted ---------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("validate", [True, False])
@pytest.mark.parametrize("bad_id", [-1, 300])
def test_out_of_range_draft_ids_raise_whatever_validate_says(backend, validate, bad_id, rng):
    # -1 (the placeholder of serving engines) used to wrap to column V - 1 and be accepted.
    target, draft, tokens, num = random_batch(rng, 6, 3, 300, ragged=False)
    tokens[2, 1] = bad_id
    u = Uniforms(np.zeros((6, 3)), rng.random(6))  # u = 0 would accept anything with q(x) > 0
    with pytest.raises(InputError, match=rf"draft_tokens: expected token ids .*in \[0, 299\], got {bad_id}"):
        run(backend, target, draft, tokens, num, u, validate=validate)
    flat = padded_to_flat(target, draft, np.where(tokens < 0, 0, tokens), num)
    flat_tokens = flat.draft_tokens.copy()
    flat_tokens[7] = bad_id
    flat = flat._replace(draft_tokens=flat_tokens)
    with pytest.raises(InputError, match=rf"draft_tokens: expected token ids in \[0, 299\], got {bad_id}"):
        run_flat(backend, flat, Uniforms(np.zeros(18), rng.random(6)), validate=validate)
    # Past num_draft the same ids are ignored, as documented.
    num[2] = 1
    res = run(backend, target, draft, tokens, num, u, validate=validate)
    assert res.num_accepted[2] <= 1


# --- 3. batch invariance -------------------------------------------------------------------------


def subset(arrays, idx):
    return [None if a is None else a[idx] for a in arrays]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("V", [600, 9000])
@pytest.mark.parametrize("deterministic", [False, True], ids=["sampled_q", "one_hot_q"])
def test_a_row_alone_equals_the_row_in_any_batch(backend, V, deterministic):
    rng = np.random.default_rng(V + deterministic)
    B, K = 24 if V < 9000 else 8, 4
    target, draft, tokens, num = random_batch(rng, B, K, V, zero_fraction=0.2)
    if deterministic:
        draft = None
    ua, us = rng.random((B, K)), rng.random(B)
    ua[rng.random((B, K)) < 0.3] = 0.0  # some rows accept every draft: bonus rows too
    full = run(backend, target, draft, tokens, num, (ua, us))
    assert full.bonus.any() and (~full.bonus).any()

    def check_rows(res, rows):
        for r, b in enumerate(rows):
            for name, x, y in zip(res._fields, res, full, strict=True):
                np.testing.assert_array_equal(x[r], y[b], err_msg=f"{name} row {b}")

    perm = rng.permutation(B)
    dup = np.concatenate([perm, perm[:5], perm[:5]])  # reordered and duplicated
    check_rows(run(backend, *subset((target, draft, tokens, num), dup), (ua[dup], us[dup])), dup)
    for b in range(0, B, 3):  # alone, at the batch's padded width
        check_rows(run(backend, *subset((target, draft, tokens, num), [b]), (ua[[b]], us[[b]])), [b])
        # alone, trimmed to its own width: the tokens it emits are the same
        k = int(num[b])
        alone = run(
            backend, target[[b], : k + 1], None if draft is None else draft[[b], :k], tokens[[b], :k], num[[b]],
            (ua[[b], :k], us[[b]]),
        )  # fmt: skip
        np.testing.assert_array_equal(alone.tokens[0], full.tokens[b, : k + 1])
    # The flat layout of the permuted, duplicated batch: the same rows again.
    flat = padded_to_flat(*subset((target, draft, tokens, num), dup))
    valid = np.arange(K)[None, :] < num[dup][:, None]
    res = run_flat(backend, flat, (ua[dup][valid], us[dup]))
    for r, b in enumerate(dup):
        np.testing.assert_array_equal(res.tokens[r, : num[b] + 1], full.tokens[b, : num[b] + 1])
        assert res.num_tokens[r] == full.num_tokens[b]


# --- 4. what validate=True checks, now on the rows a call reads --------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("V", [300, 9000])
def test_validate_checks_every_row_the_draw_reads(backend, V):
    rng = np.random.default_rng(3)
    B, K = 4, 2
    target, draft, tokens, num = random_batch(rng, B, K, V, zero_fraction=0.0, ragged=False)
    reject = Uniforms(np.full((B, K), 1 - 2.0**-53), np.full(B, 0.5))  # position 0 rejects (p(x) < q(x) here)
    draft[np.arange(B), 0, tokens[:, 0]] += 1.0
    draft[:, 0] /= draft[:, 0].sum(-1, keepdims=True)
    accept = Uniforms(np.zeros((B, K)), np.full(B, 0.5))  # every draft accepted: the bonus row is read
    res = run(backend, target, draft, tokens, num, reject)
    assert (res.num_accepted == 0).all()

    bad_q = draft.copy()
    bad_q[1, 0, V - 5] = -0.01  # not at the drafted token: only the residual's full read sees it
    bad_q[1, 0, V - 6] += 0.01
    with pytest.raises(InputError, match="draft_probs: expected non-negative probabilities"):
        run(backend, target, bad_q, tokens, num, reject)
    run(backend, target, bad_q, tokens, num, accept)  # accepted everywhere: that q row is never read in full

    off = target.copy()
    off[2, 0] *= 1.001  # the residual row's p sums to 1.001
    with pytest.raises(InputError, match=r"target_probs: expected rows summing to 1 \(tolerance 0.0001\)"):
        run(backend, off, draft, tokens, num, reject)
    with pytest.raises(InputError, match=r"draft_probs: expected .* got a row summing to 1\.00(1|09{5,})\d*$"):
        run(backend, target, draft * 1.001, tokens, num, reject)
    bonus_off = target.copy()
    bonus_off[3, K] *= 0.99
    with pytest.raises(InputError, match=r"target_probs: expected .* got a row summing to 0\.9(9|89{5,})\d*$"):
        run(backend, bonus_off, draft, tokens, num, accept)
    run(backend, bonus_off, draft, tokens, num, reject)  # the bonus row is not read: not checked
    with pytest.raises(InputError, match="target_probs: expected finite probabilities"):
        nan_probe = target.copy()
        nan_probe[0, 1, tokens[0, 1]] = np.nan  # a probe at position 1, read whatever the coins
        run(backend, nan_probe, draft, tokens, num, reject)
    big_probe = draft.copy()
    big_probe[0, 1, tokens[0, 1]] = 1.5
    with pytest.raises(InputError, match="draft_probs: expected probabilities at most 1, got 1.5"):
        run(backend, target, big_probe, tokens, num, reject)


@pytest.mark.parametrize("V", [300, 9000])
def test_half_precision_torch_equals_numpy_on_the_upcast_values(V):
    # Half-precision tables cannot be viewed by NumPy: torch runs its own row loop (V >= 8192)
    # or chunk loop, after upcasting to float32 exactly as NumPy sees the float32 copy.
    rng = np.random.default_rng(V + 7)
    B, K = 12, 3
    target, draft, tokens, num = random_batch(rng, B, K, V, zero_fraction=0.2)
    t16, d16 = torch.as_tensor(target).to(torch.bfloat16), torch.as_tensor(draft).to(torch.bfloat16)
    ua, us = rng.random((B, K)), rng.random(B)
    ua[rng.random((B, K)) < 0.3] = 0.0
    for draft_t in (d16, None):
        res = to_np(verify(t16, draft_t, *as_torch(tokens, num), uniforms=Uniforms(*as_torch(ua, us))))
        d32 = None if draft_t is None else d16.float().numpy()
        # validate=False: bfloat16 rows sum to 1 only within ~1e-3, outside float32's tolerance
        ref = verify(t16.float().numpy(), d32, tokens, num, uniforms=Uniforms(ua, us), validate=False)
        assert res.bonus.any() and (~res.bonus).any()
        for name, x, y in zip(res._fields, res, ref, strict=True):
            np.testing.assert_array_equal(x, y, err_msg=name)


def test_rule_bonus_row_before_draws_the_bonus_of_full_rows_from_row_num_draft_minus_1():
    # A mistake for the bug list (requested by the prove owner): wrong only in the bonus. It is the
    # reference with its bonus_row step swapped (specviz.proof.bugs); the engine has no such switch.
    from specviz.proof.bugs import BUGS

    K, V = 3, 5
    num = np.array([0, 1, 2, 3])
    B = len(num)
    target = np.tile(np.full(V, 1 / V), (B, K + 1, 1))
    target[np.arange(B), num] = np.eye(V)[1]  # the true bonus row says "token 1"
    before = np.maximum(num - 1, 0)
    target[num > 0, before[num > 0]] = np.eye(V)[3]  # the row before says "token 3"
    draft = target[:, :K].copy()  # p == q: every draft accepted
    tokens = np.where(np.arange(K)[None] < num[:, None], np.argmax(draft, -1), -1)
    u = Uniforms(np.zeros((B, K)), np.full(B, 0.5))
    right = verify(target, draft, tokens, num, uniforms=u)
    wrong = BUGS["bonus_row_before"].verifier(target, draft, tokens, num, uniforms=u)
    np.testing.assert_array_equal(right.tokens[np.arange(B), num], 1)
    np.testing.assert_array_equal(wrong.tokens[np.arange(B), num], [1, 3, 3, 3])
    np.testing.assert_array_equal(wrong.num_tokens, right.num_tokens)


@pytest.mark.parametrize("V", [5, 300, 9000])
def test_the_torch_kernels_themselves_agree_with_numpy(V, monkeypatch):
    # Torch CPU float32/float64 tensors are verified by the NumPy code on views; CUDA and half
    # precision run the torch code. Force the torch code on the CPU and compare it, field by field.
    monkeypatch.setenv("SPECVIZ_BACKEND", "torch")
    rng = np.random.default_rng(V + 3)
    B, K = 20, 3
    for dtype in (np.float32, np.float64):
        target, draft, tokens, num = random_batch(rng, B, K, V, zero_fraction=0.2, dtype=dtype)
        ua, us = rng.random((B, K)), rng.random(B)
        ua[rng.random((B, K)) < 0.3] = 0.0
        for d in (draft, None):
            for validate in (True, False):
                a = run("numpy", target, d, tokens, num, (ua, us), validate)
                t = run("torch", target, d, tokens, num, (ua, us), validate)
                for name, x, y in zip(a._fields, a, t, strict=True):
                    np.testing.assert_array_equal(x, y, err_msg=f"{name} {dtype.__name__} validate={validate}")
        flat = padded_to_flat(target, draft, tokens, num)
        valid = np.arange(K)[None, :] < num[:, None]
        np.testing.assert_array_equal(
            run_flat("numpy", flat, (ua[valid], us)).tokens, run_flat("torch", flat, (ua[valid], us)).tokens
        )


@pytest.mark.parametrize("K", [1, 3, 8, 9, 16, 17])
def test_run_length_lookup_equals_the_cumulative_product(K):
    # NumPy's run length uses a table of trailing ones for K <= 16; every pattern is checked
    # exhaustively for K <= 9, random rows with long runs beyond.
    from specviz.verifiers._xp import NumpyOps

    if K <= 9:
        passed = ((np.arange(1 << K)[:, None] >> np.arange(K)[None, :]) & 1).astype(bool)
    else:
        passed = np.random.default_rng(K).random((50_000, K)) < 0.9
    expected = np.cumprod(passed, axis=1, dtype=np.int64).sum(1)
    np.testing.assert_array_equal(NumpyOps().run_length(np.ascontiguousarray(passed)), expected)
    assert (expected == K).any() and (expected == 0).any()
