"""The court: any verifier's exact law, its distance from the target and its tokens per step.

# V vocabulary, K drafts per round (padded width), L tokens judged

:func:`judge` puts one verifier (a function with :func:`specviz.verify`'s signature, or the name
of a rule in :data:`RULES`) through :func:`specviz.proof.exact.verifier_law` on a problem: a target
chain, a drafter, the window L, the padded width K and the draft counts. It returns the exact
law of the first L tokens, its total-variation distance from the target's law, the exact
expected tokens of one verification, and a verdict computed from those numbers:
``lossless`` iff TV <= 1e-12 + the mass the enumeration could not resolve. The court refuses
(an :class:`~specviz.InputError` naming ``verifier``) rather than guess when the enumeration
cannot vouch for a law. :func:`compare` judges several rules on one problem, one row each.

Trees with several candidates per node do not fit ``verify``'s signature: :func:`judge_tree`
judges a tree verifier (:func:`specviz.verifiers.tree.verify_tree`'s signature) on a tree shape drawn
afresh each round, locating each candidate's threshold on the verifier's own decisions, and
:func:`compare_with_trees` adds k-draft rows to the table.

Problems are the Markov-chain scenarios of :mod:`specviz.proof.scenarios` (by name or as a
:class:`~specviz.proof.scenarios.Scenario`), :func:`toy_problem` (the block-verification paper's example),
or a :class:`Problem` built by hand.

Expected tokens per step: the exact mean number of tokens emitted by the first verification
(from the start context), averaged over the draft counts a row can have (uniformly, as
:func:`specviz.proof.simulate.generate` draws them for ragged rows). On a context-free problem (the
toy example) this is the mean of every verification.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..verifiers.tree import multi_draft_parents, verify_tree
from ..verifiers.verify import Uniforms
from . import scenarios
from .exact import verifier_law
from .markov import Drafter, MarkovChain, make_chain
from .registry import court_rules
from .simulate import generate
from .theory import total_variation

Verifier = Callable[..., Any]

LOSSLESS_TOL = 1e-12  # TV from the target allowed for a lossless verdict, on top of the unresolved mass

# Every rule the court knows by name, in the order :func:`compare` lists them: the registry's
# verifiers with verify's signature, by title (:func:`specviz.proof.registry.court_rules`).
RULES: dict[str, Verifier] = court_rules()


class Problem(NamedTuple):
    """What a verifier is judged on."""

    target: MarkovChain
    drafter: Drafter
    L: int  # tokens judged
    K: int  # padded draft width
    num_draft: int | tuple[int, ...]  # every row's draft count, or the counts drawn uniformly


class Judgement(NamedTuple):
    """The court's finding for one verifier on one problem."""

    rule: str
    law: np.ndarray  # (V,) * L exact law of the first L tokens
    target_law: np.ndarray  # (V,) * L the target's
    tv_from_target: float  # total variation between the two
    expected_tokens_per_step: float  # first verification, averaged over draft counts
    expected_accepted_per_step: float  # the same minus the one token every verification emits
    unresolved: float  # mass the enumeration could not resolve (a bound on its own error in TV)
    lossless: bool  # tv_from_target <= LOSSLESS_TOL + unresolved
    refused: str = ""  # why the court gave no law (then every number is NaN), "" when it did
    expected_table: np.ndarray | None = None  # (V+1, K+1) exact tokens by context and draft count (not for trees)

    @classmethod
    def refusal(cls, rule: str, pb: Problem, reason: str) -> Judgement:
        """The court gave no law for ``rule`` on ``pb``: every number NaN, ``reason`` said."""
        nan = float("nan")
        return cls(rule=rule, law=np.full((pb.target.V,) * pb.L, nan), target_law=pb.target.joint_law(pb.L),
                   tv_from_target=nan, expected_tokens_per_step=nan, expected_accepted_per_step=nan, unresolved=nan,
                   lossless=False, refused=reason)  # fmt: skip

    @property
    def badge(self) -> str:
        if self.refused:
            return "refused"
        return "lossless" if self.lossless else "LOSSY"


