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
from specviz.proof.bugs import BUGS
from specviz.verifiers import _fused, reference
from specviz.verifiers.layout import padded_to_flat

pytest.importorskip("numba")


@pytest.fixture
def spy(monkeypatch):
    """Counts the rows the compiled passes handle; tests switch them on and off with SPECVIZ_BACKEND.

    "rows": block sums (V > 256); "accepted": rows through the accept loop; "drawn": rows
    drawn by the one-level loop (V <= 256) without handing back to NumPy.
    """
    calls = {"rows": 0, "accepted": 0, "drawn": 0}
    real_sums, real_accept, real_draw = _fused.block_sums, _fused.accept, _fused.draw_small

    def sums(P, p_start, Q, q_start, b, *rest):
        calls["rows"] += int(b.shape[0])
        return real_sums(P, p_start, Q, q_start, b, *rest)

    def accept(*args):
        out = real_accept(*args)
        calls["accepted"] += 0 if out is None else int(out.first_fail.shape[0])
        return out

    def draw(*args):
        out = real_draw(*args)
        calls["drawn"] += 0 if out is None else int(out.shape[0])
        return out

    monkeypatch.setattr(_fused, "block_sums", sums)
    monkeypatch.setattr(_fused, "accept", accept)
    monkeypatch.setattr(_fused, "draw_small", draw)
    return calls


def outcome(fn):
    try:
        return "ok", np.asarray(fn().tokens)
    except InputError as e:
        return "raised", (e.argument, str(e))


def both(monkeypatch, spy, fn, key="rows"):
    """(NumPy passes, Numba pass) outcomes of fn, and the rows the Numba pass handled (spy[key])."""
    monkeypatch.setenv(_fused.BACKEND_ENV, "numpy")
    before = dict(spy)
    pure = outcome(fn)
    assert spy == before, "SPECVIZ_BACKEND=numpy must not run the compiled passes"
    monkeypatch.setenv(_fused.BACKEND_ENV, "numba")
    fused = outcome(fn)
    return pure, fused, spy[key] - before[key]


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
    flat = padded_to_flat(target, draft, tokens, num)
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


def test_negative_control_a_kernel_off_by_one_token_is_caught(monkeypatch, spy):
    rng = np.random.default_rng(9)
    B, K, V = 64, 2, 2000
    target, draft, tokens, num = random_batch(rng, B, K, V, zero_fraction=0.0, dtype=np.float32)
    u = Uniforms(rng.random((B, K)), rng.random(B))
    real = _fused.block_sums

    def off_by_one(*args):
        out = real(*args)
        out[4][:] = np.minimum(out[4] + 1, V - 1)  # the next token: a search off by one
        return out

    fn = lambda: verify(target, draft, tokens, num, uniforms=u)  # noqa: E731
    pure, fused, _ = both(monkeypatch, spy, fn)
    assert_same(pure, fused)
    monkeypatch.setattr(_fused, "block_sums", off_by_one)
    monkeypatch.setenv(_fused.BACKEND_ENV, "numba")
    assert not np.array_equal(outcome(fn)[1], pure[1])


def test_switched_off_or_missing_numba_falls_back(monkeypatch):
    monkeypatch.setenv(_fused.BACKEND_ENV, "numpy")
    assert not _fused.enabled()
    monkeypatch.setenv(_fused.BACKEND_ENV, "numba")
    assert _fused.enabled()
    monkeypatch.setattr(_fused, "_kernels", False)  # what _loops() leaves when Numba cannot be imported
    assert not _fused.enabled()
    rng = np.random.default_rng(1)
    target, draft, tokens, num = random_batch(rng, 4, 2, 600, dtype=np.float32)
    res = verify(target, draft, tokens, num, rng=np.random.default_rng(0))
    assert (res.num_tokens >= 1).all()


# --- the accept loop and the one-level draw (every verification; the only draw at V <= 256) -----


def small_case(seed, V, B=400, K=4, dtype=np.float64, zero_fraction=0.3):
    rng = np.random.default_rng(seed)
    target, draft, tokens, num = random_batch(rng, B, K, V, zero_fraction=zero_fraction, dtype=dtype)
    ua, us = rng.random((B, K)), rng.random(B)
    ua[rng.random((B, K)) < 0.1] = 0.0
    us[:2] = [0.0, np.nextafter(1.0, 0.0)]
    return target, draft, tokens, num, Uniforms(ua, us)


