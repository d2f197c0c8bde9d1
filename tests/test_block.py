"""Block verification: its exact law by enumeration, its gain over the chain, parity, input errors.

# B rows, K drafts (padded width), V vocabulary

The exact tests build context-dependent "trees": a target row p and a draft row q for every
prefix of up to K tokens (random, with zeros in both supports and, in some cases, q = p at some
prefixes, the 0/0 case of the thresholds). For one round from an empty context, the law of the
emitted tokens is computed twice:

- by a plain per-sequence reference written here from the rule's definition (tau = i with
  probability h_i prod_{k>i} (1 - h_k)), sharing no code with ``specviz.verifiers.block``;
- from the implementation itself, by enumerating every draft sequence (weighted by its
  probability under the drafter) and every box of uniforms between the thresholds the rule can
  compare them with, evaluated at the box's centre and probed just inside both edges (an output
  that changes inside a box means the implementation compares with a threshold not listed).

The emitted tokens, continued by sampling from the target, must follow the target's joint law
of K + 1 tokens to 1e-12. Rows of different draft counts share one padded call whose unread
rows are NaN. Over several rounds, :func:`specviz.proof.exact.verifier_law` (the court) judges the
rule on Markov chains with ragged draft counts; a joint chi-square through
:func:`specviz.proof.simulate.generate` runs beside two negative controls that must fail.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
import torch

from specviz import InputError, Uniforms, verify
from specviz.proof.exact import verifier_law
from specviz.proof.markov import Drafter, MarkovChain, random_chain
from specviz.proof.simulate import generate
from specviz.proof.stats import ALPHA, joint_test
from specviz.verifiers.block import block_thresholds, breakpoints, verify_block, verify_block_lossy
from specviz.verifiers.verify import Verification

K = 3  # padded width of every enumerated batch
EDGE = 1e-7  # probes sit this fraction of a box's width inside its edges
NARROW = 1e-6  # boxes thinner than this are only evaluated at their centre (EDGE * NARROW >> ulp)
TOL = 1e-12

Tree = dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]]  # prefix -> (p row, q row)


# ---------------------------------------------------------------- context-dependent trees


def random_row(rng: np.random.Generator, V: int, zero_fraction: float) -> np.ndarray:
    x = rng.gamma(0.6, size=V)
    x[rng.random(V) < zero_fraction] = 0.0
    if x.sum() == 0:
        x[rng.integers(V)] = 1.0
    return x / x.sum()


def random_tree(V: int, depth: int, seed: int, *, zero_fraction: float = 0.3, equal_every: int = 0) -> Tree:
    """p and q rows for every prefix of length 0..depth; q = p at prefixes of length % equal_every == 1."""
    rng = np.random.default_rng(seed)
    tree: Tree = {}
    for n in range(depth + 1):
        for prefix in itertools.product(range(V), repeat=n):
            p = random_row(rng, V, zero_fraction)
            q = p.copy() if equal_every and n % equal_every == 1 else random_row(rng, V, zero_fraction)
            tree[prefix] = (p, q)
    return tree


def deterministic_tree(tree: Tree, V: int, depth: int) -> tuple[Tree, tuple[int, ...]]:
    """The same target with a deterministic drafter proposing the least likely target token
    (a bad proposer on purpose): q one-hot on it along the drafted path."""
    path: tuple[int, ...] = ()
    out = dict(tree)
    for _ in range(depth):
        p, _q = tree[path]
        x = int(np.argmin(np.where(p > 0, p, np.inf)) if (p > 0).any() else 0)
        out[path] = (p, np.eye(V)[x])
        path = path + (x,)
    return out, path


def target_law(tree: Tree, V: int, n: int) -> dict[tuple[int, ...], float]:
    """Exact law of the first n tokens under the target."""
    law = {}
    for z in itertools.product(range(V), repeat=n):
        pr = 1.0
        for i in range(n):
            pr *= tree[z[:i]][0][z[i]]
        law[z] = pr
    return law


def extend(tree: Tree, V: int, n: int, law: dict[tuple[int, ...], float]) -> dict[tuple[int, ...], float]:
    """A round's output law continued by sampling from the target, up to n tokens."""
    out = dict.fromkeys(itertools.product(range(V), repeat=n), 0.0)
    for o, pr in law.items():
        for rest in itertools.product(range(V), repeat=n - len(o)):
            z, c = o + rest, pr
            for i in range(len(o), n):
                c *= tree[z[:i]][0][z[i]]
            out[z] += c
    return out


