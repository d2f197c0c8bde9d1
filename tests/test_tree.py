"""Tree verification: its exact law by enumeration, a seeded chi-square, parity, input errors.

# B rows, N nodes per tree (node 0 the root), V vocabulary

Exact tests: a context-dependent target and drafter give a p row and a q row for every prefix
of up to 2 tokens (random, with zeros in both supports). A tree shape (parents in topological
order) is filled with candidate tokens: every assignment, weighted by its probability when each
node's children are drawn i.i.d. from the node's q row, or one deterministic assignment (each
node's children are its q row's top tokens, q unused by the verifier). For each assignment
the uniforms are cut into cells by thresholds computed here from the rule's definition (each
candidate's acceptance probability in the one state it can be tried in, the CDF points of every
law the final token can be drawn from), the implementation is evaluated at every cell's centre,
and the cells' volumes give the law of the emitted tokens. Continued by sampling from the
target, it must equal the target's joint law to 1e-12; a deliberate mistake must not.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from specviz import InputError, Uniforms, verify
from specviz.proof.exact import verifier_law
from specviz.proof.markov import Drafter, random_chain
from specviz.proof.stats import ALPHA, joint_test
from specviz.verifiers import reference
from specviz.verifiers.tree import (
    context_free_trees,
    kary_expected_accepted,
    kary_parents,
    node_acceptance,
    trace,
    verify_tree,
    verify_tree_chain,
)

TOL = 1e-12
DEPTH = 2  # the deepest node; laws are compared on DEPTH + 1 tokens

Rows = dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]]  # prefix -> (p row, q row)

SHAPES = {
    "two candidates": [-1, 0, 0],
    "one then two": [-1, 0, 1, 1],
    "two, first with two": [-1, 0, 0, 1, 1],
    "depth-first numbering": [-1, 0, 1, 0, 3],
    "full binary": [-1, 0, 0, 1, 1, 2, 2],
}


def random_row(rng: np.random.Generator, V: int, zero_fraction: float) -> np.ndarray:
    x = rng.gamma(0.6, size=V)
    x[rng.random(V) < zero_fraction] = 0.0
    if x.sum() == 0:
        x[rng.integers(V)] = 1.0
    return x / x.sum()


def random_rows(V: int, seed: int, zero_fraction: float = 0.3) -> Rows:
    rng = np.random.default_rng(seed)
    return {
        pre: (random_row(rng, V, zero_fraction), random_row(rng, V, zero_fraction))
        for n in range(DEPTH + 1)
        for pre in itertools.product(range(V), repeat=n)
    }


def prefixes(parents: list[int], tokens: list[int]) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = [()]
    for n in range(1, len(parents)):
        out.append(out[parents[n]] + (tokens[n],))
    return out


def assignments(rows: Rows, parents: list[int], V: int, iid: bool):
    """Every candidate-token assignment (node 0's token is 0) with its probability."""
    N = len(parents)
    if not iid:  # children of a node: its q row's tokens, most likely first (ties: lowest id)
        tokens = [0] * N
        rank = [0] * N
        for n in range(1, N):
            pre = prefixes(parents, tokens)[parents[n]]
            q = rows[pre][1]
            tokens[n] = int(np.lexsort((np.arange(V), -q))[rank[parents[n]]])
            rank[parents[n]] += 1
        return [(tokens, 1.0)]
    out = []
    for ys in itertools.product(range(V), repeat=N - 1):
        tokens = [0, *ys]
        pres = prefixes(parents, tokens)
        pr = 1.0
        for n in range(1, N):
            pr *= rows[pres[parents[n]]][1][tokens[n]]
        if pr > 0:
            out.append((tokens, pr))
    return out


def reference_thresholds(rows: Rows, parents: list[int], tokens: list[int], iid: bool):
    """From the definition: each node's acceptance probability in the state it is tried in,
    and every law the final token can be drawn from."""
    N = len(parents)
    pres = prefixes(parents, tokens)
    accept = [0.0] * N
    finals = []
    for c in range(N):
        r = rows[pres[c]][0].copy()
        for n in range(c + 1, N):
            if parents[n] != c:
                continue
            y = tokens[n]
            q = rows[pres[c]][1] if iid else np.eye(r.size)[y]
            accept[n] = min(1.0, r[y] / q[y]) if q[y] > 0 else 0.0
            res = np.maximum(r - q, 0.0)
            r = res / res.sum() if res.sum() > 0 else rows[pres[c]][0]
            finals.append(r)
        finals.append(r)
    return accept, finals


def tree_batch(rows: Rows, parents: list[int], tokens: list[int], iid: bool):
    pres = prefixes(parents, tokens)
    T = np.stack([rows[p][0] for p in pres])  # (N, V)
    Q = np.stack([rows[p][1] for p in pres]) if iid else None
    return T, Q


def reset_to_target(r, q, y, M, p):
    """The classic mistake at a node: after a rejection r becomes the node's target row again."""
    return p.copy()


def rule_or_mistake(residual: str):
    """verify_tree (``"residual"``), or the tree reference with its residual step swapped (``"target"``)."""
    if residual == "residual":
        return verify_tree
    return reference.with_step(reference.verify_tree, "tree_resample_from_p", residual=reset_to_target)


def enumerate_law(rows: Rows, parents: list[int], V: int, iid: bool, residual: str = "residual"):
    """Law of the emitted tokens (dict) and the expected accepted count, from the implementation."""
    N = len(parents)
    Ts, Qs, toks, ua, us, weight = [], [], [], [], [], []
    for tokens, pr in assignments(rows, parents, V, iid):
        accept, finals = reference_thresholds(rows, parents, tokens, iid)
        cuts = np.unique(np.concatenate([[0.0, 1.0]] + [np.cumsum(f) for f in finals]).clip(0, 1))
        s_mid, s_len = 0.5 * (cuts[1:] + cuts[:-1]), np.diff(cuts)
        T, Q = tree_batch(rows, parents, tokens, iid)
        for side in itertools.product((0, 1), repeat=N - 1):
            t = np.array(accept[1:])
            mid = np.where(side, 0.5 * (1 + t), 0.5 * t)
            vol = np.prod(np.where(side, 1 - t, t))
            if vol == 0:
                continue
            for sm, sl in zip(s_mid, s_len, strict=True):
                if sl == 0:
                    continue
                Ts.append(T), toks.append(tokens), ua.append(mid), us.append(sm), weight.append(pr * vol * sl)
                if Q is not None:
                    Qs.append(Q)
    B = len(Ts)
    T = np.stack(Ts)
    Q = np.stack(Qs) if iid else None
    # validate=False: the enumeration's cut points include uniforms of exactly 1 (a set of measure 0)
    res = rule_or_mistake(residual)(T, Q, np.array(toks), np.tile(parents, (B, 1)), np.full(B, N),
                                    uniforms=Uniforms(np.array(ua).reshape(B, N - 1), np.array(us)), validate=False)
    law: dict[tuple[int, ...], float] = {}
    for b in range(B):
        out = tuple(int(t) for t in res.tokens[b, : res.num_tokens[b]])
        law[out] = law.get(out, 0.0) + weight[b]
    accepted = float(np.dot(weight, res.num_accepted))
    return law, accepted


def continued(rows: Rows, V: int, law: dict, n: int) -> np.ndarray:
    out = np.zeros((V,) * n)
    for o, pr in law.items():
        for rest in itertools.product(range(V), repeat=n - len(o)):
            z, c = o + rest, pr
            for i in range(len(o), n):
                c *= rows[z[:i]][0][z[i]]
            out[z] += c
    return out


def target_law(rows: Rows, V: int, n: int) -> np.ndarray:
    return continued(rows, V, {(): 1.0}, n)


# The full binary tree at V = 3 has 3^6 assignments: left out to keep the run short.
CASES = [(s, V, seed) for s in SHAPES for V, seed in ((2, 1), (3, 2)) if not (s == "full binary" and V == 3)]


@pytest.mark.parametrize("iid", [True, False], ids=["iid", "deterministic"])
@pytest.mark.parametrize("shape,V,seed", CASES)
def test_exact_law_is_the_target(shape, V, seed, iid):
    rows = random_rows(V, seed)
    law, _ = enumerate_law(rows, SHAPES[shape], V, iid)
    assert abs(sum(law.values()) - 1) < TOL
    got = continued(rows, V, law, DEPTH + 1)
    assert np.abs(got - target_law(rows, V, DEPTH + 1)).max() < TOL


@pytest.mark.parametrize("iid", [True, False], ids=["iid", "deterministic"])
def test_negative_control_resampling_from_the_target_is_caught(iid):
    # The classic mistake at a node: after a rejection draw from p again instead of the residual.
    rows = random_rows(3, 2)
    law, _ = enumerate_law(rows, SHAPES["two, first with two"], 3, iid, residual="target")
    got = continued(rows, 3, law, DEPTH + 1)
    assert 0.5 * np.abs(got - target_law(rows, 3, DEPTH + 1)).sum() > 1e-3


def test_two_candidates_keep_more_than_one():
    # Two i.i.d. candidates at the root: Pr[accept] = a + (1 - a) sum min(r', q) >= a.
    rows = random_rows(3, 5, zero_fraction=0.0)
    _, one = enumerate_law(rows, [-1, 0], 3, True)
    _, two = enumerate_law(rows, [-1, 0, 0], 3, True)
    p, q = rows[()]
    a = np.minimum(p, q).sum()
    r = np.maximum(p - q, 0) / (1 - a)
    assert abs(one - a) < TOL
    assert abs(two - (a + (1 - a) * np.minimum(r, q).sum())) < TOL
    assert abs(two - node_acceptance(p, q, 2)) < TOL
    assert two > one + 1e-3


def test_kary_closed_form_is_the_chains_at_k_1():
    p, q = np.array([0.5, 0.3, 0.15, 0.05]), np.full(4, 0.25)
    a = np.minimum(p, q).sum()
    for K in (1, 2, 3):
        assert abs(kary_expected_accepted(p, q, 1, K) - a * (1 - a**K) / (1 - a)) < TOL
    assert kary_parents(2, 2).tolist() == [-1, 0, 0, 1, 1, 2, 2]
    assert abs(kary_expected_accepted(p, q, 2, 1, iid=False) - 0.8) < TOL  # top-2 of uniform q: tokens 0, 1


@pytest.mark.parametrize("k,iid", [(2, True), (3, True), (2, False), (3, False)])
def test_measured_accepted_matches_the_closed_form(k, iid):
    # 20,000 seeded k-ary trees of depth 2; |mean - exact| < 4 standard errors (a false alarm
    # about 6e-5 of the time). The mistake (resample from p after a rejection) must miss by more.
    p, q = np.array([0.5, 0.3, 0.15, 0.05]), np.full(4, 0.25)
    batch = context_free_trees(p, q, kary_parents(k, 2), 20_000, np.random.default_rng(k), iid=iid)
    want = kary_expected_accepted(p, q, k, 2, iid=iid)
    rng = np.random.default_rng(100 + k)
    ua, us = rng.random((20_000, batch.parents.shape[1] - 1)), rng.random(20_000)
    for residual, ok in (("residual", True), ("target", False)):
        acc = rule_or_mistake(residual)(*batch, uniforms=Uniforms(ua, us)).num_accepted
        z = abs(acc.mean() - want) / (acc.std() / np.sqrt(acc.size))
        assert (z < 4) == ok, (residual, z)


def test_chain_shaped_tree_through_the_court():
    # One candidate per node is the chain rule: the court finds the target's law of 3 tokens over
    # rounds with ragged draft counts, and the chain's exact tokens per verification.
    rng = np.random.default_rng(12)
    target, draft = random_chain(3, rng, zero_fraction=0.34), random_chain(3, rng, zero_fraction=0.34)
    for mode in ("sample", "argmax"):
        res = verifier_law(verify_tree_chain, target, Drafter(draft, mode), L=3, num_draft=range(4), K=3)
        chain = verifier_law(verify, target, Drafter(draft, mode), L=3, num_draft=range(4), K=3)
        assert res.unresolved == 0 and np.abs(res.law - target.joint_law(3)).max() < TOL, mode
        seen = ~np.isnan(chain.expected_tokens)
        assert np.abs(res.expected_tokens[seen] - chain.expected_tokens[seen]).max() < TOL, mode


# ---------------------------------------------------------------- statistical


def sample_rounds(rows: Rows, parents: list[int], V: int, n: int, seed: int, residual: str) -> np.ndarray:
    """n rounds on a fixed tree shape with fresh i.i.d. candidates, continued by the target to 3 tokens."""
    rng = np.random.default_rng(seed)
    N = len(parents)
    toks = np.zeros((n, N), np.int64)
    pre_code = np.zeros((n, N), np.int64)  # index of each node's prefix in a table of prefixes
    table = list(rows)
    index = {p: i for i, p in enumerate(table)}
    P = np.stack([rows[p][0] for p in table])  # (prefixes, V)
    Qt = np.stack([rows[p][1] for p in table])
    pres = [[()] * N for _ in range(n)]
    for k in range(1, N):
        par = parents[k]
        q = Qt[pre_code[:, par]]  # (n, V)
        toks[:, k] = (np.cumsum(q, 1) <= rng.random((n, 1))).sum(1).clip(max=V - 1)
        for b in range(n):
            pres[b][k] = pres[b][par] + (int(toks[b, k]),)
        pre_code[:, k] = [index[pres[b][k]] for b in range(n)]
    T, Q = P[pre_code], Qt[pre_code]  # (n, N, V)
    ua = rng.random((n, N - 1))
    res = rule_or_mistake(residual)(T, Q, toks, np.tile(parents, (n, 1)), np.full(n, N),
                                    uniforms=Uniforms(ua, rng.random(n)))
    seq = np.zeros((n, DEPTH + 1), np.int64)
    for b in range(n):
        z = list(res.tokens[b, : res.num_tokens[b]])
        while len(z) < DEPTH + 1:
            p = rows[tuple(z)][0]
            z.append(int(min((np.cumsum(p) <= rng.random()).sum(), V - 1)))
        seq[b] = z[: DEPTH + 1]
    return seq


def test_chi_square_and_negative_control():
    # Joint chi-square of 3 tokens at level ALPHA = 0.001 (the critical value comes with the test);
    # 20,000 seeded rounds. The mistake (resample from p after a rejection) must fail at the same n.
    rows = random_rows(3, 7, zero_fraction=0.2)
    parents = SHAPES["two, first with two"]
    want = target_law(rows, 3, DEPTH + 1)
    good = joint_test(sample_rounds(rows, parents, 3, 20_000, 1, "residual"), want, alpha=ALPHA)
    bad = joint_test(sample_rounds(rows, parents, 3, 20_000, 1, "target"), want, alpha=ALPHA)
    assert good.passed, (good.statistic, good.critical_value)
    assert not bad.passed, (bad.statistic, bad.critical_value)


# ---------------------------------------------------------------- NumPy and torch, inputs


def random_trees(rng: np.random.Generator, B: int, N: int, V: int):
    parents = np.full((B, N), -1)
    for n in range(1, N):
        parents[:, n] = rng.integers(0, n, size=B)
    T = rng.dirichlet(np.full(V, 0.5), size=(B, N))
    Q = rng.dirichlet(np.full(V, 0.5), size=(B, N))
    T[T < 0.05] = 0
    T /= T.sum(-1, keepdims=True)
    toks = rng.integers(0, V, size=(B, N))
    num = rng.integers(1, N + 1, size=B)
    return T, Q, toks, parents, num


@pytest.mark.parametrize("iid", [True, False], ids=["iid", "deterministic"])
def test_numpy_and_torch_give_identical_tokens(iid):
    rng = np.random.default_rng(3)
    T, Q, toks, par, num = random_trees(rng, 257, 7, 5)
    Q = Q if iid else None
    u = Uniforms(rng.random((257, 6)), rng.random(257))
    a = verify_tree(T, Q, toks, par, num, uniforms=u)
    tt = [None if x is None else torch.from_numpy(x) for x in (T, Q, toks, par, num)]
    b = verify_tree(*tt, uniforms=Uniforms(torch.from_numpy(u.accept), torch.from_numpy(u.sample)))
    assert np.array_equal(a.tokens, b.tokens.numpy()) and np.array_equal(a.path, b.path.numpy())
    assert np.array_equal(a.num_tokens, b.num_tokens.numpy()) and np.array_equal(a.bonus, b.bonus.numpy())
    assert (a.num_accepted > 0).any() and (a.num_accepted < num - 1).any()  # both ways exercised


def test_rng_and_padding_nodes_are_ignored():
    rng = np.random.default_rng(4)
    T, Q, toks, par, num = random_trees(rng, 64, 6, 4)
    u = Uniforms(rng.random((64, 5)), rng.random(64))
    a = verify_tree(T, Q, toks, par, num, uniforms=u)
    pad = np.arange(6)[None, :] >= num[:, None]
    T2, Q2, par2, toks2 = T.copy(), Q.copy(), par.copy(), toks.copy()
    T2[pad], Q2[pad], par2[pad], toks2[pad] = np.nan, np.nan, 99, -7
    b = verify_tree(T2, Q2, toks2, par2, num, uniforms=u)
    assert np.array_equal(a.tokens, b.tokens)
    c = verify_tree(T, Q, toks, par, num, rng=np.random.default_rng(0))
    d = verify_tree(T, Q, toks, par, num, rng=np.random.default_rng(0))
    assert np.array_equal(c.tokens, d.tokens)
    assert ((a.path >= 0).sum(1) == a.num_accepted).all()


@pytest.mark.parametrize(
    "change,match",
    [
        (lambda a: a.update(parents=np.array([[0, 0, 0]])), "parents"),
        (lambda a: a.update(parents=np.array([[-1, 0, 2]])), "parents"),
        (lambda a: a.update(num_nodes=np.array([0])), "num_nodes"),
        (lambda a: a.update(node_tokens=np.array([[0, 1, 3]])), "node_tokens"),
        (lambda a: a.update(draft_probs=np.ones((1, 3, 2))), "draft_probs"),
        (lambda a: a.update(target_probs=np.ones((1, 3))), "target_probs"),
        (lambda a: a.update(uniforms=Uniforms(np.zeros((1, 3)), np.zeros(1))), "uniforms.accept"),
    ],
)
def test_bad_input_names_the_argument(change, match):
    args = {
        "target_probs": np.full((1, 3, 3), 1 / 3),
        "draft_probs": np.full((1, 3, 3), 1 / 3),
        "node_tokens": np.array([[0, 1, 2]]),
        "parents": np.array([[-1, 0, 0]]),
        "num_nodes": np.array([3]),
        "uniforms": Uniforms(np.zeros((1, 2)), np.zeros(1)),
    }
    change(args)
    u = args.pop("uniforms")
    with pytest.raises(InputError, match=match):
        verify_tree(*args.values(), uniforms=u)


def test_trace_tells_what_each_candidate_was_compared_with():
    p, q = np.array([0.5, 0.3, 0.15, 0.05]), np.full(4, 0.25)
    batch = context_free_trees(p, q, kary_parents(2, 2), 200, np.random.default_rng(8))
    res = verify_tree(*batch, rng=np.random.default_rng(9))
    outcomes = set()
    for b in range(200):
        steps = trace(batch, res, b)
        nodes, final = steps[:-1], steps[-1]
        accepted = [s["node"] for s in nodes if s["outcome"] == "accepted"]
        assert accepted == [int(n) for n in res.path[b] if n >= 0]
        for s in nodes:
            outcomes.add(s["outcome"])
            if s["outcome"] == "accepted":
                assert s["coin u"] < s["acceptance probability"]
            elif s["outcome"] == "rejected":
                assert s["coin u"] >= s["acceptance probability"]
            else:
                assert np.isnan(s["acceptance probability"])
        assert final["node"] == res.last_node[b] and final["token"] == res.tokens[b, res.num_accepted[b]]
    assert outcomes == {"accepted", "rejected", "not tried"}


def test_chain_wrapper_parity_and_validate_false():
    rng = np.random.default_rng(10)
    B, K, V = 300, 4, 5
    T = rng.dirichlet(np.full(V, 0.5), size=(B, K + 1))
    Q = rng.dirichlet(np.full(V, 0.5), size=(B, K))
    x = (np.cumsum(Q, -1) <= rng.random((B, K, 1))).sum(-1).clip(max=V - 1)  # drafts drawn from q
    j = rng.integers(0, K + 1, size=B)
    u = Uniforms(rng.random((B, K)), rng.random(B))
    a = verify_tree_chain(T, Q, x, j, uniforms=u)
    b = verify_tree_chain(*(torch.from_numpy(v) for v in (T, Q, x, j)),
                          uniforms=Uniforms(torch.from_numpy(u.accept), torch.from_numpy(u.sample)))  # fmt: skip
    c = verify_tree_chain(T, Q, x, j, uniforms=u, validate=False)
    assert np.array_equal(a.tokens, b.tokens.numpy()) and np.array_equal(a.tokens, c.tokens)
    assert np.array_equal(a.num_accepted, verify(T, Q, x, j, uniforms=u).num_accepted)  # the same coins decide
    assert 0 < a.num_accepted.mean() < j.mean()
