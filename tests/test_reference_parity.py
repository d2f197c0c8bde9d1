"""Every engine path gives the reference's tokens, bit for bit, on the same inputs and uniforms.

# B rows, K drafts (padded width), V vocabulary, N nodes per tree

The reference (:mod:`specviz.verifiers.reference`) is the rule in plain NumPy; the engine paths are
the compiled Numba loops (``SPECVIZ_BACKEND=numba``, the default where Numba is installed), the
NumPy code (``SPECVIZ_BACKEND=numpy``), torch CPU tensors handed to that code (the default for
torch), torch's own kernels on the CPU (``SPECVIZ_BACKEND=torch``), the flat and the padded
layouts, float64, float32, bfloat16 and float16, and CUDA where present (skipped otherwise).

Half precision is bit-equal too, and not by luck: every bfloat16 and float16 number is a float32
number, the engine computes half-precision weights in float32 (``compute_dtype``) and the coins
in float64, and the reference converts half to float32 at the top, so both run the same float
operations on the same values. What differs is only the sum tolerance of ``validate=True``
(1e-2 for half, 1e-4 otherwise), which the reference takes from the input's own dtype.

Inputs that make the comparison mean something: context-dependent rows (each position its own
Dirichlet draw with a small concentration, so most mass sits on a few tokens), exact zeros in
the supports, rows where q equals p (an empty residual: the fallback to p) and near-ties
(p and q one float32 ulp apart), ragged rows, odd B. The negative controls: a reference with
one step swapped (a ``<=`` coin, the replacement drawn from p) must fail the same check.
"""

from __future__ import annotations

import numpy as np
import pytest

import specviz
from specviz import Uniforms
from specviz.verifiers import reference
from specviz.verifiers import tree as tree_mod
from specviz.verifiers._fused import BACKEND_ENV
from specviz.verifiers._fused import enabled as numba_enabled
from specviz.verifiers.block import verify_block
from specviz.verifiers.layout import padded_to_flat
from specviz.verifiers.tree import verify_tree

torch = pytest.importorskip("torch")

VOCABS = [1, 2, 3, 255, 256, 257, 4097, 32001, 128256]
FIELDS = ("tokens", "num_tokens", "num_accepted", "accept_uniforms", "ratios", "bonus", "sample_uniforms")


def batch_size(V: int) -> int:
    """Odd B, small at large V so the file runs in seconds."""
    return 7 if V <= 4097 else 3


def make_case(V: int, B: int, K: int, seed: int, with_q: bool, dtype=np.float64):
    """Context-dependent rows with zeros, p == q rows, near-ties; ragged num_draft; uniforms with extremes."""
    rng = np.random.default_rng([V, B, K, seed, with_q])
    P = rng.dirichlet(np.full(V, 0.3), (B, K + 1))  # (B, K+1, V)
    if V > 2:
        P[rng.random(P.shape) < 0.3] = 0.0  # exact zeros in the support
        P[..., 0] = np.where(P.sum(-1) == 0, 1.0, P[..., 0])
        P /= P.sum(-1, keepdims=True)
    Q = None
    if with_q:
        Q = rng.dirichlet(np.full(V, 0.3), (B, K))  # (B, K, V)
        if V > 2:
            Q[rng.random(Q.shape) < 0.3] = 0.0
            Q[..., -1] = np.where(Q.sum(-1) == 0, 1.0, Q[..., -1])
            Q /= Q.sum(-1, keepdims=True)
        if K and B > 1:
            Q[0] = P[0, :K]  # p == q: the residual is empty, the draw falls back to p
        if K and B > 2:  # near-ties: q one float32 ulp away from p on every entry
            Q[1] = np.nextafter(P[1, :K].astype(np.float32), np.float32(1)).astype(np.float64)
            Q[1] /= Q[1].sum(-1, keepdims=True)
    x = rng.integers(0, V, (B, K))
    if with_q and K:  # drafts mostly drawn from q: acceptances happen
        for b in range(B):
            for i in range(K):
                x[b, i] = rng.choice(V, p=Q[b, i]) if rng.random() < 0.8 else x[b, i]
    j = rng.integers(0, K + 1, B)  # ragged
    if B:
        j[0] = K
    ua, us = rng.random((B, K)), rng.random(B)
    if B and K:
        ua[-1, 0] = 0.0  # a coin of exactly 0
        us[-1] = np.nextafter(1.0, 0.0)  # the largest uniform: the threshold clamp
    P = P.astype(dtype)
    Q = None if Q is None else Q.astype(dtype)
    return P, Q, x, j, Uniforms(ua, us)


