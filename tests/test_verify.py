"""The verifier's contract, edge cases and input checks, on NumPy and torch (CPU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import random_batch, random_probs
from scipy import stats

import specviz
from specviz import InputError, Uniforms, verify, verify_flat, verify_greedy
from specviz.proof.theory import expected_tokens
from specviz.verifiers.layout import flat_to_padded, padded_to_flat

ALPHA = 0.001  # chi-square level used throughout; the critical value comes from scipy


def as_torch(*arrays):
    return [None if a is None else torch.as_tensor(np.array(a)) for a in arrays]


def to_np(x):
    return x.numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


BACKENDS = ["numpy", "torch"]


def run(backend, target, draft, tokens, num, **kw):
    if backend == "torch":
        target, draft, tokens, num = as_torch(target, draft, tokens, num)
        if "uniforms" in kw:
            kw["uniforms"] = Uniforms(*as_torch(*kw["uniforms"]))
        if isinstance(kw.get("rng"), int):
            kw["rng"] = torch.Generator().manual_seed(kw["rng"])
    elif isinstance(kw.get("rng"), int):
        kw["rng"] = np.random.default_rng(kw["rng"])
    res = verify(target, draft, tokens, num, **kw)
    return specviz.Verification(*[to_np(f) for f in res])


def chi2_pass(observed, probs):
    """Pearson statistic over cells with probs > 0, and whether it is below the critical value."""
    keep = probs > 0
    exp = observed.sum() * probs[keep]
    stat = ((observed[keep] - exp) ** 2 / exp).sum()
    crit = stats.chi2.isf(ALPHA, keep.sum() - 1)
    return stat, crit, bool(stat < crit and observed[~keep].sum() == 0)


# --- the contract --------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_p_equals_q_accepts_every_draft(backend, rng):
    target, draft, tokens, num = random_batch(rng, 99, 5, 32, zero_fraction=0.3)
    draft = target[:, :5].copy()  # q == p at every tested position
    tokens = np.where(tokens >= 0, np.argmax(draft, -1), -1)  # tokens with q(x) > 0
    res = run(backend, target, draft, tokens, num, rng=1)
    np.testing.assert_array_equal(res.num_accepted, num)
    assert res.bonus.all()
    np.testing.assert_array_equal(res.num_tokens, num + 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_drafts_sample_from_target_row_0(backend, rng):
    B, V = 200_000, 7
    p = np.array([0.3, 0.0, 0.25, 0.2, 0.15, 0.0999, 0.0001])
    target = np.broadcast_to(p, (B, 1, V))
    res = run(
        backend, target, np.zeros((B, 0, V)), np.zeros((B, 0), dtype=np.int64), np.zeros(B, dtype=np.int64), rng=5
    )
    assert res.tokens.shape == (B, 1)
    np.testing.assert_array_equal(res.num_tokens, 1)
    observed = np.bincount(res.tokens[:, 0], minlength=V)
    stat, crit, ok = chi2_pass(observed, p)
    assert ok, (stat, crit, observed)
    # Negative control: the same counts against a shifted law must fail.
    shifted = p.copy()
    shifted[[0, 2]] += [-0.01, 0.01]
    assert not chi2_pass(observed, shifted)[2]


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_batch(backend):
    K, V = 3, 5
    res = run(
        backend,
        np.zeros((0, K + 1, V)),
        np.zeros((0, K, V)),
        np.zeros((0, K), dtype=np.int64),
        np.zeros(0, dtype=np.int64),
        rng=0,
    )
    assert res.tokens.shape == (0, K + 1)
    assert res.num_tokens.shape == (0,)


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_hot_target_accepts_the_argmax_run_and_replaces_with_argmax(backend, rng):
    B, K, V = 500, 4, 6
    best = rng.integers(0, V, size=(B, K + 1))
    target = np.eye(V)[best]  # (B, K+1, V) one-hot
    draft = random_probs(rng, (B, K, V))
    tokens = np.where(rng.random((B, K)) < 0.6, best[:, :K], rng.integers(0, V, size=(B, K)))
    num = rng.integers(0, K + 1, size=B)
    res = run(backend, target, draft, tokens, num, rng=3)
    match = (tokens == best[:, :K]) & (np.arange(K)[None] < num[:, None])
    run_len = np.cumprod(match, axis=1).sum(1)
    np.testing.assert_array_equal(res.num_accepted, run_len)
    np.testing.assert_array_equal(res.tokens[np.arange(B), run_len], best[np.arange(B), run_len])


@pytest.mark.parametrize("backend", BACKENDS)
def test_bonus_comes_from_row_num_draft_not_the_last_padded_row(backend):
    K, V = 4, 5
    num = np.array([0, 1, 2, 3, 4])
    B = len(num)
    target = np.tile(np.full(V, 1 / V), (B, K + 1, 1))
    target[np.arange(B), num] = np.eye(V)[1]  # the true bonus row says "token 1"
    target[num < K, K] = np.eye(V)[2]  # the last padded row says "token 2"
    draft = target[:, :K].copy()  # p == q: every draft is accepted
    tokens = np.zeros((B, K), dtype=np.int64)
    res = run(backend, target, draft, tokens, num, rng=0)
    np.testing.assert_array_equal(res.tokens[np.arange(B), num], 1)
    assert res.bonus.all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_residual_mass_falls_back_to_target(backend):
    # p == q and the drafted token has q(x) = 0: rejected, and max(0, p - q) has no mass.
    p = np.array([0.5, 0.0, 0.3, 0.2])
    target, draft = np.tile(p, (3, 2, 1)), np.tile(p, (3, 1, 1))
    tokens, num = np.array([[1], [1], [1]]), np.array([1, 1, 1])
    sample = np.array([0.1, 0.6, 0.95])  # inverse CDF of p: tokens 0, 2, 3
    res = run(backend, target, draft, tokens, num, uniforms=Uniforms(np.full((3, 1), 0.5), sample))
    np.testing.assert_array_equal(res.num_accepted, 0)
    np.testing.assert_array_equal(res.tokens[:, 0], [0, 2, 3])


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_draft_prob_is_a_rejection_never_a_division(backend):
    p = np.array([0.25, 0.25, 0.25, 0.25])
    q = np.array([0.0, 0.5, 0.5, 0.0])
    target, draft = np.tile(p, (4, 2, 1)), np.tile(q, (4, 1, 1))
    tokens, num = np.array([[0], [3], [1], [2]]), np.ones(4, dtype=np.int64)
    with np.errstate(all="raise"):
        res = run(backend, target, draft, tokens, num, uniforms=Uniforms(np.zeros((4, 1)), np.full(4, 0.1)))
    np.testing.assert_array_equal(res.num_accepted, [0, 0, 1, 1])  # u = 0 accepts anything with q > 0
    assert np.isnan(res.ratios[:2, 0]).all() and (res.ratios[2:, 0] == 0.5).all()
    # The residual max(0, p - q) is 0.25 on tokens 0 and 3 only.
    assert set(res.tokens[:2, 0]) <= {0, 3}


@pytest.mark.parametrize("backend", BACKENDS)
def test_emitted_tokens_never_have_zero_target_probability(backend, rng):
    target, draft, tokens, num = random_batch(rng, 20_000, 4, 9, zero_fraction=0.5)
    res = run(backend, target, draft, tokens, num, rng=11)
    b, k = np.nonzero(res.tokens >= 0)
    assert (target[b, k, res.tokens[b, k]] > 0).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_diagnostics_explain_every_decision(backend, rng):
    target, draft, tokens, num = random_batch(rng, 999, 5, 17)
    res = run(backend, target, draft, tokens, num, rng=2)
    K = 5
    pos = np.arange(K)[None]
    tested = (pos < num[:, None]) & (pos <= res.num_accepted[:, None])
    assert (np.isnan(res.accept_uniforms) == ~tested).all()
    accepted = res.accept_uniforms < res.ratios  # NaN compares False
    np.testing.assert_array_equal(accepted.sum(1), res.num_accepted)
    np.testing.assert_array_equal(res.bonus, res.num_accepted == num)
    np.testing.assert_array_equal(res.num_tokens, res.num_accepted + 1)
    np.testing.assert_array_equal((res.tokens >= 0).sum(1), res.num_tokens)
    np.testing.assert_array_equal(
        res.tokens[:, :K][pos < res.num_accepted[:, None]], tokens[pos < res.num_accepted[:, None]]
    )


def test_reference_example_tokens_per_verification():
    # p = [0.5, 0.3, 0.15, 0.05], q uniform, K = 3: a = 0.7, (1 - a^4) / (1 - a) = 2.533.
    p, q, K, B = np.array([0.5, 0.3, 0.15, 0.05]), np.full(4, 0.25), 3, 400_000
    rng = np.random.default_rng(7)
    tokens = rng.integers(0, 4, size=(B, K))  # drafts from uniform q
    res = verify(np.broadcast_to(p, (B, K + 1, 4)), np.broadcast_to(q, (B, K, 4)), tokens, np.full(B, K), rng=rng)
    mean, se = res.num_tokens.mean(), res.num_tokens.std() / np.sqrt(B)
    assert abs(mean - expected_tokens(0.7, K)) < 3 * se, (mean, se)
    assert abs(mean - 2.19) > 30 * se  # the no-bonus figure is far outside the band


def test_torch_reference_example_tokens_per_verification():
    p, q, K, B = torch.tensor([0.5, 0.3, 0.15, 0.05]), torch.full((4,), 0.25), 3, 400_000
    g = torch.Generator().manual_seed(7)
    tokens = torch.randint(0, 4, (B, K), generator=g)
    res = verify(p.expand(B, K + 1, 4), q.expand(B, K, 4), tokens, torch.full((B,), K), rng=g)
    n = res.num_tokens.double()
    assert abs(n.mean().item() - 2.533) < 3 * (n.std() / B**0.5).item()


# --- NumPy and torch agree --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_numpy_and_torch_cpu_return_identical_tokens(dtype, rng):
    # Acceptance is the same float64 arithmetic and the draw sums integers, so even float32 agrees.
    B, K, V = 999, 4, 111
    target, draft, tokens, num = random_batch(rng, B, K, V, zero_fraction=0.3, dtype=dtype)
    u = Uniforms(rng.random((B, K)), rng.random(B))
    a = run("numpy", target, draft, tokens, num, uniforms=u)
    b = run("torch", target, draft, tokens, num, uniforms=u)
    for name, x, y in zip(a._fields, a, b, strict=True):
        np.testing.assert_array_equal(x, y, err_msg=name)
    # The deterministic drafter (draft_probs=None) too.
    c = run("numpy", target, None, tokens, num, uniforms=u)
    d = run("torch", target, None, tokens, num, uniforms=u)
    for name, x, y in zip(c._fields, c, d, strict=True):
        np.testing.assert_array_equal(x, y, err_msg=name)


def test_bfloat16_inputs_behave_like_their_float32_values(rng):
    B, K, V = 300, 3, 50
    target, draft, tokens, num = random_batch(rng, B, K, V, zero_fraction=0.2)
    u = Uniforms(*as_torch(rng.random((B, K)), rng.random(B)))
    T, D, X, N = as_torch(target, draft, tokens, num)
    T16, D16 = T.to(torch.bfloat16), D.to(torch.bfloat16)
    a = verify(T16, D16, X, N, uniforms=u)  # rows sum to 1 within the half-precision tolerance
    b = verify(T16.float(), D16.float(), X, N, uniforms=u, validate=False)
    assert torch.equal(a.tokens, b.tokens)


def test_float32_differs_from_float64_only_at_cdf_boundaries(rng):
    # Rounding p and q to float32 moves each CDF step by ~1e-7 relative; a token can change
    # only when the uniform lands that close to a step (or a coin that close to p/q).
    B, K, V = 20_000, 3, 64
    target, draft, tokens, num = random_batch(rng, B, K, V, zero_fraction=0.2, dtype=np.float32)
    u = Uniforms(rng.random((B, K)), rng.random(B))
    r32 = verify(target, draft, tokens, num, uniforms=u)
    r64 = verify(target.astype(np.float64), draft.astype(np.float64), tokens, num, uniforms=u)
    differ = (r32.tokens != r64.tokens).any(1)
    assert differ.mean() < 1e-3, differ.mean()
    for b in np.flatnonzero(differ):  # each difference sits within 1e-5 of a threshold
        gaps = [np.abs(r64.accept_uniforms[b] - r64.ratios[b])]
        n = r64.num_accepted[b]
        row = target[b, n].astype(np.float64)
        w = row if r64.bonus[b] else np.maximum(row - draft[b, n], 0)
        gaps.append(np.abs(np.cumsum(w) / w.sum() - u.sample[b]))
        assert np.nanmin(np.concatenate(gaps)) < 1e-5


def test_flat_layout_matches_padded(rng):
    B, K, V = 57, 5, 23
    target, draft, tokens, num = random_batch(rng, B, K, V)
    u = Uniforms(rng.random((B, K)), rng.random(B))
    flat = padded_to_flat(target, draft, tokens, num)
    assert flat.target_probs.shape == (num.sum() + B, V)
    valid = np.arange(K)[None] < num[:, None]
    a = verify(target, draft, tokens, num, uniforms=u)
    b = verify_flat(*flat, uniforms=Uniforms(u.accept[valid], u.sample))
    for name, x, y in zip(a._fields, a, b, strict=True):
        np.testing.assert_array_equal(x[:, : K + 1] if x.ndim == 2 else x, y, err_msg=name)
    c = verify_flat(*as_torch(*flat), uniforms=Uniforms(*as_torch(u.accept[valid], u.sample)))
    np.testing.assert_array_equal(c.tokens.numpy(), b.tokens)
    back = flat_to_padded(*flat)
    np.testing.assert_array_equal(back.num_draft, num)
    np.testing.assert_array_equal(back.draft_tokens, tokens)
    np.testing.assert_array_equal(
        back.target_probs[np.arange(K + 1)[None] <= num[:, None]], target[np.arange(K + 1)[None] <= num[:, None]]
    )


def test_flat_layout_edge_cases():
    V = 3
    p = np.array([0.2, 0.5, 0.3])
    res = verify_flat(
        np.tile(p, (2, 1)),
        np.zeros((0, V)),
        np.zeros(0, dtype=np.int64),
        np.array([0, 0, 0]),
        uniforms=Uniforms(np.zeros(0), np.array([0.1, 0.9])),
    )
    np.testing.assert_array_equal(res.tokens, [[0], [2]])
    empty = verify_flat(np.zeros((0, V)), None, np.zeros(0, dtype=np.int64), np.array([0]), rng=np.random.default_rng())
    assert empty.tokens.shape == (0, 1)
    with pytest.raises(InputError, match="draft_indptr: expected non-decreasing"):
        flat_to_padded(np.tile(p, (5, 1)), None, np.array([0, 1, 2]), np.array([0, 3, 1, 3]))
    with pytest.raises(InputError, match=r"num_draft: expected draft counts in \[0, 1\]"):
        padded_to_flat(np.tile(p, (2, 2, 1)), None, np.zeros((2, 1), dtype=np.int64), np.array([2, 0]))
    with pytest.raises(InputError, match="draft_indptr: expected first entry 0"):
        verify_flat(np.tile(p, (2, 1)), None, np.array([0]), np.array([1, 1]))


# --- greedy -----------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_greedy_accepts_while_draft_is_argmax(backend, rng):
    B, K, V = 300, 4, 11
    logits = rng.normal(size=(B, K + 1, V))
    best = logits.argmax(-1)
    tokens = np.where(rng.random((B, K)) < 0.7, best[:, :K], (best[:, :K] + 1) % V)
    num = rng.integers(0, K + 1, size=B)
    T, X, N = as_torch(logits, tokens, num) if backend == "torch" else (logits, tokens, num)
    res = verify_greedy(T, X, N)
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    same = verify_greedy(probs, tokens, num)
    match = (tokens == best[:, :K]) & (np.arange(K)[None] < num[:, None])
    n = np.cumprod(match, axis=1).sum(1)
    np.testing.assert_array_equal(to_np(res.num_accepted), n)
    np.testing.assert_array_equal(to_np(res.tokens)[np.arange(B), n], best[np.arange(B), n])
    np.testing.assert_array_equal(to_np(res.tokens), same.tokens)
    np.testing.assert_array_equal(to_np(res.bonus), n == num)


# --- randomness --------------------------------------------------------------------------------


def test_seeded_generators_reproduce_and_explicit_uniforms_are_pure(rng):
    target, draft, tokens, num = random_batch(rng, 64, 3, 10)
    a = verify(target, draft, tokens, num, rng=np.random.default_rng(4))
    b = verify(target, draft, tokens, num, rng=np.random.default_rng(4))
    np.testing.assert_array_equal(a.tokens, b.tokens)
    # The generator draws accept (B, K) first, then sample (B,): the same as explicit uniforms.
    g = np.random.default_rng(4)
    c = verify(target, draft, tokens, num, uniforms=(g.random((64, 3)), g.random(64)))
    np.testing.assert_array_equal(a.tokens, c.tokens)
    T, D, X, N = as_torch(target, draft, tokens, num)
    t1 = verify(T, D, X, N, rng=torch.Generator().manual_seed(9))
    t2 = verify(T, D, X, N, rng=torch.Generator().manual_seed(9))
    assert torch.equal(t1.tokens, t2.tokens)
    assert t1.tokens.dtype == torch.int64 and isinstance(t1.num_tokens, torch.Tensor)


# --- bad input ----------------------------------------------------------------------------------


def good(rng):
    return random_batch(rng, 4, 3, 5, zero_fraction=0.0, ragged=False)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda t, d, x, n: (t[:, :3], d, x, n), r"target_probs: expected shape \(B, K\+1, V\)"),
        (
            lambda t, d, x, n: (t, d[:, :, :4], x, n),
            r"draft_probs: expected shape \(B, K, V\) = \(4, 3, 5\), got shape \(4, 3, 4\)",
        ),
        (lambda t, d, x, n: (t, d, x, n[:3]), r"num_draft: expected shape \(B,\) = \(4,\)"),
        (lambda t, d, x, n: (t, d, x, np.array([0, 1, 4, 2])), r"num_draft: expected draft counts in \[0, 3\], got 4"),
        (
            lambda t, d, x, n: (t, d, x, np.array([0, -1, 3, 2])),
            r"num_draft: expected draft counts in \[0, 3\], got -1",
        ),
        (
            lambda t, d, x, n: (t, d, np.where(np.arange(3) == 1, 5, x), n),
            r"draft_tokens: expected token ids .* in \[0, 4\], got 5",
        ),
        (lambda t, d, x, n: (t, d, x.astype(float), n), r"draft_tokens: expected an integer array"),
        (
            lambda t, d, x, n: (np.where(np.arange(5) == 0, np.nan, t), d, x, n),
            r"target_probs: expected finite probabilities",
        ),
        (lambda t, d, x, n: (np.where(np.arange(5) == 0, np.inf, t), d, x, n), r"target_probs: expected finite"),
        (lambda t, d, x, n: (t, d - 0.5, x, n), r"draft_probs: expected non-negative probabilities"),
        (lambda t, d, x, n: (t * 1.01, d, x, n), r"target_probs: expected rows summing to 1 \(tolerance 0.0001\)"),
        (lambda t, d, x, n: (np.log(t), d, x, n), r"target_probs: expected (non-negative|finite)"),
        (lambda t, d, x, n: (t[0], d, x, n), r"target_probs: expected 3 dimensions"),
    ],
)
def test_bad_input_names_the_argument(rng, mutate, match):
    args = mutate(*good(rng))
    with pytest.raises(InputError, match=match):
        verify(*args, rng=np.random.default_rng(0))
    if "dimensions" not in match:
        with pytest.raises(ValueError):  # InputError is a ValueError
            verify(*as_torch(*args), rng=torch.Generator())


def test_ignored_positions_are_not_validated(rng):
    target, draft, tokens, num = good(rng)
    num = np.array([1, 1, 1, 1])
    target[:, 2:] = np.nan  # positions past num_draft are never read
    draft[:, 1:] = -7.0
    tokens[:, 1:] = 999
    res = verify(target, draft, tokens, num, rng=np.random.default_rng(0))
    assert (res.num_tokens >= 1).all()


def test_bad_randomness_arguments(rng):
    target, draft, tokens, num = good(rng)
    with pytest.raises(InputError, match="rng: expected a numpy.random.Generator"):
        verify(target, draft, tokens, num, rng=torch.Generator())
    with pytest.raises(InputError, match="rng: expected a torch.Generator"):
        verify(*as_torch(target, draft, tokens, num), rng=np.random.default_rng())
    with pytest.raises(InputError, match="uniforms: expected either rng or uniforms"):
        verify(target, draft, tokens, num, rng=np.random.default_rng(), uniforms=(np.zeros((4, 3)), np.zeros(4)))
    with pytest.raises(InputError, match=r"uniforms.accept: expected uniforms in \[0, 1\)"):
        verify(target, draft, tokens, num, uniforms=(np.ones((4, 3)), np.zeros(4)))
    with pytest.raises(InputError, match=r"uniforms.sample: expected shape \(B,\) = \(4,\)"):
        verify(target, draft, tokens, num, uniforms=(np.zeros((4, 3)), np.zeros(5)))


def test_validate_false_skips_checks(rng):
    target, draft, tokens, num = good(rng)
    verify(target * 1.5, draft, tokens, num, rng=np.random.default_rng(0), validate=False)  # no raise
    with pytest.raises(InputError):
        verify(target * 1.5, draft, tokens, num, rng=np.random.default_rng(0))


# --- CUDA (skips cleanly without a GPU) ---------------------------------------------------------


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_matches_cpu_and_stays_on_device(rng):
    B, K, V = 257, 4, 1000
    target, draft, tokens, num = random_batch(rng, B, K, V, zero_fraction=0.2)
    u = Uniforms(rng.random((B, K)), rng.random(B))
    cpu = verify(target, draft, tokens, num, uniforms=u)
    dev = [torch.as_tensor(a, device="cuda") for a in (target, draft, tokens, num)]
    gpu = verify(*dev, uniforms=Uniforms(*[torch.as_tensor(a, device="cuda") for a in u]))
    assert gpu.tokens.device.type == "cuda"
    # Acceptance is the same IEEE float64 arithmetic and the draw sums integers, whose order
    # does not matter: the GPU returns exactly the CPU's tokens.
    for name, x, y in zip(cpu._fields, cpu, gpu, strict=True):
        np.testing.assert_array_equal(x, y.cpu().numpy(), err_msg=name)
    g = torch.Generator(device="cuda").manual_seed(0)
    assert verify(*dev, rng=g).tokens.device.type == "cuda"