def tv(a: dict, b: dict) -> float:
    keys = set(a) | set(b)
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in keys)


def drafts_of(tree: Tree, V: int, j: int, deterministic_path: tuple[int, ...] | None):
    """Every draft sequence of length j with its probability under the drafter."""
    if deterministic_path is not None:
        return [(deterministic_path[:j], 1.0)]
    out = []
    for xs in itertools.product(range(V), repeat=j):
        pr = 1.0
        for i, x in enumerate(xs):
            pr *= tree[xs[:i]][1][x]
        if pr > 0:
            out.append((xs, pr))
    return out


# ---------------------------------------------------------------- the reference, from the definition


def ref_block(tree: Tree, xs: tuple[int, ...], last: str = "capped") -> tuple[list[float], list[float]]:
    """w_0..w_j and the thresholds h_1..h_j (h[i-1]) of block verification for drafts xs."""
    j = len(xs)
    w, prod = [1.0], 1.0
    for i, x in enumerate(xs):
        p, q = tree[xs[:i]]
        r = p[x] / q[x] if q[x] > 0 else 0.0
        w.append(min(1.0, w[-1] * r))
        prod *= r
    h = []
    for i in range(1, j):
        p, q = tree[xs[:i]]
        m = float(np.maximum(w[i] * p - q, 0).sum())
        den = m + 1 - w[i]
        h.append(m / den if den > 0 else 1.0)
    if j:
        h.append(w[j] if last == "capped" else min(1.0, prod))
    return w, h


def ref_block_law(tree: Tree, V: int, j: int, last: str = "capped", path=None) -> dict[tuple[int, ...], float]:
    law: dict[tuple[int, ...], float] = {}
    for xs, qx in drafts_of(tree, V, j, path):
        w, h = ref_block(tree, xs, last)
        for t in range(j + 1):
            pt = qx * (h[t - 1] if t else 1.0) * float(np.prod([1 - h[k - 1] for k in range(t + 1, j + 1)]))
            if pt == 0:
                continue
            p, q = tree[xs[:t]]
            if t == j:
                dist = p
            else:
                r = np.maximum(w[t] * p - q, 0)
                dist = r / r.sum() if r.sum() > 0 else p
            for y in range(V):
                if dist[y] > 0:
                    law[xs[:t] + (y,)] = law.get(xs[:t] + (y,), 0.0) + pt * dist[y]
    return law


def chain_expected_accepted(tree: Tree, V: int, j: int, path=None) -> float:
    """sum_i E_q[prod_{k<i} min(1, p/q)]: the chain's expected drafts kept, in closed form."""
    total = 0.0
    for i in range(1, j + 1):
        for xs, qx in drafts_of(tree, V, i, path):
            keep = 1.0
            for k, x in enumerate(xs):
                p, q = tree[xs[:k]]
                keep *= min(1.0, p[x] / q[x]) if q[x] > 0 else 0.0
            total += qx * keep
    return total


def block_expected_accepted(tree: Tree, V: int, j: int, path=None) -> float:
    """sum_i E_q[w_i], the closed form in the module docstring."""
    return sum(qx * ref_block(tree, xs)[0][i] for i in range(1, j + 1) for xs, qx in drafts_of(tree, V, i, path))


def cdf_points(w: np.ndarray) -> list[float]:
    s = w.sum()
    return list(np.cumsum(w) / s) if s > 0 else []


def block_points(tree: Tree, xs: tuple[int, ...], last: str = "capped") -> tuple[list[list[float]], list[float]]:
    """Thresholds each draft's uniform is compared with, and the CDF points of every row the
    extra token can come from (the target rows and the residuals)."""
    w, h = ref_block(tree, xs, last)
    j = len(xs)
    sample: list[float] = []
    for t in range(j + 1):
        p, q = tree[xs[:t]]
        sample += cdf_points(p)
        if t < j:
            sample += cdf_points(np.maximum(w[t] * p - q, 0))
    return [[hi] for hi in h], sample


def chain_points(tree: Tree, xs: tuple[int, ...]) -> tuple[list[list[float]], list[float]]:
    sample: list[float] = []
    accept = []
    for t in range(len(xs) + 1):
        p, q = tree[xs[:t]]
        sample += cdf_points(p)
        if t < len(xs):
            x = xs[t]
            accept.append([min(1.0, p[x] / q[x])] if q[x] > 0 else [])
            sample += cdf_points(np.maximum(p - q, 0))
    return accept, sample


# ---------------------------------------------------------------- enumerating an implementation