TOY_P, TOY_Q, TOY_K = (1 / 3, 2 / 3), (2 / 3, 1 / 3), 2  # Sun et al.'s example


def toy_problem() -> Problem:
    """Sun et al.'s example: context-free p = (1/3, 2/3), q = (2/3, 1/3), 2 drafts, 3 tokens judged.

    Block verification keeps 11/9 drafts per step, the chain 10/9; the lossy last threshold
    keeps 4/3 and its 3 tokens are 1/9 from the target in total variation.
    """
    target, draft = make_chain(np.array([TOY_P] * 3)), make_chain(np.array([TOY_Q] * 3))
    return Problem(target, Drafter(draft), TOY_K + 1, TOY_K, TOY_K)


def pair_problem(target_probs: Sequence[float], draft_probs: Sequence[float], K: int, L: int | None = None) -> Problem:
    """A context-free problem: the same p and q at every position, K drafts per round.

    ``L`` defaults to K + 1 (capped at 4 tokens judged, for the enumeration's sake).
    """
    p = np.asarray(target_probs, dtype=np.float64)
    q = np.asarray(draft_probs, dtype=np.float64)
    if p.ndim != 1 or q.shape != p.shape:
        raise InputError("draft_probs", f"a row of the target's length {p.shape[-1] if p.ndim else 0}", str(q.shape))
    if int(K) < 0:
        raise InputError("K", "a draft count >= 0", str(K))
    V = p.shape[0]
    target = make_chain(np.tile(p, (V + 1, 1)), "target_probs")
    draft = make_chain(np.tile(q, (V + 1, 1)), "draft_probs")
    return Problem(target, Drafter(draft), min(int(K) + 1, 4) if L is None else int(L), int(K), int(K))


def problem(scenario: Any) -> Problem:
    """A :class:`Problem` from a scenario name, a :class:`~specviz.proof.scenarios.Scenario`, a Problem or a
    tuple (target chain, drafter, L, K, num_draft)."""
    if isinstance(scenario, Problem):
        return scenario
    if isinstance(scenario, tuple) and len(scenario) == 5 and isinstance(scenario[0], MarkovChain):
        target, drafter, L, K, num_draft = scenario
        nd = int(num_draft) if np.ndim(num_draft) == 0 else tuple(int(j) for j in num_draft)
        return Problem(target, drafter, int(L), int(K), nd)
    sc = scenarios.get_scenario(scenario) if isinstance(scenario, str) else scenario
    if not isinstance(sc, scenarios.Scenario):
        raise InputError("scenario", "a scenario name, a Scenario, a Problem or (target, drafter, L, K, num_draft)",
                         type(scenario).__name__)  # fmt: skip
    target, draft = scenarios.scenario_chains(sc)
    counts = tuple(range(sc.K + 1)) if sc.ragged else sc.K
    return Problem(target, Drafter(draft, sc.drafter_mode), sc.L, sc.K, counts)


def _resolve(verifier: Verifier | str) -> tuple[str, Verifier]:
    if isinstance(verifier, str):
        if verifier not in RULES:
            raise InputError("verifier", "a rule name: " + ", ".join(RULES), repr(verifier))
        return verifier, RULES[verifier]
    if not callable(verifier):
        raise InputError(
            "verifier", "a function with specviz.verify's signature, or a rule name", type(verifier).__name__
        )
    return getattr(verifier, "__name__", type(verifier).__name__), verifier


