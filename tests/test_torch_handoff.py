"""Inputs the NumPy code reads through a view or a conversion give the outputs of plain NumPy
arrays. Torch CPU tensors handed to the NumPy code (``verify._numpy_twin``): every kind of input
it takes gives NumPy's outputs field for field, as torch tensors; what it must not take goes to
torch's own code, which gives the same outputs or the same error. Big-endian tables give the
native tables' outputs and errors.

A spy counts the hand-overs, so a test that expects one fails when the input silently went the
other way (and the torch kernels, which tests force with ``SPECVIZ_BACKEND=torch``, are the
other side of each comparison).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import random_batch

import specviz.verifiers.verify as verify_mod
from specviz import InputError, Uniforms, verify, verify_flat
from specviz.verifiers.layout import padded_to_flat

B, K, V = 12, 3, 300  # V > 256: the two-level draw


@pytest.fixture
def handed(monkeypatch):
    """The number of calls the NumPy code took over from torch."""
    calls = []
    real = verify_mod._numpy_twin

    def spy(*a):
        out = real(*a)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(verify_mod, "_numpy_twin", spy)
    return calls


def batch(dtype=np.float32, seed=3):
    rng = np.random.default_rng(seed)
    target, draft, tokens, num = random_batch(rng, B, K, V, dtype=dtype)
    ua, us = rng.random((B, K)), rng.random(B)
    ua[rng.random((B, K)) < 0.4] = 0.0  # some rows accept every draft: the bonus is read too
    return target, draft, tokens, num, ua, us


def t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def same(res, ref):
    """Every field a torch tensor equal to NumPy's, dtype included."""
    for name, x, y in zip(ref._fields, res, ref, strict=True):
        assert isinstance(x, torch.Tensor), name
        assert x.numpy().dtype == y.dtype, name
        np.testing.assert_array_equal(x.numpy(), y, err_msg=name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_draft", [True, False])
def test_tensors_in_every_form_the_handover_takes_give_numpys_outputs(handed, dtype, with_draft):
    target, draft, tokens, num, ua, us = batch(dtype)
    d = draft if with_draft else None
    ref = verify(target, d, tokens, num, uniforms=Uniforms(ua, us))
    td = t(draft) if with_draft else None
    forms = {
        "Uniforms of tensors": lambda: verify(t(target), td, t(tokens), t(num), uniforms=Uniforms(t(ua), t(us))),
        "a (accept, sample) tuple": lambda: verify(t(target), td, t(tokens), t(num), uniforms=(t(ua), t(us))),
        "uniforms as NumPy arrays": lambda: verify(t(target), td, t(tokens), t(num), uniforms=Uniforms(ua, us)),
        "draft tokens as a list": lambda: verify(t(target), td, tokens.tolist(), t(num), uniforms=Uniforms(ua, us)),
        "tables that require grad": lambda: verify(
            t(target).requires_grad_(),
            None if td is None else td.clone().requires_grad_(),
            t(tokens),
            t(num),
            uniforms=Uniforms(t(ua), t(us)),
        ),
        "strided views of wider tables": lambda: verify(
            torch.cat([t(target), t(target)], -1)[..., :V],
            None if td is None else torch.cat([td, td], -1)[..., :V],
            t(tokens),
            t(num),
            uniforms=Uniforms(t(ua), t(us)),
        ),
    }
    if hasattr(torch, "_neg_view"):  # torch keeps the sign lazily; numpy() refuses such a view
        forms["a lazily negated table"] = lambda: verify(
            torch._neg_view(t(-target)), td, t(tokens), t(num), uniforms=Uniforms(t(ua), t(us))
        )
    for name, fn in forms.items():
        handed.clear()
        res = fn()
        assert handed == [True], name
        same(res, ref)
    assert ref.bonus.any() and (~ref.bonus).any() and (ref.num_accepted < num).any()


def test_flat_tensors_are_handed_over_too(handed):
    target, draft, tokens, num, ua, us = batch()
    flat = padded_to_flat(target, draft, tokens, num)
    valid = np.arange(K)[None, :] < num[:, None]
    ref = verify_flat(*flat, uniforms=Uniforms(ua[valid], us))
    res = verify_flat(*(t(a) for a in flat), uniforms=Uniforms(t(ua[valid]), t(us)))
    assert handed == [True]
    same(res, ref)


@pytest.mark.parametrize("layout", ["padded", "flat"])
def test_a_torch_generator_draws_the_same_uniforms_as_the_torch_kernels(monkeypatch, handed, layout):
    # The hand-over draws the uniforms with torch, in the torch code's order and shapes: a seeded
    # generator gives the tokens the torch kernels give (forced here with SPECVIZ_BACKEND=torch).
    target, draft, tokens, num, _, _ = batch()
    args = [t(a) for a in (target, draft, tokens, num)]
    fn = verify
    if layout == "flat":
        args = [t(a) for a in padded_to_flat(target, draft, tokens, num)]
        fn = verify_flat
    res = fn(*args, rng=torch.Generator().manual_seed(5))
    assert handed == [True]
    with monkeypatch.context() as m:
        m.setenv("SPECVIZ_BACKEND", "torch")
        kernels = fn(*args, rng=torch.Generator().manual_seed(5))
    for name, x, y in zip(res._fields, res, kernels, strict=True):
        assert torch.equal(x, y) or (x.is_floating_point() and torch.equal(x.isnan(), y.isnan())
                                     and torch.equal(x.nan_to_num(), y.nan_to_num())), name  # fmt: skip
    other = fn(*args, rng=torch.Generator().manual_seed(6))
    assert not torch.equal(other.sample_uniforms, res.sample_uniforms)  # the seed is used


def test_what_numpy_cannot_view_stays_with_torch_and_agrees(handed):
    target, draft, tokens, num, ua, us = batch()
    u = Uniforms(t(ua), t(us))
    for tab, dr in [
        (t(target).to(torch.bfloat16), t(draft).to(torch.bfloat16)),  # half precision
        (t(target), t(draft).double()),  # mixed dtypes
    ]:
        handed.clear()
        res = verify(tab, dr, t(tokens), t(num), uniforms=u, validate=False)
        assert handed == [False]
        ref = verify(tab.double().numpy(), dr.double().numpy(), tokens, num, uniforms=Uniforms(ua, us),
                     validate=False)  # fmt: skip
        assert isinstance(res.tokens, torch.Tensor)
        np.testing.assert_array_equal(res.tokens.numpy(), ref.tokens)


@pytest.mark.parametrize(
    "bad",
    [
        "token out of range",
        "both rng and uniforms",
        "uniforms of the wrong shape",
        "uniforms as a list",
        "uniforms as a triple",
        "a NaN in a row read",
    ],
)
def test_bad_torch_inputs_raise_numpys_error(bad):
    target, draft, tokens, num, ua, us = batch()
    kw = {"uniforms": Uniforms(ua, us)}
    if bad == "token out of range":
        tokens = tokens.copy()
        tokens[0, 0], num[0] = V, max(num[0], 1)
    elif bad == "both rng and uniforms":
        kw["rng"] = np.random.default_rng(0)
    elif bad == "uniforms of the wrong shape":
        kw["uniforms"] = Uniforms(ua[:, :1], us)
    else:
        target = target.copy()
        target[:, :, 5] = np.nan
    tkw = dict(kw, uniforms=Uniforms(t(kw["uniforms"][0]), t(kw["uniforms"][1])))
    if bad == "uniforms as a list":
        kw["uniforms"], tkw["uniforms"] = [ua, us], [t(ua), t(us)]
    elif bad == "uniforms as a triple":
        kw["uniforms"], tkw["uniforms"] = (ua, us, us), (t(ua), t(us), t(us))
    if "rng" in kw:
        tkw["rng"] = torch.Generator().manual_seed(0)
    with pytest.raises(InputError) as np_err:
        verify(target, draft, tokens, num, **kw)
    with pytest.raises(InputError) as t_err:
        verify(t(target), t(draft), t(tokens), t(num), **tkw)
    assert t_err.value.argument == np_err.value.argument


@pytest.mark.parametrize("V", [6, 300, 9001])  # 9001: the per-row pass (V >= 8192), odd V
@pytest.mark.parametrize("bad", [None, "nan", "negative and above one", "inf"])
@pytest.mark.parametrize("kind", ["f4", "f8"])
def test_big_endian_tables_give_the_native_outputs_and_errors(V, bad, kind):
    # The fast row checks read float bit patterns: a big-endian table must be read in native
    # order. Exact binary fractions, so a byte-swapped reading is far from the true values.
    p = np.zeros((3, 3, V))
    p[..., :4] = 0.25
    q = np.zeros((3, 2, V))
    q[..., 2:6] = 0.25
    if bad == "nan":
        p[:, 2, 1] = np.nan
    elif bad == "negative and above one":
        p[:, 2, :4] = [-0.5, 1.5, 0.0, 0.0]
    elif bad == "inf":
        p[:, 2, 1] = np.inf
    tokens, num = np.full((3, 2), 2, np.int64), np.full(3, 2)
    u = Uniforms(np.zeros((3, 2)), np.array([0.1, 0.5, 0.9]))  # every draft accepted: the bonus row is read

    def result(P, Q, validate):
        try:
            return "ok", verify(P, Q, tokens, num, uniforms=u, validate=validate).tokens.tolist()
        except InputError as e:
            return "raised", str(e)

    for validate in (True, False):
        native = result(p.astype("<" + kind), q.astype("<" + kind), validate)
        assert native[0] == ("ok" if bad is None else "raised")
        assert result(p.astype(">" + kind), q.astype(">" + kind), validate) == native
        assert result(p.astype(">" + kind), q.astype("<" + kind), validate) == native


def test_the_generator_draws_when_the_torch_code_draws(monkeypatch, handed):
    # Bad inputs: the same error, and the torch.Generator left where the torch kernels leave it
    # (a shape error stops before any draw; an id out of range is found after the draws). A
    # wrong kind of rng is reported only for inputs that pass the shape checks.
    target, draft, tokens, num, _, _ = batch()
    bad_ids = tokens.copy()
    bad_ids[0, 0], num[0] = V, max(num[0], 1)
    cases = {"a short num_draft": (tokens, num[:-1]), "an id out of range": (bad_ids, num), "good": (tokens, num)}

    def outcome(tok, n, rng):
        try:
            res = verify(t(target), t(draft), t(tok), t(n), rng=rng)
            return "ok", res.tokens.tolist()
        except InputError as e:
            return "raised", e.argument

    for name, (tok, n) in cases.items():
        handed.clear()
        gen = torch.Generator().manual_seed(3)
        ours = outcome(tok, n, gen), gen.get_state()
        assert handed == [True], name
        with monkeypatch.context() as m:
            m.setenv("SPECVIZ_BACKEND", "torch")
            gen = torch.Generator().manual_seed(3)
            kernels = outcome(tok, n, gen), gen.get_state()
        assert ours[0] == kernels[0], name
        assert torch.equal(ours[1], kernels[1]), name
        untouched = torch.equal(ours[1], torch.Generator().manual_seed(3).get_state())
        assert untouched == (name == "a short num_draft"), name
        assert outcome(tok, n, np.random.default_rng(0)) == ("raised", "num_draft" if n is not num else "rng")