@pytest.mark.parametrize("name", ["verify", *BUGS])
@pytest.mark.parametrize("V", [2, 5, 256, 300])
def test_every_rule_gives_the_same_tokens_compiled_or_not(monkeypatch, spy, name, V):
    # Every bug of the catalogue swaps one step of the rule (coins, count, bonus row, ...): the
    # compiled loops must follow each swap exactly as the NumPy code does, or hand back to it.
    fn = verify if name == "verify" else BUGS[name].verifier
    target, draft, tokens, num, u = small_case(V, V)
    for d in (draft, None):
        for validate in (False, True):
            call = lambda d=d, v=validate: fn(target, d, tokens, num, uniforms=u, validate=v)  # noqa: E731
            pure, fused, rows = both(monkeypatch, spy, call, key="accepted")
            assert_same(pure, fused)
            assert pure[0] == "ok", (name, pure)
            res_pure = _fields(monkeypatch, call, "0")
            res_fused = _fields(monkeypatch, call, "1")
            for field, a, b in zip(res_pure._fields, res_pure, res_fused, strict=True):
                np.testing.assert_array_equal(a, b, err_msg=f"{name} {field}")
    if name == "verify":
        assert spy["accepted"] > 0  # the correct rule runs the accept loop
        if V <= 256:
            assert spy["drawn"] > 0  # and the one-level draw


def _fields(monkeypatch, call, env):
    monkeypatch.setenv(_fused.BACKEND_ENV, {"0": "numpy", "1": "numba"}[env])
    res = call()
    return specviz.Verification(*[np.asarray(f) for f in res])


@pytest.mark.parametrize("layout", ["broadcast", "flat", "torch", "float32"])
def test_the_lab_layouts_give_the_same_results(monkeypatch, spy, layout):
    # The Bug lab and the Tokens page verify broadcast rows; prove, flat and torch inputs too.
    V, B, K = 4, 3000, 3
    target, draft, tokens, num, u = small_case(11, V, B=B, K=K)
    if layout == "broadcast":
        target = np.broadcast_to(target[0, 0], target.shape)
        draft = np.broadcast_to(draft[0, 0], draft.shape)
    if layout == "float32":
        target, draft = target.astype(np.float32), draft.astype(np.float32)

    def call():
        if layout == "flat":
            valid = np.arange(K)[None, :] < num[:, None]
            flat = padded_to_flat(target, draft, tokens, num)
            return verify_flat(*flat, uniforms=Uniforms(u.accept[valid], u.sample), validate=False)
        if layout == "torch":
            args = [torch.as_tensor(a) for a in (target, draft, tokens, num)]
            return verify(*args, uniforms=Uniforms(*(torch.as_tensor(a) for a in u)), validate=False)
        return verify(target, draft, tokens, num, uniforms=u, validate=False)

    pure, fused, rows = both(monkeypatch, spy, call, key="accepted")
    assert rows == B and spy["drawn"] > 0
    assert_same(pure, fused)
    a, b = _fields(monkeypatch, call, "0"), _fields(monkeypatch, call, "1")
    for field, x, y in zip(a._fields, a, b, strict=True):
        np.testing.assert_array_equal(x, y, err_msg=field)


@pytest.mark.parametrize("validate", [True, False])
@pytest.mark.parametrize("bad", ["id_minus_one", "id_V", "nan_probe", "above_one_probe", "nan_row", "negative_row",
                                 "above_one_row", "empty_residual"])  # fmt: skip
def test_small_v_bad_inputs_raise_or_draw_the_same(monkeypatch, spy, validate, bad):
    V, B, K = 6, 50, 2
    target, draft, tokens, num, u = small_case(21, V, B=B, K=K, zero_fraction=0.0)
    num[:] = K
    tokens = np.where(tokens < 0, 1, tokens)  # every row drafts K tokens, all in [0, V)
    assert verify(target, draft, tokens, num, uniforms=u).num_tokens.min() >= 1  # the clean case is fine
    if bad == "id_minus_one":
        tokens[3, 0] = -1  # the placeholder of serving engines, below num_draft
    elif bad == "id_V":
        tokens[4, 1] = V
    elif bad == "nan_probe":
        target[5, 0, tokens[5, 0]] = np.nan
    elif bad == "above_one_probe":
        draft[6, 0, tokens[6, 0]] = 1.5
    elif bad == "nan_row":
        target[:, :, 2] = np.nan
    elif bad == "negative_row":
        target[:, K, 1] = -0.5  # the bonus row: read from p alone
        u = Uniforms(np.zeros((B, K)), u.sample)
    elif bad == "above_one_row":
        target[:, K, 1] = 1.25  # not a probability; with validate=False the guard lets it through
        u = Uniforms(np.zeros((B, K)), u.sample)
    elif bad == "empty_residual":
        draft[:, 0] = target[:, 0]  # p == q: no residual mass, drawn from p
        u = Uniforms(np.full((B, K), 0.999999), u.sample)
    call = lambda: verify(target, draft, tokens, num, uniforms=u, validate=validate)  # noqa: E731
    pure, fused, _ = both(monkeypatch, spy, call, key="accepted")
    assert_same(pure, fused)
    if bad.startswith("id_") or bad in ("nan_row",) or (validate and bad != "empty_residual"):
        assert pure[0] == "raised", pure
    if bad == "empty_residual":
        assert pure[0] == "ok"