class Case:
    def __init__(self, V: int, j: int, seed: int, *, deterministic: bool = False, equal_every: int = 0):
        self.V, self.j, self.seed = V, j, seed
        self.tree = random_tree(V, K, seed, equal_every=equal_every)
        self.path = None
        if deterministic:
            self.tree, self.path = deterministic_tree(self.tree, V, K)

    def __repr__(self) -> str:
        kind = "deterministic" if self.path is not None else "sampled"
        return f"Case(V={self.V}, j={self.j}, seed={self.seed}, {kind})"


def _cells(points: list[float], at: float) -> tuple[np.ndarray, np.ndarray]:
    bps = np.unique(np.array([p for p in points if 0 < p < 1], dtype=np.float64))
    edges = np.concatenate([[0.0], bps, [1.0]])
    width = np.diff(edges)
    keep = width > 0
    frac = np.where(width < NARROW, 0.5, at)
    pts = np.minimum(edges[:-1] + frac * width, np.nextafter(1.0, 0.0))  # a sliver below 1 rounds to 1
    return pts[keep], width[keep]


def enumerate_law(
    verifier: Callable[..., Verification],
    cases: list[Case],
    points: Callable[[Tree, tuple[int, ...]], tuple[list[list[float]], list[float]]],
    *,
    lib: str = "numpy",
) -> tuple[list[dict[tuple[int, ...], float]], list[float]]:
    """Per case: the law of the round's emitted tokens and the expected drafts kept.

    All cases (one V) go through one padded call per probe; rows past a case's draft count are
    NaN and their tokens -1, so a verifier that reads them fails.
    """
    V = cases[0].V
    deterministic = cases[0].path is not None
    rows_t, rows_q, rows_x, rows_j, rows_u, rows_w, rows_c, probes = [], [], [], [], [], [], [], []
    for at in (0.5, EDGE, 1 - EDGE):
        n0 = len(rows_t)
        for c_idx, case in enumerate(cases):
            for xs, qx in drafts_of(case.tree, V, case.j, case.path):
                T = np.full((K + 1, V), np.nan)
                Q = np.full((K, V), np.nan)
                for t in range(case.j + 1):
                    T[t] = case.tree[xs[:t]][0]
                    if t < case.j:
                        Q[t] = case.tree[xs[:t]][1]
                acc, samp = points(case.tree, xs)
                coords = [_cells(acc[i] if i < case.j else [], at) for i in range(K)] + [_cells(samp, at)]
                for combo in itertools.product(*[range(len(c[0])) for c in coords]):
                    rows_t.append(T)
                    rows_q.append(Q)
                    rows_x.append(list(xs) + [-1] * (K - case.j))
                    rows_j.append(case.j)
                    rows_u.append([coords[d][0][i] for d, i in enumerate(combo)])
                    rows_w.append(qx * float(np.prod([coords[d][1][i] for d, i in enumerate(combo)])))
                    rows_c.append(c_idx)
        probes.append((n0, len(rows_t)))
    T, Q = np.array(rows_t), np.array(rows_q)
    x, j, u = np.array(rows_x, dtype=np.int64), np.array(rows_j, dtype=np.int64), np.array(rows_u)
    if lib == "torch":
        T, Q, x, j, u = (torch.from_numpy(a) for a in (T, Q, x, j, u))
    res = verifier(T, None if deterministic else Q, x, j, uniforms=Uniforms(u[:, :K], u[:, K]))
    toks, num = np.asarray(res.tokens), np.asarray(res.num_tokens)
    (a0, a1), *edges = probes
    for b0, b1 in edges:  # the output is constant on every box
        assert (num[a0:a1] == num[b0:b1]).all()
        emitted = np.arange(K + 1)[None, :] < num[a0:a1, None]
        assert (np.where(emitted, toks[a0:a1], -1) == np.where(emitted, toks[b0:b1], -1)).all()
    laws: list[dict[tuple[int, ...], float]] = [{} for _ in cases]
    kept = [0.0] * len(cases)
    for r in range(a0, a1):
        o = tuple(int(t) for t in toks[r, : num[r]])
        law = laws[rows_c[r]]
        law[o] = law.get(o, 0.0) + rows_w[r]
        kept[rows_c[r]] += rows_w[r] * (num[r] - 1)
    return laws, kept