def judge(
    verifier: Verifier | str, scenario: Any, *, name: str | None = None, max_evals: int | None = None
) -> Judgement:
    """The exact law of ``verifier`` on ``scenario`` (see :func:`problem`), its TV from the
    target and its expected tokens per step; ``lossless`` is computed, never declared.

    Raises :class:`~specviz.InputError` naming ``verifier`` when the enumeration cannot vouch for
    the law (see :mod:`specviz.proof.exact`): the court refuses rather than guesses.
    """
    label, fn = _resolve(verifier)
    pb = problem(scenario)
    kwargs = {} if max_evals is None else {"max_evals": int(max_evals)}
    res = verifier_law(fn, pb.target, pb.drafter, L=pb.L, num_draft=pb.num_draft, K=pb.K, **kwargs)
    want = pb.target.joint_law(pb.L)
    tv = total_variation(res.law, want)
    counts = [pb.num_draft] if isinstance(pb.num_draft, int) else list(pb.num_draft)
    tokens = float(np.mean([res.expected_tokens[0, j] for j in counts]))  # row 0: the start context
    return Judgement(
        rule=name or label,
        law=res.law,
        target_law=want,
        tv_from_target=tv,
        expected_tokens_per_step=tokens,
        expected_accepted_per_step=tokens - 1.0,
        unresolved=float(res.unresolved),
        lossless=bool(tv <= LOSSLESS_TOL + res.unresolved),
        expected_table=res.expected_tokens,
    )


def compare(rules: Iterable[str | Verifier] | None, scenario: Any, *, max_evals: int | None = None) -> list[Judgement]:
    """One :class:`Judgement` per rule (default: every rule in :data:`RULES`), on one problem.

    A rule the court cannot judge within ``max_evals`` (or at all) gets a row with NaN numbers,
    ``lossless=False`` and the reason in ``refused``, so one refusal does not hide the others.
    """
    pb = problem(scenario)
    out = []
    for r in RULES if rules is None else rules:
        label, _fn = _resolve(r)
        try:
            out.append(judge(r, pb, max_evals=max_evals))
        except InputError as e:
            if e.argument != "verifier":
                raise
            out.append(Judgement.refusal(label, pb, str(e)))
    return out


def table(judgements: Iterable[Judgement]) -> list[dict[str, Any]]:
    """Rows for display: rule, badge, TV, expected tokens and accepted drafts per step."""
    return [
        {
            "rule": j.rule,
            "verdict": j.badge,
            "TV from target": j.tv_from_target,
            "tokens per step": j.expected_tokens_per_step,
            "accepted drafts per step": j.expected_accepted_per_step,
            "unresolved mass": j.unresolved,
        }
        for j in judgements
    ]


# ---------------------------------------------------------------- trees: several candidates per node

BISECT_STEPS = 60  # halvings of [0, 1) that locate a threshold to within 2^-60 (below float64 spacing near 1)
BISECT_LEVELS = 5  # halvings per verifier call (31 points per line): the same result in a fifth of the calls
TREE_AUDIT_POINTS = 2000  # random points per context checked against the enumerated cells
TREE_MAX_ASSIGNMENTS = 20_000  # candidate-token assignments of one context


class TreeJudgement(NamedTuple):
    """The court's finding for a tree verifier on a Markov-chain problem (see :func:`judge_tree`)."""

    law: np.ndarray  # (V,) * L
    target_law: np.ndarray
    tv_from_target: float
    expected_tokens_per_step: float  # first verification (start context)
    expected_accepted_per_step: float
    lossless: bool  # tv <= LOSSLESS_TOL
    audited: int  # random points per context that all matched their cell