def test_negative_control_an_accept_loop_with_the_inclusive_coin_is_caught(monkeypatch, spy):
    # The accept loop run with u * q <= p where the rule says <: a coin of exactly 0 then accepts a
    # draft the target gives probability 0. The comparison must see it.
    V, B, K = 4, 200, 2
    target, draft, tokens, num, u = small_case(31, V, B=B, K=K, zero_fraction=0.0)
    num[:] = K
    tokens = np.zeros((B, K), dtype=np.int64)
    target[:, :, 0] = 0.0  # p(x) = 0 for every draft
    target /= target.sum(-1, keepdims=True)
    draft[:, :, 0] = 0.5
    draft /= draft.sum(-1, keepdims=True)
    u = Uniforms(np.zeros((B, K)), u.sample)
    call = lambda: verify(target, draft, tokens, num, uniforms=u)  # noqa: E731
    pure, fused, rows = both(monkeypatch, spy, call, key="accepted")
    assert rows == B
    assert_same(pure, fused)
    # The compiled loop has no mistake switch any more: the control with u * q <= p is the reference
    # with its accept step swapped (specviz.proof.engine_bugs.FAULTS["inclusive_coin"]).
    from specviz.proof.engine_bugs import coin_at_most

    leq = reference.with_step(reference.verify, "inclusive_coin", accept=coin_at_most)
    assert not np.array_equal(outcome(lambda: leq(target, draft, tokens, num, uniforms=u))[1], pure[1])


# --- validate=True: a row summing to 1 +- 1e-4 gets one verdict, whatever computes it -----------


def exact_grid_sum(row) -> float:
    row = np.asarray(row)
    scale = row.dtype.type(reference.GRID)
    return float(np.floor(row * scale).astype(np.float64).sum() / reference.GRID)


def test_the_engine_floors_to_the_references_grid():
    # The grid is the reference's constant; the compiled loops (which cannot import it without a
    # cycle while the reference imports the engine) and the NumPy draw hold the same number.
    from specviz.verifiers import _fused_kernel, _sample

    assert _sample.GRID == _fused_kernel.GRID == reference.GRID == 2.0**48
    assert _sample.MAX_TOTAL == _fused_kernel.MAX_TOTAL == 16 * reference.GRID


def test_the_compiled_coin_is_the_engines_accept_comparison():
    # specviz.verifiers._xp.accepts is the engine's one accept comparison; the compiled loop inlines it,
    # and Numba's disk cache watches only _fused_kernel.py. So the loop on disk must still answer as
    # accepts answers now on its boundary: u * q == p (rejected by <, accepted by <=), just below it,
    # q = 0 with a coin of 0, NaN. A stale cache after a change of accepts fails here (delete it).
    from specviz.verifiers._xp import accepts

    p = np.array([[0.25, 0.0, 0.5, 0.3, np.nan]])  # (1, K) p(x) at each position, x = 0
    q = np.array([[0.5, 0.0, 1.0, 0.3, 0.5]])
    ua = np.array([[0.5, 0.0, np.nextafter(0.5, 0.0), 0.0, 0.5]])
    for i in range(p.shape[1]):
        P = np.stack([[p[0, i], 1.0 - p[0, i] if p[0, i] == p[0, i] else 0.5], [1.0, 0.0]])[None]  # (1, 2, 2)
        Q = np.array([[[q[0, i], 1.0 - q[0, i]]]])
        acc = _fused.accept(P, None, Q, None, np.zeros((1, 1), np.int64), np.array([1]), ua[:, i : i + 1], 2, False)
        assert acc is not None and int(acc.first_fail[0]) == int(accepts(ua[0, i], q[0, i], p[0, i])), i