CASES = [Case(V, j, 100 * V + 10 * j + s) for V in (2, 3) for j in (1, 2, 3) for s in range(2)]
CASES += [Case(V, j, 900 + 10 * V + j, equal_every=2) for V in (2, 3) for j in (2, 3)]  # q = p at depth 1
CASES += [Case(3, 0, 7)]  # no drafts: only the bonus
DET_CASES = [Case(V, j, 500 + 10 * V + j, deterministic=True) for V in (2, 3) for j in (1, 2, 3)]


def by_V(cases: list[Case]) -> list[list[Case]]:
    return [[c for c in cases if c.V == V] for V in sorted({c.V for c in cases})]


@pytest.fixture(scope="module")
def block_laws():
    out = {}
    for group in by_V(CASES) + by_V(DET_CASES):
        laws, kept = enumerate_law(verify_block, group, block_points)
        for case, law, k in zip(group, laws, kept, strict=True):
            out[repr(case)] = (case, law, k)
    return out


# ---------------------------------------------------------------- exact tests


def test_block_law_is_the_target(block_laws):
    for case, law, _ in block_laws.values():
        n = case.j + 1
        assert abs(sum(law.values()) - 1) < TOL, case
        got, want = extend(case.tree, case.V, n, law), target_law(case.tree, case.V, n)
        assert max(abs(got[z] - want[z]) for z in want) < TOL, case


def test_block_law_matches_the_reference(block_laws):
    # The two computations agree on the law of the round itself, not only after extension.
    for case, law, _ in block_laws.values():
        ref = ref_block_law(case.tree, case.V, case.j, path=case.path)
        assert tv(law, ref) < TOL, case


def test_block_keeps_at_least_as_many_drafts_as_the_chain(block_laws):
    gains = []
    for case, _, kept in block_laws.values():
        chain = chain_expected_accepted(case.tree, case.V, case.j, case.path)
        assert abs(kept - block_expected_accepted(case.tree, case.V, case.j, case.path)) < TOL, case
        assert kept >= chain - TOL, (case, kept, chain)
        gains.append(kept - chain)
    assert max(gains) > 0.01  # the inequality is strict somewhere: block verification is not the chain


def test_chain_closed_form_matches_verify():
    # The chain's expectation above is checked against specviz.verify by the same enumeration.
    for group in by_V(CASES) + by_V(DET_CASES):
        _, kept = enumerate_law(verify, group, chain_points)
        for case, k in zip(group, kept, strict=True):
            assert abs(k - chain_expected_accepted(case.tree, case.V, case.j, case.path)) < TOL, case


def test_lossy_variant_law_and_tv(block_laws):
    gaps = []
    for group in by_V(CASES):
        laws, kept = enumerate_law(verify_block_lossy, group, lambda t, xs: block_points(t, xs, "product"))
        for case, law, k in zip(group, laws, kept, strict=True):
            ref = ref_block_law(case.tree, case.V, case.j, "product")
            assert tv(law, ref) < TOL, case
            n = case.j + 1
            gap = tv(extend(case.tree, case.V, n, law), target_law(case.tree, case.V, n))
            assert abs(gap - tv(extend(case.tree, case.V, n, ref), target_law(case.tree, case.V, n))) < TOL, case
            k_block = block_laws[repr(case)][2]
            assert k >= k_block - TOL, case  # a larger last threshold only keeps more
            if case.j <= 1:  # one draft: the product is w_1, and the variant is block verification
                assert gap < TOL, case
            if gap > TOL:
                assert k > k_block + TOL, case  # the law moved because it kept more
            gaps.append(gap)
    # It is lossless where no earlier cap cut the running ratio; on these cases it often does.
    assert sum(g > 1e-3 for g in gaps) >= 4 and max(gaps) > 0.1, gaps


def test_breakpoints_list_every_reference_threshold():
    # specviz.verifiers.block.breakpoints is what an exact court would enumerate with; it must hold every
    # threshold the reference says the rule compares a uniform with.
    for case in CASES + DET_CASES:
        for xs, _ in drafts_of(case.tree, case.V, case.j, case.path):
            T = np.array([case.tree[xs[:t]][0] for t in range(case.j + 1)])
            Q = (
                None
                if case.path is not None
                else np.array([case.tree[xs[:t]][1] for t in range(case.j)]).reshape(-1, case.V)
            )
            got = breakpoints(T, Q, np.array(xs, dtype=np.int64))
            for last in ("capped", "product"):
                acc, samp = block_points(case.tree, xs, last)
                listed = np.concatenate([[0.0, 1.0], got])  # the cube's own edges count
                for pt in [p for a in acc for p in a] + samp:
                    # The masses are the integer sums, within ~1e-16 of the reference's floats.
                    assert np.abs(listed - pt).min() < 1e-12, (case, xs, pt)