def judge_tree(
    target: MarkovChain,
    drafter: Drafter,
    parents: Sequence[int] | np.ndarray,
    *,
    L: int,
    verifier: Verifier | None = None,
    seed: int = 0,
) -> TreeJudgement:
    """The exact law of the first L tokens of rounds of tree verification, every round the same tree shape.

    ``parents`` (N,): the tree's shape in :mod:`specviz.verifiers.tree`'s layout. Each round, the
    candidates after a context are drawn from the drafter: ``mode="sample"`` draws every node's
    children i.i.d. from the drafter's row after the node's token (and reports those rows);
    ``"argmax"`` takes the drafter row's most likely tokens in order (a top-k tree, no q
    reported). ``verifier`` has :func:`specviz.verifiers.tree.verify_tree`'s signature and returns a result
    with ``path`` and ``tokens`` (default: :func:`specviz.verifiers.tree.verify_tree`).

    How. For each context and each assignment of candidate tokens (weighted by the drafter), the
    coins are resolved along the verifier's own decisions: the first tried node whose coin is not
    yet fixed has its threshold located by bisection on that coin (accepted iff the node is on
    the returned path), and the walk splits into its accepted and rejected sides, weighted by the
    located threshold. Once no undecided node is tried, the final draw's token is located on the
    sample uniform by bisection of each token boundary (an inverse-CDF draw is monotone in its
    uniform). Assumed, and checked on ``TREE_AUDIT_POINTS`` random points per context: a node's
    decision depends only on its own coin given the earlier decisions (the coins of nodes tried
    after it do not move its threshold), and the draw is monotone. A verifier that breaks either
    is refused with an :class:`~specviz.InputError` naming ``verifier``.
    """
    fn = verify_tree if verifier is None else verifier
    par = np.asarray(parents, dtype=np.int64)
    N, V, L = par.shape[0], target.V, int(L)
    if N < 1 or par[0] != -1 or any(not 0 <= par[n] < n for n in range(1, N)):
        raise InputError("parents", "-1 at node 0 and 0 <= parents[n] < n", str(par.tolist()))
    if L < 1:
        raise InputError("L", "at least 1 token", str(L))
    if drafter.chain.V != V or drafter.mode == "argmax_reports_softmax":
        expected = f"a 'sample' or 'argmax' drafter over V = {V} tokens"
        raise InputError("drafter", expected, f"{drafter.mode}, V = {drafter.chain.V}")
    rng = np.random.default_rng(seed)
    memo: dict[bytes, Any] | None = {} if fn is verify_tree else None  # see _tree_kernel
    kernels = {c: _tree_kernel(fn, target, drafter, par, c, rng, memo) for c in [-1, *range(V)]}
    law = np.zeros((V,) * L)
    pending: dict[tuple[int, ...], float] = {(): 1.0}
    while pending:
        prefix, mass = pending.popitem()
        for out, pr in kernels[prefix[-1] if prefix else -1].items():
            z = prefix + out
            if len(z) >= L:
                law[z[:L]] += mass * pr
            else:
                pending[z] = pending.get(z, 0.0) + mass * pr
    want = target.joint_law(L)
    tv = total_variation(law, want)
    tokens = float(sum(pr * len(out) for out, pr in kernels[-1].items()))
    return TreeJudgement(law, want, tv, tokens, tokens - 1.0, bool(tv <= LOSSLESS_TOL), TREE_AUDIT_POINTS)


def _assignments(target: MarkovChain, drafter: Drafter, par: np.ndarray, ctx: int) -> tuple[np.ndarray, np.ndarray]:
    """Candidate tokens (A, N) after context ctx (node 0's entry is ctx's token or 0) and their probability (A,)."""
    N, V = par.shape[0], target.V
    root = max(ctx, 0)
    if drafter.mode == "argmax":
        toks = np.zeros(N, np.int64)
        toks[0] = root
        rank = np.zeros(N, np.int64)
        for n in range(1, N):
            prev = ctx if par[n] == 0 else toks[par[n]]
            row = drafter.chain.probs(prev)
            order = np.lexsort((np.arange(V), -row))
            if rank[par[n]] >= V:
                raise InputError("parents", f"at most V = {V} distinct top-k candidates per node", "more")
            toks[n] = order[rank[par[n]]]
            rank[par[n]] += 1
        return toks[None, :], np.ones(1)
    if V ** (N - 1) > TREE_MAX_ASSIGNMENTS:
        expected = f"at most {TREE_MAX_ASSIGNMENTS:,} candidate assignments (V^(N-1))"
        raise InputError("parents", expected, f"{V}^{N - 1}")
    grid = np.array(list(itertools.product(range(V), repeat=N - 1)), dtype=np.int64).reshape(-1, N - 1)
    toks = np.concatenate([np.full((grid.shape[0], 1), root), grid], axis=1)  # (A, N)
    prob = np.ones(grid.shape[0])
    for n in range(1, N):
        prev = np.full(grid.shape[0], ctx) if par[n] == 0 else toks[:, par[n]]
        prob *= drafter.chain.probs(prev)[np.arange(grid.shape[0]), toks[:, n]]
    keep = prob > 0
    return toks[keep], prob[keep]