@pytest.mark.parametrize("V", [200, 512, 9000])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("where", ["residual_p", "residual_q", "bonus_p"])
def test_rows_at_the_sum_tolerance_get_one_verdict_on_every_path(monkeypatch, V, dtype, where):
    # The verdict is |sum(floor(2^48 p)) / 2^48 - 1| > 1e-4, an exact number; NumPy's float32 sums
    # and the Numba pass's exact sums used to disagree on rows within ~1e-7 of the tolerance.
    rng = np.random.default_rng(V + len(where))
    seen = {"ok": 0, "raised": 0}
    for trial in range(30):
        p = random_probs(rng, (V,)).astype(np.float64)
        q = random_probs(rng, (V,)).astype(np.float64)
        edge = 1.0 + rng.choice([-1, 1]) * (1e-4 + rng.uniform(-2e-7, 2e-7))
        target = np.stack([p, random_probs(rng, (V,))]).astype(dtype)[None]  # (1, 2, V)
        draft = q.astype(dtype)[None, None]
        if where == "residual_p":
            target[0, 0] = (p * edge).astype(dtype)
        elif where == "residual_q":
            draft[0, 0] = (q * edge).astype(dtype)
        else:
            target[0, 1] = (target[0, 1].astype(np.float64) * edge).astype(dtype)
        x = int(np.argmax(draft[0, 0].astype(np.float64) - target[0, 0]))  # q(x) > p(x)
        coin = 0.0 if where == "bonus_p" else 0.999999  # accept (bonus row read) or reject (residual)
        args = (target, draft, np.array([[x]]), np.array([1]))
        u = Uniforms(np.array([[coin]]), np.array([0.3]))
        checked = {"residual_p": target[0, 0], "residual_q": draft[0, 0], "bonus_p": target[0, 1]}[where]
        expect = "raised" if abs(exact_grid_sum(checked) - 1) > 1e-4 else "ok"
        seen[expect] += 1
        results = {}
        for env in ("0", "1"):
            monkeypatch.setenv(_fused.BACKEND_ENV, {"0": "numpy", "1": "numba"}[env])
            results[f"numpy/{env}"] = outcome(lambda a=args, u=u: verify(*a, uniforms=u))
        t_args = [torch.as_tensor(a) for a in args]
        t_u = Uniforms(*(torch.as_tensor(a) for a in u))
        results["torch"] = outcome(lambda a=t_args, u=t_u: verify(*a, uniforms=u))
        with monkeypatch.context() as m:  # the torch kernels themselves (what CUDA runs)
            m.setenv(_fused.BACKEND_ENV, "torch")
            results["torch kernels"] = outcome(lambda a=t_args, u=t_u: verify(*a, uniforms=u))
        kinds = {k: r[0] for k, r in results.items()}
        assert set(kinds.values()) == {expect}, (trial, expect, exact_grid_sum(checked), kinds)
        if expect == "raised":
            assert len({r[1] for r in results.values()}) == 1, results  # the same argument and message
    assert seen["ok"] and seen["raised"]  # both sides of the tolerance were reached


@pytest.mark.parametrize("V", [200, 9000])
def test_a_deterministic_drafters_residual_row_is_sum_checked(monkeypatch, spy, V):
    # With draft_probs=None the residual is p without the drafted token; validate=True checks that
    # p row's sum (its grid total plus the removed token's weight) at every V, both ways.
    rng = np.random.default_rng(V)
    target = random_probs(rng, (4, 2, V))
    target[:, 0] *= 1.01
    tokens = np.argmax(target[:, 0], -1)[:, None]  # the most likely token, p(x) well below 1
    u = Uniforms(np.full((4, 1), 0.999999), rng.random(4))  # accept iff u < p(x): every row rejects
    for validate, expect in ((True, "raised"), (False, "ok")):
        call = lambda v=validate: verify(target, None, tokens, np.ones(4, dtype=np.int64), uniforms=u, validate=v)  # noqa: E731
        pure, fused, _ = both(monkeypatch, spy, call)
        assert_same(pure, fused)
        assert pure[0] == expect, (validate, pure)
        if expect == "raised":
            assert pure[1][0] == "target_probs" and abs(float(pure[1][1].rsplit(" ", 1)[1]) - 1.01) < 1e-9, pure


def test_numba_cache_dir_moves_the_compiled_loops_and_the_second_process_loads_them(tmp_path):
    # README: the first call compiles into Numba's disk cache, NUMBA_CACHE_DIR moves it, and a
    # later process loads the loops from there (it writes nothing new).
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import numpy as np, specviz\n"
        "from specviz.verifiers import _fused\n"
        "assert _fused.enabled()\n"
        "rng = np.random.default_rng(0)\n"
        "for V in (5, 600):\n"
        "    t = rng.random((4, 2, V)); t /= t.sum(-1, keepdims=True)\n"
        "    d = rng.random((4, 1, V)); d /= d.sum(-1, keepdims=True)\n"
        "    for validate in (True, False):\n"
        "        specviz.verify(t, d, np.zeros((4, 1), int), np.ones(4, int), rng=rng, validate=validate)\n"
    )
    cache = tmp_path / "numba-cache"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    env.pop(_fused.BACKEND_ENV, None)
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=300, cwd=tmp_path)
    first = {p: p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file()}
    assert any(p.name.startswith("_fused_kernel") and p.suffix == ".nbi" for p in first), sorted(first)
    assert any(p.suffix == ".nbc" for p in first)
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=300, cwd=tmp_path)
    second = {p: p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file()}
    assert second == first  # loaded, not compiled again