def test_draft_equal_to_target_keeps_every_draft():
    # q = p at every position: w stays 1, every m_i is 0 (the 0/0 thresholds are 1), all kept.
    rng = np.random.default_rng(11)
    T, _, x, j = random_batch(rng, 50, 4, 5)
    Q = T[:, :4].copy()
    x = np.where(x >= 0, Q.argmax(-1), -1)  # drafts the drafter can draw (q(x) > 0)
    th = block_thresholds(T, Q, x, j)
    pos = np.arange(4)[None, :]
    assert (th.thresholds[pos < j[:, None]] == 1).all()
    assert (th.residual_mass[:, :4][pos < j[:, None]] == 0).all()
    res = verify_block(T, Q, x, j, uniforms=Uniforms(rng.random((50, 4)), rng.random(50)))
    assert np.array_equal(res.num_accepted, j) and res.bonus.all()


# ---------------------------------------------------------------- the paper's toy example


def toy_tree(depth: int) -> Tree:
    p, q = np.array([1 / 3, 2 / 3]), np.array([2 / 3, 1 / 3])
    return {pre: (p, q) for n in range(depth + 1) for pre in itertools.product(range(2), repeat=n)}


def test_toy_example_figures():
    """p = (1/3, 2/3), q = (2/3, 1/3), 2 drafts: 11/9 kept by block verification, 10/9 by the
    chain, 4/3 by the lossy variant whose 3 tokens are 1/9 from the target in TV."""
    case = Case(2, 2, 0)
    case.tree = toy_tree(K)
    (law,), (kept,) = enumerate_law(verify_block, [case], block_points)
    (lossy,), (kept_lossy,) = enumerate_law(verify_block_lossy, [case], lambda t, xs: block_points(t, xs, "product"))
    (_,), (kept_chain,) = enumerate_law(verify, [case], chain_points)
    assert abs(kept - 11 / 9) < TOL
    assert abs(kept_chain - 10 / 9) < TOL
    assert abs(kept_lossy - 4 / 3) < TOL
    want = target_law(case.tree, 2, 3)
    assert tv(extend(case.tree, 2, 3, law), want) < TOL
    assert abs(tv(extend(case.tree, 2, 3, lossy), want) - 1 / 9) < TOL


def test_toy_example_in_exact_rationals():
    # An independent check of the figures above in exact arithmetic, from the definition.
    p, q = [Fraction(1, 3), Fraction(2, 3)], [Fraction(2, 3), Fraction(1, 3)]
    kept = {"capped": Fraction(0), "product": Fraction(0)}
    for last in kept:
        for xs in itertools.product(range(2), repeat=2):
            w, prod = [Fraction(1)], Fraction(1)
            for x in xs:
                w.append(min(Fraction(1), w[-1] * p[x] / q[x]))
                prod *= p[x] / q[x]
            m1 = sum(max(Fraction(0), w[1] * p[y] - q[y]) for y in range(2))
            h1 = m1 / (m1 + 1 - w[1]) if m1 + 1 - w[1] else Fraction(1)
            h2 = w[2] if last == "capped" else min(Fraction(1), prod)
            kept[last] += q[xs[0]] * q[xs[1]] * (2 * h2 + (1 - h2) * h1)
    assert kept == {"capped": Fraction(11, 9), "product": Fraction(4, 3)}


def test_exact_court_over_several_rounds():
    # specviz.proof.exact's adaptive enumeration, over repeated rounds of Markov chains with ragged
    # draft counts 0..3 in a padded width of 3: block verification's law of 3 tokens is the
    # target's, for a sampling and a deterministic drafter; the lossy variant's is not.
    rng = np.random.default_rng(12)
    target, draft = random_chain(3, rng, zero_fraction=0.34), random_chain(3, rng, zero_fraction=0.34)
    want = target.joint_law(3)
    for mode in ("sample", "argmax"):
        res = verifier_law(verify_block, target, Drafter(draft, mode), L=3, num_draft=range(4), K=3)
        assert res.unresolved == 0 and np.abs(res.law - want).max() < TOL, mode
    lossy = verifier_law(verify_block_lossy, target, Drafter(draft), L=3, num_draft=range(4), K=3)
    assert 0.5 * np.abs(lossy.law - want).sum() > 1e-4