def _tree_kernel(fn: Verifier, target: MarkovChain, drafter: Drafter, par: np.ndarray, ctx: int,
                 rng: np.random.Generator, memo: dict[bytes, Any] | None = None
                 ) -> dict[tuple[int, ...], float]:  # fmt: skip
    """One round's law after context ctx: emitted tokens -> probability."""
    toks, prob = _assignments(target, drafter, par, ctx)
    N, V, A = par.shape[0], target.V, toks.shape[0]
    prev = np.where(np.arange(N)[None, :] == 0, ctx, toks)  # (A, N) the context each node's rows follow
    T = target.probs(prev)  # (A, N, V)
    Q = drafter.chain.probs(prev) if drafter.mode == "sample" else None

    def run(a: np.ndarray, ua: np.ndarray, us: np.ndarray) -> Any:
        res = fn(T[a], None if Q is None else Q[a], toks[a], np.broadcast_to(par, (a.size, N)),
                 np.full(a.size, N), uniforms=Uniforms(ua, us))  # fmt: skip
        return np.asarray(res.path), np.asarray(res.tokens), np.asarray(res.num_tokens)

    def accepted(path: np.ndarray, node: np.ndarray) -> np.ndarray:
        return (path == node[:, None]).any(axis=1)

    # A pure function of its uniforms first: the same rows and uniforms twice, in reverse order.
    pa, pu, ps = rng.integers(0, A, size=64), rng.random((64, N - 1)), rng.random(64)
    _, t1, n1 = run(pa, pu, ps)
    _, t2, n2 = run(pa[::-1], pu[::-1], ps[::-1])
    if (n1 != n2[::-1]).any() or (t1 != t2[::-1]).any():
        raise InputError("verifier", "a pure function of its uniforms= (the same tokens for the same rows and "
                         "uniforms on a second call)", "different tokens: no law can be enumerated")  # fmt: skip
    # The cells and the kernel depend only on the rows the verifier sees: after each context of a context-free
    # problem they are the same (verify_tree ignores node 0's token), so they are found once and reused; the
    # purity check above and the audit below still run for every context, on the same random draws as ever.
    rows = (T, np.empty(0) if Q is None else Q, toks[:, 1:], prob, par)
    key = None if memo is None else b"|".join(str(x.shape).encode() + np.ascontiguousarray(x).tobytes() for x in rows)
    hit = None if key is None or memo is None else memo.get(key)
    if hit is None:
        # Items: (assignment, coins, which coins are decided, lower/upper bound of each decided cell, weight).
        item_a = np.arange(A)
        coins = np.full((A, N - 1), 0.5)
        lo, hi = np.zeros((A, N - 1)), np.ones((A, N - 1))
        decided = np.zeros((A, N - 1), bool)
        weight = prob.copy()
        done_a, done_c, done_lo, done_hi, done_d, done_w = [], [], [], [], [], []
        while item_a.size:
            tried = _tried(fn, T, Q, toks, par, item_a, coins)
            todo = tried & ~decided  # (I, N-1)
            has = todo.any(axis=1)
            fin = ~has
            done_a.append(item_a[fin])
            done_c.append(coins[fin])
            done_lo.append(lo[fin])
            done_hi.append(hi[fin])
            done_d.append(decided[fin])
            done_w.append(weight[fin])
            sel = np.flatnonzero(has)
            if not sel.size:
                break
            node = todo[sel].argmax(axis=1)  # (S,) column of the first tried undecided node

            def coin_accepted(i: np.ndarray, mid: np.ndarray, a: np.ndarray = item_a[sel], c0: np.ndarray = coins[sel],
                              node: np.ndarray = node) -> np.ndarray:  # fmt: skip
                c = c0[i].copy()
                c[np.arange(i.size), node[i]] = mid
                p, _, _ = run(a[i], c, np.full(i.size, 0.5))
                return accepted(p, node[i] + 1)

            _, t = _bisect(coin_accepted, sel.size)  # accepted below the threshold: bisect on the node's coin
            # t: the first coin (to 2^-60) at which the node is rejected; 1: always accepted
            c0 = coins[sel].copy()
            c0[np.arange(sel.size), node] = 0.0
            p0, _, _ = run(item_a[sel], c0, np.full(sel.size, 0.5))
            t = np.where(accepted(p0, node + 1), t, 0.0)  # rejected even at u = 0: threshold 0
            new_a, new_c, new_lo, new_hi, new_d, new_w = [], [], [], [], [], []
            for side in (0, 1):  # 0: accepted, coin in [0, t); 1: rejected, coin in [t, 1)
                width = t if side == 0 else 1.0 - t
                k: np.ndarray = width > 0  # a mask here, indices in the kernel below
                c = coins[sel][k].copy()
                l_, h_ = lo[sel][k].copy(), hi[sel][k].copy()
                r, nd = np.arange(k.sum()), node[k]
                l_[r, nd], h_[r, nd] = (0.0, t[k]) if side == 0 else (t[k], 1.0)
                c[r, nd] = np.minimum(0.5 * (l_[r, nd] + h_[r, nd]), np.nextafter(h_[r, nd], -np.inf))  # in [lo, hi)
                d = decided[sel][k].copy()
                d[r, nd] = True
                new_a.append(item_a[sel][k])
                new_c.append(c)
                new_lo.append(l_)
                new_hi.append(h_)
                new_d.append(d)
                new_w.append(weight[sel][k] * width[k])
            item_a, coins, lo, hi = (np.concatenate(x) for x in (new_a, new_c, new_lo, new_hi))
            decided, weight = np.concatenate(new_d), np.concatenate(new_w)
        ia, ic, ilo, ihi, idec, iw = (np.concatenate(x) for x in (done_a, done_c, done_lo, done_hi, done_d, done_w))
        # The final draw: token boundaries on the sample uniform, by bisection (monotone inverse CDF).
        I = ia.size
        bounds = np.empty((I, V + 1))
        bounds[:, 0], bounds[:, V] = 0.0, 1.0
        line_v = np.repeat(np.arange(1, V), I)  # one line per (boundary v, item): all boundaries searched at once
        line_i = np.tile(np.arange(I), V - 1)

        def below(i: np.ndarray, mid: np.ndarray) -> np.ndarray:
            _, tk, nt = run(ia[line_i[i]], ic[line_i[i]], mid)
            return tk[np.arange(i.size), nt - 1] < line_v[i]

        _, b_hi = _bisect(below, line_i.size)
        _, tk, nt = run(ia, ic, np.zeros(I))
        last0 = tk[np.arange(I), nt - 1]
        for v in range(1, V):
            bounds[:, v] = np.where(last0 >= v, 0.0, b_hi[(v - 1) * I : v * I])  # token >= v from u = 0 on
        bounds = np.maximum.accumulate(bounds, axis=1)
        kernel: dict[tuple[int, ...], float] = {}
        for v in range(V):
            w = iw * (bounds[:, v + 1] - bounds[:, v])
            k = np.flatnonzero(w > 0)
            if not k.size:
                continue
            _, tk, nt = run(ia[k], ic[k], 0.5 * (bounds[k, v] + bounds[k, v + 1]))
            for row, j in enumerate(k):
                out = tuple(int(x) for x in tk[row, : nt[row]])
                if out[-1] != v:
                    expected = "an inverse-CDF final draw (token non-decreasing in its uniform)"
                    raise InputError("verifier", expected, f"token {out[-1]} inside the cell of token {v}")
                kernel[out] = kernel.get(out, 0.0) + float(w[j])
        hit = kernel, ia, ic, ilo, ihi, idec
        if key is not None and memo is not None:  # key is None exactly when memo is
            memo[key] = hit
    kernel, ia, ic, ilo, ihi, idec = hit
    _audit_tree(run, prob, ia, ic, ilo, ihi, idec, rng, N)
    return kernel