def assert_same(got, want, where) -> None:
    for f in want._fields:
        a, b = np.asarray(getattr(got, f)), np.asarray(getattr(want, f))
        assert a.shape == b.shape and np.array_equal(a, b, equal_nan=True), (where, f, a, b)


def differs(got, want) -> bool:
    return not np.array_equal(np.asarray(got.tokens), np.asarray(want.tokens)) or not np.array_equal(
        np.asarray(got.num_tokens), np.asarray(want.num_tokens))


def to_torch(P, Q, x, j, u, dtype):
    t = lambda a, d=None: None if a is None else torch.tensor(a, dtype=d)  # noqa: E731
    return (t(P, dtype), t(Q, dtype), t(x), t(j)), Uniforms(t(u.accept), t(u.sample))


PATHS = ["numba", "numpy", "torch-handover", "torch-kernels"]


def run_engine(path: str, monkeypatch, args, u, validate=False, flat=False):
    """The engine on ``path``: NumPy inputs for numba/numpy, torch CPU tensors for the torch paths."""
    if path == "numba" and not numba_enabled():
        pytest.skip("Numba is not installed")
    monkeypatch.setenv(BACKEND_ENV, {"numba": "numba", "numpy": "numpy", "torch-handover": "auto",
                                     "torch-kernels": "torch"}[path])  # fmt: skip
    fn = specviz.verify_flat if flat else specviz.verify
    return fn(*args, uniforms=u, validate=validate)


@pytest.mark.parametrize("V", VOCABS)
@pytest.mark.parametrize("with_q", [True, False])
@pytest.mark.parametrize("path", PATHS)
def test_chain_paths_equal_the_reference(V, with_q, path, monkeypatch):
    B, K = batch_size(V), 3
    for dtype in (np.float64, np.float32):
        P, Q, x, j, u = make_case(V, B, K, 0, with_q, dtype)
        want = reference.verify(P, Q, x, j, uniforms=u, validate=False)
        args = (P, Q, x, j)
        if path.startswith("torch"):
            args, u = to_torch(P, Q, x, j, u, getattr(torch, np.dtype(dtype).name))
        assert_same(run_engine(path, monkeypatch, args, u), want, (path, V, with_q, dtype))


@pytest.mark.parametrize("V", [3, 257, 4097])
@pytest.mark.parametrize("path", PATHS)
def test_flat_layout_and_validate_true_equal_the_reference(V, path, monkeypatch):
    for with_q in (True, False):
        P, Q, x, j, u = make_case(V, 7, 4, 1, with_q)
        flat = padded_to_flat(P, Q, x, j)
        valid = np.arange(4)[None, :] < j[:, None]
        uf = Uniforms(u.accept[valid], u.sample)  # the flat order of the same coins
        want = reference.verify(P, Q, x, j, uniforms=u)  # the same rows and coins, padded
        args = tuple(flat)
        if path.startswith("torch"):
            args = tuple(None if a is None else torch.tensor(a) for a in flat)
            uf = Uniforms(torch.tensor(uf.accept), torch.tensor(uf.sample))
        assert_same(run_engine(path, monkeypatch, args, uf, validate=True, flat=True), want, (path, V, with_q))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("V", [3, 256, 257, 32001])
def test_half_precision_torch_equals_the_reference(dtype, V):
    """Bit-equal (see the module docstring); validate=True accepts half rows at the 1e-2 tolerance in both."""
    for with_q in (True, False):
        P, Q, x, j, u = make_case(V, batch_size(V), 3, 2, with_q)
        (tP, tQ, tx, tj), tu = to_torch(P, Q, x, j, u, getattr(torch, dtype))
        for validate in (False, True):
            want = reference.verify(tP, tQ, tx, tj, uniforms=tu, validate=validate)
            assert_same(specviz.verify(tP, tQ, tx, tj, uniforms=tu, validate=validate), want, (dtype, V, with_q))


def test_a_seeded_generator_gives_the_engines_draws():
    P, Q, x, j, _ = make_case(257, 7, 3, 3, True)
    want = reference.verify(P, Q, x, j, rng=np.random.default_rng(5))
    assert_same(specviz.verify(P, Q, x, j, rng=np.random.default_rng(5)), want, "numpy rng")
    (tP, tQ, tx, tj), _ = to_torch(P, Q, x, j, Uniforms(np.zeros((7, 3)), np.zeros(7)), torch.float32)
    got = specviz.verify(tP, tQ, tx, tj, rng=torch.Generator().manual_seed(5))
    assert_same(got, reference.verify(tP, tQ, tx, tj, rng=torch.Generator().manual_seed(5)), "torch rng")
    # Block and tree draw in the same order (accept, then sample), from either kind of generator.
    want = reference.verify_block(tP, tQ, tx, tj, rng=torch.Generator().manual_seed(6))
    assert_same(verify_block(tP, tQ, tx, tj, rng=torch.Generator().manual_seed(6)), want, "block torch rng")
    want = reference.verify_block(P, Q, x, j, rng=np.random.default_rng(6))
    assert_same(verify_block(P, Q, x, j, rng=np.random.default_rng(6)), want, "block numpy rng")
    batch = tree_mod.context_free_trees(P[0, 0], Q[0, 0], tree_mod.kary_parents(2, 2), 7, np.random.default_rng(7))
    want = reference.verify_tree(*batch, rng=np.random.default_rng(8))
    assert_same(verify_tree(*batch, rng=np.random.default_rng(8)), want, "tree numpy rng")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
