"""Lossy rules: their exact TV from the target against independent closed forms, parity, inputs.

# B rows, K drafts (padded width), V vocabulary

Every figure in specviz.verifiers.lossy's docstring is computed here twice: by the exact court's
enumeration of the implementation (specviz.proof.exact.verifier_law, one round of one draft, the
first token) and by a closed form written here or in specviz.app.interview.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from specviz import InputError, Uniforms, verify
from specviz.app.interview import typical_acceptance_law
from specviz.proof.exact import verifier_law
from specviz.proof.markov import Drafter, make_chain, random_chain
from specviz.verifiers.lossy import verify_lenient, verify_ratio_threshold, verify_typical

TOL = 1e-12
TEXTBOOK_P = np.array([0.5, 0.3, 0.15, 0.05])
UNIFORM_Q = np.full(4, 0.25)
TOY_P, TOY_Q = np.array([1 / 3, 2 / 3]), np.array([2 / 3, 1 / 3])


def first_token_law(verifier, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Exact law of the first token of a context-free pair, one draft per round."""
    V = p.size
    target, draft = make_chain(np.tile(p, (V + 1, 1))), make_chain(np.tile(q, (V + 1, 1)))
    res = verifier_law(verifier, target, Drafter(draft), L=1, num_draft=1)
    assert res.unresolved == 0
    return res.law


def tv(a: np.ndarray, b: np.ndarray) -> float:
    return 0.5 * float(np.abs(a - b).sum())


@pytest.mark.parametrize("eps,delta,want_tv", [(0.3, 0.09, 0.3), (0.2, 1.0, 0.1)])
def test_typical_acceptance_tv_matches_the_closed_form(eps, delta, want_tv):
    rule = functools.partial(verify_typical, epsilon=eps, delta=delta, fallback="target")
    law = first_token_law(rule, TEXTBOOK_P, UNIFORM_Q)
    closed = typical_acceptance_law(TEXTBOOK_P, UNIFORM_Q, eps, delta)
    assert np.abs(law - closed).max() < TOL
    assert abs(tv(law, TEXTBOOK_P) - want_tv) < TOL


def test_typical_threshold_of_the_textbook_row():
    h = -(TEXTBOOK_P * np.log(TEXTBOOK_P)).sum()
    assert round(float(min(0.3, 0.09 * np.exp(-h))), 4) == 0.0287  # the docstring's figure


def test_typical_acceptance_with_medusas_argmax_fallback():
    # Medusa's medusa_generate: the token after the kept drafts is the target's argmax. With its
    # defaults (epsilon 0.09, delta 0.3: threshold min(0.09, 0.3 exp(-H)) = 0.09) tokens 0, 1, 2
    # are kept, and token 3's quarter of the mass goes to token 0: (0.5, 0.25, 0.25, 0), TV 0.1.
    law = first_token_law(verify_typical, TEXTBOOK_P, UNIFORM_Q)
    ok = TEXTBOOK_P > 0.09
    closed = UNIFORM_Q * ok + (1 - UNIFORM_Q[ok].sum()) * np.eye(4)[np.argmax(TEXTBOOK_P)]
    assert np.abs(law - closed).max() < TOL
    assert abs(tv(law, TEXTBOOK_P) - 0.1) < TOL


def test_typical_acceptance_with_the_typical_sampling_fallback():
    # Fallback "typical": the replacement is p restricted to p >= threshold. Threshold 0.2 keeps
    # tokens 0 and 1 for drafts and for the fallback: q [ok] + (1 - q(ok)) p_ok / p(ok).
    rule = functools.partial(verify_typical, epsilon=0.2, delta=1.0, fallback="typical")
    law = first_token_law(rule, TEXTBOOK_P, UNIFORM_Q)
    ok = TEXTBOOK_P > 0.2
    trunc = np.where(TEXTBOOK_P >= 0.2, TEXTBOOK_P, 0) / TEXTBOOK_P[TEXTBOOK_P >= 0.2].sum()
    closed = UNIFORM_Q * ok + (1 - UNIFORM_Q[ok].sum()) * trunc
    assert np.abs(law - closed).max() < TOL
    assert tv(law, TEXTBOOK_P) > 0.1  # the truncated fallback moves the law further