def test_exact_court_on_the_toy_chain():
    # The toy example as a context-free chain, 2 drafts a round: 1 + 11/9 tokens per verification
    # for block verification and 1 + 4/3 for the lossy variant, whose 3 tokens are 1/9 off in TV.
    p, q = [1 / 3, 2 / 3], [2 / 3, 1 / 3]
    target, draft = MarkovChain(np.array([p] * 3)), MarkovChain(np.array([q] * 3))
    block = verifier_law(verify_block, target, Drafter(draft), L=3, num_draft=2, K=2)
    lossy = verifier_law(verify_block_lossy, target, Drafter(draft), L=3, num_draft=2, K=2)
    assert abs(block.expected_tokens[0, 2] - (1 + 11 / 9)) < TOL
    assert abs(lossy.expected_tokens[0, 2] - (1 + 4 / 3)) < TOL
    assert np.abs(block.law - target.joint_law(3)).max() < TOL
    assert abs(0.5 * np.abs(lossy.law - target.joint_law(3)).sum() - 1 / 9) < TOL


# ---------------------------------------------------------------- NumPy and torch


def random_batch(rng: np.random.Generator, B: int, K_: int, V: int, *, zero_fraction: float = 0.3):
    def rows(shape):
        x = rng.gamma(0.5, size=shape)
        x[rng.random(shape) < zero_fraction] = 0
        x[..., 0] += x.sum(-1) == 0
        return x / x.sum(-1, keepdims=True)

    T, Q = rows((B, K_ + 1, V)), rows((B, K_, V))
    cdf = np.cumsum(Q, -1)
    x = np.minimum((cdf <= rng.random((B, K_, 1)) * cdf[..., -1:]).sum(-1), V - 1)
    j = rng.integers(0, K_ + 1, size=B)
    x = np.where(np.arange(K_)[None, :] < j[:, None], x, -1)
    return T, Q, x, j


@pytest.mark.parametrize("rule", [verify_block, verify_block_lossy])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_numpy_and_torch_give_identical_tokens(rule, dtype):
    rng = np.random.default_rng(3)
    for B, K_, V, deterministic in ((99, 5, 111, False), (7, 3, 3, True), (1, 1, 2, False)):
        T, Q, x, j = random_batch(rng, B, K_, V)
        T, Q = T.astype(dtype), Q.astype(dtype)
        u = Uniforms(rng.random((B, K_)), rng.random(B))
        Qn = None if deterministic else Q
        a = rule(T, Qn, x, j, uniforms=u)
        Tt, Qt, xt, jt = (torch.from_numpy(a_) for a_ in (T, Q, x, j))
        b = rule(Tt, None if deterministic else Qt, xt, jt, uniforms=Uniforms(*map(torch.from_numpy, u)))
        assert isinstance(b.tokens, torch.Tensor)
        for field in ("tokens", "num_tokens", "num_accepted", "bonus"):
            assert np.array_equal(getattr(a, field), getattr(b, field).numpy()), field
        assert np.array_equal(a.ratios, b.ratios.numpy(), equal_nan=True)
        if B > 50:
            assert 0 < a.num_accepted.mean() < K_ and 0 < a.bonus.mean() < 1  # both outcomes are exercised


def test_rng_draws_accept_then_sample():
    rng = np.random.default_rng(4)
    T, Q, x, j = random_batch(rng, 50, 4, 6)
    a = verify_block(T, Q, x, j, rng=np.random.default_rng(9))
    g = np.random.default_rng(9)
    b = verify_block(T, Q, x, j, uniforms=Uniforms(g.random((50, 4)), g.random(50)))
    assert np.array_equal(a.tokens, b.tokens)
    g = torch.Generator().manual_seed(9)
    Tt, Qt, xt, jt = (torch.from_numpy(a_) for a_ in (T, Q, x, j))
    c = verify_block(Tt, Qt, xt, jt, rng=g)
    g = torch.Generator().manual_seed(9)
    ua = torch.rand((50, 4), generator=g, dtype=torch.float64)
    d = verify_block(Tt, Qt, xt, jt, uniforms=Uniforms(ua, torch.rand(50, generator=g, dtype=torch.float64)))
    assert torch.equal(c.tokens, d.tokens)