@pytest.mark.parametrize("V", [3, 257, 32001, 128256])
def test_cuda_equals_the_reference(V):
    for with_q in (True, False):
        P, Q, x, j, u = make_case(V, batch_size(V), 3, 4, with_q)
        args = tuple(None if a is None else torch.tensor(a, device="cuda") for a in (P, Q, x, j))
        tu = Uniforms(torch.tensor(u.accept, device="cuda"), torch.tensor(u.sample, device="cuda"))
        assert_same(specviz.verify(*args, uniforms=tu), reference.verify(P, Q, x, j, uniforms=u), ("cuda", V))


# --- negative controls: one step swapped must fail the same check ------------------------------------


def inclusive(u, px, qx):
    return reference.Coins(u, (qx > 0) & (u * qx <= px))


def from_p(p, q, x, u):
    return reference.inverse_cdf(p, u)


def test_a_swapped_step_fails_parity():
    # A <= coin differs only where u * q(x) == p(x): a coin of 0 on a draft with p(x) = 0.
    P, Q, x, j, u = make_case(5, 7, 3, 5, True)
    P[:, 0, 2], x[:, 0] = 0.0, 2
    P[:, 0] /= P[:, 0].sum(-1, keepdims=True)
    ua = u.accept.copy()
    ua[:, 0] = 0.0
    u = Uniforms(ua, u.sample)
    engine = specviz.verify(P, Q, x, j, uniforms=u)
    assert_same(engine, reference.verify(P, Q, x, j, uniforms=u), "the rule passes")
    leq = reference.with_step(reference.verify, "inclusive_coin", accept=inclusive)
    assert differs(leq(P, Q, x, j, uniforms=u), engine), "a <= coin must fail parity"
    P, Q, x, j, u = make_case(257, 7, 3, 6, True)
    bad = reference.with_step(reference.verify, "resample_from_p", replacement=from_p)
    assert differs(bad(P, Q, x, j, uniforms=u), specviz.verify(P, Q, x, j, uniforms=u))


def test_with_step_replaces_exactly_one_named_step():
    with pytest.raises(specviz.InputError, match="swapped"):
        reference.with_step(reference.verify, "two", accept=inclusive, replacement=from_p)
    with pytest.raises(specviz.InputError, match="one of accept"):
        reference.with_step(reference.verify, "typo", acept=inclusive)
    fn = reference.with_step(reference.verify, "inclusive_coin", accept=inclusive)
    assert fn.__name__ == "inclusive_coin" and reference.swapped_step(fn) == ("accept", inclusive)
    assert reference.verify.steps == reference.CHAIN  # the reference itself is untouched


# --- block and tree -------------------------------------------------------------------------------


@pytest.mark.parametrize("V", [1, 2, 3, 257, 4097])
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_block_equals_its_reference(V, kind):
    for with_q in (True, False):
        P, Q, x, j, u = make_case(V, 7, 3, 7, with_q)
        want = reference.verify_block(P, Q, x, j, uniforms=u)
        args, tu = (P, Q, x, j), u
        if kind == "torch":
            args, tu = to_torch(P, Q, x, j, u, torch.float64)
        assert_same(verify_block(*args, uniforms=tu), want, (V, with_q, kind))
    control = reference.with_step(reference.verify_block, "block_residual_from_p",
                                  extra=lambda p, res, m: p)  # fmt: skip
    P, Q, x, j, u = make_case(V, 99, 3, 8, True)
    if V > 2:
        assert differs(control(P, Q, x, j, uniforms=u), verify_block(P, Q, x, j, uniforms=u))