def test_lenient_tv_on_the_toy_pair():
    law = first_token_law(verify_lenient, TOY_P, TOY_Q)  # default lenience 3/4
    keep = np.minimum(TOY_Q, TOY_P / 0.75)
    res = np.maximum(TOY_P - TOY_Q, 0)
    closed = keep + (1 - keep.sum()) * res / res.sum()
    assert np.abs(law - closed).max() < TOL
    assert abs(tv(law, TOY_P) - 1 / 9) < TOL


def test_ratio_threshold_tv_matches_the_closed_form():
    law = first_token_law(verify_ratio_threshold, TEXTBOOK_P, UNIFORM_Q)  # default theta 1/2
    keep = np.where(TEXTBOOK_P >= 0.5 * UNIFORM_Q, UNIFORM_Q, 0.0)
    res = np.maximum(TEXTBOOK_P - UNIFORM_Q, 0)
    closed = keep + (1 - keep.sum()) * res / res.sum()
    assert np.abs(law - closed).max() < TOL
    assert abs(tv(law, TEXTBOOK_P) - 0.1) < TOL  # the docstring's figure


def test_lenience_one_is_the_chain_rule_exactly():
    # theta = 1: u * 1 * q < p is verify's test, the residual is verify's: the target's law.
    rng = np.random.default_rng(5)
    target, draft = random_chain(3, rng, zero_fraction=0.34), random_chain(3, rng, zero_fraction=0.34)
    rule = functools.partial(verify_lenient, lenience=1.0)
    for mode in ("sample", "argmax"):
        res = verifier_law(rule, target, Drafter(draft, mode), L=3, num_draft=range(3), K=2)
        assert np.abs(res.law - target.joint_law(3)).max() < TOL, mode
    T = rng.dirichlet(np.ones(5), size=(50, 4))
    Q = rng.dirichlet(np.ones(5), size=(50, 3))
    x = rng.integers(0, 5, size=(50, 3))
    j = rng.integers(0, 4, size=50)
    u = Uniforms(rng.random((50, 3)), rng.random(50))
    assert np.array_equal(rule(T, Q, x, j, uniforms=u).num_accepted, verify(T, Q, x, j, uniforms=u).num_accepted)


def test_lenient_keeps_more_than_the_chain():
    rng = np.random.default_rng(6)
    target, draft = random_chain(3, rng), random_chain(3, rng)
    chain = verifier_law(verify, target, Drafter(draft), L=2, num_draft=2)
    lenient = verifier_law(verify_lenient, target, Drafter(draft), L=2, num_draft=2)
    assert lenient.expected_tokens[0, 2] > chain.expected_tokens[0, 2] + 1e-3
    assert tv(lenient.law, target.joint_law(2)) > 1e-3


@pytest.mark.parametrize(
    "rule",
    [verify_typical, functools.partial(verify_typical, fallback="typical"), verify_lenient, verify_ratio_threshold],
    ids=["typical", "typical-sampled", "lenient", "ratio"],
)
def test_numpy_and_torch_give_identical_tokens(rule):
    rng = np.random.default_rng(7)
    B, K, V = 200, 3, 6
    T = rng.dirichlet(np.full(V, 0.4), size=(B, K + 1))
    Q = rng.dirichlet(np.full(V, 0.4), size=(B, K))
    x = rng.integers(0, V, size=(B, K))
    j = rng.integers(0, K + 1, size=B)
    u = Uniforms(rng.random((B, K)), rng.random(B))
    a = rule(T, Q, x, j, uniforms=u)
    t = [torch.from_numpy(v) for v in (T, Q, x, j)]
    b = rule(*t, uniforms=Uniforms(torch.from_numpy(u.accept), torch.from_numpy(u.sample)))
    assert np.array_equal(a.tokens, b.tokens.numpy())
    assert 0 < a.num_accepted.mean() < j.mean()  # both outcomes exercised


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda a: verify_lenient(*a, lenience=0.0), "lenience"),
        (lambda a: verify_lenient(*a, lenience=1.5), "lenience"),
        (lambda a: verify_typical(*a, epsilon=-1.0), "epsilon"),
        (lambda a: verify_typical(*a, fallback="greedy"), "fallback"),
        (lambda a: verify_typical(a[0][:, :1], *a[1:]), "target_probs"),
        (lambda a: verify_ratio_threshold(*a, theta=0.0), "theta"),
    ],
)
def test_bad_input_names_the_argument(call, match):
    args = (np.full((1, 3, 2), 0.5), np.full((1, 2, 2), 0.5), np.array([[0, 1]]), np.array([2]))
    with pytest.raises(InputError, match=match):
        call(args)