def test_result_fields_follow_the_thresholds():
    rng = np.random.default_rng(5)
    T, Q, x, j = random_batch(rng, 200, 4, 5)
    u = Uniforms(rng.random((200, 4)), rng.random(200))
    res = verify_block(T, Q, x, j, uniforms=u)
    th = block_thresholds(T, Q, x, j)
    assert np.array_equal(res.ratios, th.thresholds, equal_nan=True)
    passed = u.accept < np.nan_to_num(th.thresholds, nan=-1.0)
    tau = np.where(passed.any(1), 4 - np.argmax(passed[:, ::-1], 1), 0)
    assert np.array_equal(res.num_accepted, tau)
    assert np.array_equal(res.num_tokens, tau + 1)
    assert np.array_equal(res.bonus, tau == j)
    pos = np.arange(4)[None, :]
    assert (res.tokens[:, :4][pos < tau[:, None]] == x[pos < tau[:, None]]).all()
    assert np.isnan(res.ratios[pos >= j[:, None]]).all()
    assert not np.isnan(res.ratios[pos < j[:, None]]).any()
    # The weights follow w_i = min(1, w_{i-1} p(x)/q(x)) and are at least the chain's product.
    w, chain = th.weights, np.ones(200)
    ar = np.arange(200)
    for i in range(1, 5):
        live = i <= j
        xi = np.where(live, x[:, i - 1], 0)
        px, qx = T[ar, i - 1, xi], Q[ar, i - 1, xi]
        r = np.where(qx > 0, px / np.where(qx > 0, qx, 1), 0)
        assert np.allclose(w[live, i], np.minimum(1, w[live, i - 1] * r[live]), rtol=1e-15, atol=0)
        chain = chain * np.minimum(1, r)
        assert (w[live, i] >= chain[live] * (1 - 1e-15)).all()
        assert np.isnan(w[~live, i]).all()


def test_zero_draft_probability_zeroes_the_weight():
    # q(x) = 0 for the drafted token (the drafter could not have drawn it): w_1 = 0, so the
    # first draft is never kept, even when the target likes it.
    T = np.array([[[0.1, 0.9], [0.5, 0.5]]])
    Q = np.array([[[1.0, 0.0]]])
    th = block_thresholds(T, Q, np.array([[1]]), np.array([1]))
    assert th.weights[0, 1] == 0 and th.thresholds[0, 0] == 0
    for u in (0.0, 0.5, 0.999):
        res = verify_block(T, Q, np.array([[1]]), np.array([1]), uniforms=Uniforms(np.array([[u]]), np.array([0.5])))
        assert res.num_accepted[0] == 0


# ---------------------------------------------------------------- end to end


N, L, V = 200_000, 3, 4


@pytest.fixture(scope="module")
def chains():
    rng = np.random.default_rng(2026)
    return random_chain(V, rng), random_chain(V, rng, zero_fraction=0.25)


def residual_from_p(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None):
    """Negative control: block verification whose replacement token comes from p_tau instead of
    the residual, with the same uniform (built from verify_block's public result)."""
    res = verify_block(target_probs, draft_probs, draft_tokens, num_draft, rng=rng, uniforms=uniforms)
    ar = np.arange(len(num_draft))
    tau = res.num_accepted
    rows = target_probs[ar, tau]  # (B, V)
    cdf = np.cumsum(rows, 1)
    y = np.minimum((cdf <= (res.sample_uniforms * cdf[:, -1])[:, None]).sum(1), rows.shape[1] - 1)
    tokens = res.tokens.copy()
    tokens[ar, tau] = np.where(res.bonus, tokens[ar, tau], y)
    return res._replace(tokens=tokens)


@pytest.mark.parametrize("ragged", [False, True])
def test_block_passes_the_joint_chi_square(chains, ragged):
    target, draft = chains
    sim = generate(verify_block, target, Drafter(draft), n=N, L=L, K=3, rng=np.random.default_rng(21), ragged=ragged)
    res = joint_test(sim.sequences, target.joint_law(L), alpha=ALPHA)
    # Critical value at level 0.001 for the pooled cells (about 103 for 63 degrees of freedom).
    assert res.passed, res
    assert res.dof >= 40 and res.detectable_tv < 0.02


def test_negative_control_residual_from_p_fails(chains):
    target, draft = chains
    sim = generate(residual_from_p, target, Drafter(draft), n=N, L=L, K=3, rng=np.random.default_rng(21), ragged=True)
    res = joint_test(sim.sequences, target.joint_law(L), alpha=ALPHA)
    assert not res.passed, res
    assert res.statistic > 10 * res.critical_value