@pytest.mark.parametrize("V", [2, 3, 257])
@pytest.mark.parametrize("shape", [(2, 2), (1, 3), (3, 1)])
def test_tree_equals_its_reference(V, shape):
    rng = np.random.default_rng([V, *shape])
    parents = tree_mod.kary_parents(*shape)
    N = len(parents)
    for iid in (True, False):
        if not iid and shape[0] > V:
            continue
        p, q = rng.dirichlet(np.full(V, 0.5)), rng.dirichlet(np.full(V, 0.5))
        batch = tree_mod.context_free_trees(p, q, parents, 7, rng, iid=iid)
        T = rng.dirichlet(np.full(V, 0.5), (7, N))  # (7, N, V) context-dependent rows
        batch = batch._replace(target_probs=T)
        u = Uniforms(rng.random((7, N - 1)), rng.random(7))
        want = reference.verify_tree(*batch, uniforms=u)
        assert_same(verify_tree(*batch, uniforms=u), want, (V, shape, iid))
        tb = [None if a is None else torch.tensor(np.ascontiguousarray(a)) for a in batch]
        assert_same(verify_tree(*tb, uniforms=Uniforms(*map(torch.tensor, u))), want, (V, shape, iid, "torch"))
        if iid and V > 2:  # negative control: r reset to the node's target row after a rejection
            control = reference.with_step(reference.verify_tree, "tree_resample_from_p",
                                          residual=lambda r, q, y, M, p: p.copy())  # fmt: skip
            assert differs(control(*batch, uniforms=u), want), (V, shape)


# --- bad input: the reference refuses what the engine refuses, naming the same argument ---------------


def bad_inputs(V: int):
    """(label, P, Q, validate) cases every path must refuse, each at a row the draw reads."""
    P, Q, x, j, u = make_case(V, 7, 2, 9, True)
    nan_p = P.copy()
    nan_p[:, 0] = np.nan  # every row is rejected at position 0 or draws there
    neg = P.copy()
    neg[:, 0, 0], neg[:, 0, 1] = -0.25, neg[:, 0, 1] + 0.25  # a negative entry in p with the drafted token removed
    loose = P * 1.01  # rows summing to 1.01
    nan_q = Q.copy()
    nan_q[:, 0] = np.nan
    return x, j, u, [("nan p", nan_p, Q, False, "target_probs"), ("nan p", nan_p, Q, True, "target_probs"),
                     ("negative p, one-hot residual", neg, None, False, "target_probs"),
                     ("rows summing to 1.01", loose, Q, True, "target_probs"),
                     ("nan q", P, nan_q, True, "draft_probs")]  # fmt: skip


@pytest.mark.parametrize("V", [5, 300])
@pytest.mark.parametrize("path", PATHS)
def test_bad_input_is_refused_with_the_same_argument(V, path, monkeypatch):
    x, j, u, cases = bad_inputs(V)
    j[:] = 2
    u = Uniforms(np.full(u.accept.shape, 0.999), u.sample)  # every row rejected at position 0
    for label, P, Q, validate, name in cases:
        with pytest.raises(specviz.InputError) as want:
            reference.verify(P, Q, x, j, uniforms=u, validate=validate)
        args, uu = (P, Q, x, j), u
        if path.startswith("torch"):
            args, uu = to_torch(P, Q, x, j, u, torch.float64)
        with pytest.raises(specviz.InputError) as got:
            run_engine(path, monkeypatch, args, uu, validate=validate)
        assert got.value.argument == want.value.argument == name, (label, validate, got.value, want.value)
        # The same words; the figure quoted may be another row's: the paths check rows in different
        # orders (at V <= 256 all rows at once, past it a group of rows at a time) and quote the worst.
        assert got.value.expected == want.value.expected, (label, validate, got.value, want.value)


def test_no_bonus_counts_the_rules_tokens_minus_the_bonus_row_by_row():
    """What specviz.app.speed.measure_tokens relies on to time the no-bonus curve on the engine: the
    no_bonus mistake reads the same uniforms in the same order (a seeded generator too), so each row
    emits the rule's tokens without the bonus."""
    from specviz.proof.bugs import BUGS

    P, Q, x, j, _ = make_case(4, 99, 3, 10, True)
    rule = specviz.verify(P, Q, x, j, rng=np.random.default_rng(11))
    mistake = BUGS["no_bonus"].verifier(P, Q, x, j, rng=np.random.default_rng(11))
    assert rule.bonus.any()
    np.testing.assert_array_equal(mistake.num_tokens, rule.num_tokens - rule.bonus)
    np.testing.assert_array_equal(mistake.tokens[~rule.bonus], rule.tokens[~rule.bonus])
    wrong = BUGS["wrong_bonus_row"].verifier(P, Q, x, j, rng=np.random.default_rng(11))  # control: counts agree,
    assert not np.array_equal(mistake.num_tokens, wrong.num_tokens)  # so only no_bonus subtracts the bonus