def _bisect(test: Callable[[np.ndarray, np.ndarray], np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """n bisections of [0, 1), BISECT_STEPS halvings each: test(lines, points) says which points lie below each
    line's threshold (then the lower edge moves up). Returns the final (lo, hi) of every line.

    The same floats as halving one step per call (mid = the midpoint, kept below hi), bit for bit: each call
    evaluates every midpoint the next BISECT_LEVELS steps could visit (the 2^levels - 1 nodes of their binary
    tree, computed by the same operations), then walks the tree by the answers. Fewer, larger verifier calls.
    """
    lo, hi = np.zeros(n), np.ones(n)
    done = 0
    while done < BISECT_STEPS:
        s = min(BISECT_LEVELS, BISECT_STEPS - done)
        l_, h_, mids = lo[None, :], hi[None, :], []
        for _ in range(s):  # level by level: node j's children are 2j (above its mid: not below) and 2j + 1
            mid = np.minimum(0.5 * (l_ + h_), np.nextafter(h_, -np.inf))  # a uniform: below 1
            mids.append(mid)
            l_, h_ = np.stack([l_, mid], axis=1).reshape(-1, n), np.stack([mid, h_], axis=1).reshape(-1, n)
        flat = np.concatenate(mids)  # (2^s - 1, n)
        ok = test(np.tile(np.arange(n), flat.shape[0]), flat.ravel()).reshape(flat.shape)
        cur, first, cols = np.zeros(n, np.int64), 0, np.arange(n)
        for level in range(s):
            mid, yes = flat[first + cur, cols], ok[first + cur, cols]
            lo, hi = np.where(yes, mid, lo), np.where(yes, hi, mid)
            cur, first = 2 * cur + yes, first + 2**level
        done += s
    return lo, hi


def _tried(fn: Verifier, T: np.ndarray, Q: np.ndarray | None, toks: np.ndarray, par: np.ndarray, a: np.ndarray,
           coins: np.ndarray) -> np.ndarray:  # fmt: skip
    """(I, N-1) bool: which nodes the verifier tried at these coins (its ``thresholds`` not NaN)."""
    N = par.shape[0]
    res = fn(T[a], None if Q is None else Q[a], toks[a], np.broadcast_to(par, (a.size, N)), np.full(a.size, N),
             uniforms=Uniforms(coins, np.full(a.size, 0.5)))  # fmt: skip
    return ~np.isnan(np.asarray(res.thresholds))


def _audit_tree(run: Callable[..., Any], prob: np.ndarray, ia: np.ndarray, ic: np.ndarray, ilo: np.ndarray,
                ihi: np.ndarray, idec: np.ndarray, rng: np.random.Generator, N: int) -> None:  # fmt: skip
    """Random points, drawn by the round's law, must give the output of the cell that holds them."""
    a = rng.choice(prob.size, size=TREE_AUDIT_POINTS, p=prob / prob.sum())
    u = rng.random((TREE_AUDIT_POINTS, N - 1))
    s = rng.random(TREE_AUDIT_POINTS)
    box = ~idec[None] | ((ilo[None] <= u[:, None]) & (u[:, None] < ihi[None]))  # (P, I, N-1)
    inside = (ia[None, :] == a[:, None]) & box.all(-1)  # (P, I)
    if not (inside.sum(axis=1) == 1).all():
        expected = "cells of decisions that cover every point once"
        raise InputError("verifier", expected, "points in no cell or in several")
    cell = inside.argmax(axis=1)
    _, tok_c, nt_c = run(ia[cell], ic[cell], s)
    _, tok_u, nt_u = run(a, u, s)
    emitted = np.arange(tok_u.shape[1])[None, :] < nt_u[:, None]
    same = (nt_c == nt_u) & (np.where(emitted, tok_c, -1) == np.where(emitted, tok_u, -1)).all(axis=1)
    if not same.all():
        expected = "decisions that depend only on each node's own coin given the earlier ones"
        raise InputError("verifier", expected, f"{int((~same).sum())} of {TREE_AUDIT_POINTS} points off their cell")


def judge_tree_problem(
    scenario: Any, parents: Sequence[int] | np.ndarray, *, name: str, deterministic: bool = False,
    max_assignments: int = TREE_MAX_ASSIGNMENTS,
) -> Judgement:  # fmt: skip
    """:func:`judge_tree` on a :func:`problem`, as a :class:`Judgement` row for :func:`table`.

    The problem's drafter proposes the candidates (``deterministic``: its most likely tokens,
    no q reported); its K and draft counts are not used, the tree's shape says how many
    candidates there are. Refuses (``parents``) a tree with more than ``max_assignments``
    candidate assignments per context (V^(N-1)).
    """
    pb = problem(scenario)
    N, V = len(parents), pb.target.V
    if not deterministic and V ** (N - 1) > max_assignments:
        raise InputError("parents", f"at most {max_assignments:,} candidate assignments (V^(N-1))", f"{V}^{N - 1}")
    drafter = Drafter(pb.drafter.chain, "argmax" if deterministic else "sample")
    j = judge_tree(pb.target, drafter, parents, L=pb.L)
    return Judgement(rule=name, law=j.law, target_law=j.target_law, tv_from_target=j.tv_from_target,
                     expected_tokens_per_step=j.expected_tokens_per_step,
                     expected_accepted_per_step=j.expected_accepted_per_step, unresolved=0.0,
                     lossless=j.lossless)  # fmt: skip


def compare_with_trees(
    scenario: Any, k: int, *, max_evals: int | None = None, max_assignments: int = TREE_MAX_ASSIGNMENTS
) -> list[Judgement]:
    """:func:`compare` of every rule in :data:`RULES`, then, for k >= 2, two multi-draft rows:
    k i.i.d. drafts of the problem's K tokens from the root (SpecInfer) and the drafter's top-k
    (deterministic), each judged by :func:`judge_tree`. A tree the court cannot take within
    ``max_assignments`` gets a refused row."""
    pb = problem(scenario)
    rows = compare(None, pb, max_evals=max_evals)
    if int(k) < 2:
        return rows
    parents = multi_draft_parents(int(k), pb.K)
    for name, det in ((f"tree: {k} i.i.d. drafts", False), (f"tree: top-{k} drafts", True)):
        try:
            rows.append(judge_tree_problem(pb, parents, name=name, deterministic=det, max_assignments=max_assignments))
        except InputError as e:
            rows.append(Judgement.refusal(name, pb, str(e)))
    return rows


class Measurement(NamedTuple):
    """Tokens per verification measured by :func:`specviz.proof.simulate.generate`, beside the exact figure."""

    rule: str
    tokens_per_round: float  # mean over the verifications run
    se: float  # its standard error
    exact: float  # the exact expectation averaged over the (context, draft count) of the rounds run
    n: int  # sequences generated
    rounds: int = 0  # verifications behind the mean (what the power of the tokens test rests on)

    @property
    def z(self) -> float:
        """(measured - exact) / SE; NaN without an SE."""
        return (self.tokens_per_round - self.exact) / self.se if self.se > 0 else float("nan")


def measure(judgement: Judgement, verifier: Verifier | str, scenario: Any, *, n: int, seed: int) -> Measurement:
    """Run ``verifier`` through :func:`specviz.proof.simulate.generate` on ``scenario`` (n sequences of L
    tokens, seeded) and compare its tokens per verification with ``judgement``'s exact table,
    averaged over the contexts and draft counts the run met."""
    if judgement.expected_table is None or judgement.refused:
        raise InputError("judgement", "a judgement of a verify-signature rule with its exact table", judgement.badge)
    _label, fn = _resolve(verifier)
    pb = problem(scenario)
    ragged = not isinstance(pb.num_draft, int)
    if not isinstance(pb.num_draft, int) and tuple(pb.num_draft) != tuple(range(pb.K + 1)):
        raise InputError(
            "scenario", "every row drafting K, or 0..K uniformly (as generate draws them)", str(pb.num_draft)
        )
    sim = generate(fn, pb.target, pb.drafter, n=int(n), L=pb.L, K=pb.K, rng=np.random.default_rng(int(seed)),
                   ragged=ragged, expected=judgement.expected_table)  # fmt: skip
    return Measurement(judgement.rule, sim.tokens_per_round, sim.tokens_per_round_se, sim.expected_tokens_per_round, n,
                       sim.num_verifications)  # fmt: skip