def test_negative_control_lossy_variant_fails_on_the_toy_chain():
    # The toy example as a context-free chain; 2 drafts per round, as in the paper.
    p, q = [1 / 3, 2 / 3], [2 / 3, 1 / 3]
    target, draft = MarkovChain(np.array([p] * 3)), MarkovChain(np.array([q] * 3))
    for rule, should_pass in ((verify_block, True), (verify_block_lossy, False)):
        sim = generate(rule, target, Drafter(draft), n=N, L=L, K=2, rng=np.random.default_rng(22))
        res = joint_test(sim.sequences, target.joint_law(L), alpha=ALPHA)  # 8 cells: critical value 24.3
        assert res.passed == should_pass, (rule.__name__, res)
        assert res.detectable_tv < 0.01
    # Drafts kept per round, measured: 11/9 for block verification (4 standard errors).
    sim = generate(verify_block, target, Drafter(draft), n=N, L=L, K=2, rng=np.random.default_rng(23))
    assert abs(sim.tokens_per_round - 1 - 11 / 9) < 4 * sim.tokens_per_round_se


# ---------------------------------------------------------------- bad input


def good_inputs():
    rng = np.random.default_rng(6)
    return random_batch(rng, 4, 2, 3)


@pytest.mark.parametrize("rule", [verify_block, verify_block_lossy])
@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda T, Q, x, j: (T[:, :2], Q, x, j), r"target_probs: expected shape \(B, K\+1, V\)"),
        (lambda T, Q, x, j: (T, Q[:, :, :2], x, j), r"draft_probs: expected shape \(B, K, V\)"),
        (lambda T, Q, x, j: (T, Q, x[0], j), r"draft_tokens: expected 2 dimensions"),
        (lambda T, Q, x, j: (T, Q, x, j + 5), r"num_draft: expected draft counts in \[0, 2\]"),
        (lambda T, Q, x, j: (T, Q, x, j.astype(float)), "num_draft: expected an integer array"),
        (lambda T, Q, x, j: (T, Q, np.where(x >= 0, 7, x), j), r"draft_tokens: expected token ids .* in \[0, 2\]"),
        (lambda T, Q, x, j: (T * 2, Q, x, j), "target_probs: expected rows summing to 1"),
        (lambda T, Q, x, j: (T, -Q, x, j), "draft_probs: expected non-negative"),
        (lambda T, Q, x, j: (np.where(T > 0, np.nan, T), Q, x, j), "target_probs: expected finite"),
        (lambda T, Q, x, j: (T.astype(np.int64), Q, x, j), "target_probs: expected a floating-point array"),
        (lambda T, Q, x, j: ("abc", Q, x, j), "target_probs: expected"),
        (lambda T, Q, x, j: (T, Q, [[0, 1], [0]], j), "draft_tokens: expected an array"),
    ],
)
def test_bad_input_names_the_argument(rule, change, match):
    T, Q, x, j = good_inputs()
    j = np.full(4, 2)
    x = np.where(x < 0, 0, x)
    with pytest.raises(InputError, match=match):
        rule(*change(T, Q, x, j), rng=np.random.default_rng(0))


def test_bad_uniforms_and_rng():
    T, Q, x, j = good_inputs()
    with pytest.raises(InputError, match="uniforms: expected either rng or uniforms"):
        verify_block(T, Q, x, j, rng=np.random.default_rng(0), uniforms=Uniforms(np.zeros((4, 2)), np.zeros(4)))
    with pytest.raises(InputError, match=r"uniforms.accept: expected shape \(B, K\) = \(4, 2\)"):
        verify_block(T, Q, x, j, uniforms=Uniforms(np.zeros((4, 3)), np.zeros(4)))
    with pytest.raises(InputError, match=r"uniforms.sample: expected uniforms in \[0, 1\)"):
        verify_block(T, Q, x, j, uniforms=Uniforms(np.zeros((4, 2)), np.ones(4)))
    with pytest.raises(InputError, match="rng: expected a numpy.random.Generator"):
        verify_block(T, Q, x, j, rng=torch.Generator())
    with pytest.raises(InputError, match="last: expected 'capped' or 'product'"):
        block_thresholds(T, Q, x, j, last="uncapped")


def test_unread_rows_may_hold_anything():
    # Rows past num_draft are documented as ignored: NaN there changes nothing.
    rng = np.random.default_rng(7)
    T, Q, x, j = random_batch(rng, 30, 3, 4)
    u = Uniforms(rng.random((30, 3)), rng.random(30))
    T2, Q2 = T.copy(), Q.copy()
    pos = np.arange(4)[None, :]
    T2[pos > j[:, None]] = np.nan
    Q2[pos[:, :3] >= j[:, None]] = np.nan
    a, b = verify_block(T, Q, x, j, uniforms=u), verify_block(T2, Q2, x, j, uniforms=u)
    assert np.array_equal(a.tokens, b.tokens)
