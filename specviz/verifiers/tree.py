"""Multi-draft and tree verification (recursive rejection sampling), batched, for NumPy and PyTorch.

# B rows, N nodes per tree (padded width, node 0 the root), V vocabulary

A row verifies one tree of candidate tokens in a single target pass. The tree is given in the
flat layout serving engines use (one node per position of the tree-attention mask):

- node 0 is the **root**: the position of the last committed token. Its token is ignored.
- ``parents[b, n]`` is the index of node n's parent, ``-1`` for the root. Nodes are numbered in
  topological order: ``0 <= parents[b, n] < n`` for every node 1 <= n < num_nodes[b]. The
  children of a node are the nodes naming it as parent, **tried in increasing index order**.
- ``node_tokens[b, n]`` is node n's candidate token (a continuation of its parent's path).
- ``target_probs[b, n]`` is the target's distribution of the next token after the path
  root -> n: row 0 is the distribution of the first new token, a leaf's row is its bonus row.
- ``draft_probs[b, n]`` is the law node n's children were drawn from, **independently of each
  other** (i.i.d. candidates, SpecInfer's multi-step speculative sampling). ``None`` means the
  candidates are deterministic (a top-k tree as in EAGLE, or any rule that does not use the
  verifier's coins): distinct tokens per node, chosen by any means.
- ``num_nodes[b]`` in [1, N]: nodes at index >= num_nodes[b] are padding and never read.

A chain of j drafts is the tree parents = (-1, 0, 1, .., j-1); :func:`verify_tree_chain`
wraps it with :func:`specviz.verify`'s signature, so every tool that drives ``verify`` (the
exact court, :func:`specviz.proof.simulate.generate`) drives the tree rule too.

The rule. Start at the root with r = p_0. At the current node c, try its children in order.
For a child with token y, draw its coin u and

- (i.i.d. candidates, q = draft_probs[b, c]) accept iff u < min(1, r(y) / q(y)); on rejection
  replace r by the residual (r - q)^+ / sum (r - q)^+;
- (deterministic candidates) accept iff u < r(y), i.e. q is one-hot on y; on rejection set
  r(y) = 0 and renormalize (the same formula with q = e_y).

An accepted child becomes the current node, with r = its target row, and its own children
are tried. When the current node's children are all rejected, or it has none (a leaf: its whole
path was accepted), one token is drawn from r: the residual left by the rejections, or the
node's target row (the bonus). The round emits the accepted path's tokens, then that token.

Why the output follows the target (losslessness). Fix a node c reached with the target's
next-token law r_0 = p_c, and let its children y_1 .. y_k be tried in order.

(1) One node emits exactly r_0. Claim: trying candidates y_i .. y_k with current law r_{i-1}
emits its first token with law r_{i-1}. With none left (i = k + 1) the token is drawn from
r_k. Otherwise y_i ~ q (i.i.d. case), independent of the coin and of the later candidates; it
is accepted with probability q(y) min(1, r(y)/q(y)) = min(r(y), q(y)) for each y, so
Pr[accept] = a = sum_y min(r(y), q(y)), and on rejection the rest tries y_{i+1} .. y_k with
r' = (r - q)^+ / (1 - a) (because sum_y (r - q)^+ = 1 - sum min(r, q) = 1 - a), which by
induction emits law r'. Total: min(r, q) + (1 - a) r' = min(r, q) + (r - q)^+ = r. In the
deterministic case y_i is fixed, accepted with probability r(y_i), and on rejection the rest
emits r' = r with y_i removed and renormalized, so the token is y_i with probability r(y_i)
and any other x with probability (1 - r(y_i)) r(x) / (1 - r(y_i)) = r(x). (When 1 - a = 0
rejection has probability 0; the code falls back to the node's target row.)

(2) What follows a token. Given that the node emitted x, either the round stops (x was drawn
from the final r) and the next round starts from the context ending in x, or a child with
token x was accepted and the same procedure runs at that child, whose target row is p after
x and whose own candidates were drawn given x only, independent of the coins used so far. In
both cases the continuation, conditioned on x, is again a process whose next token follows the
target given the path: by (1) at the child, or by the next round. By induction on the depth
(and round after round) every emitted sequence follows the target's joint law.

Which candidate of several with the same token is accepted does not matter for the law; only
the order of trying does, and it must not depend on the coins. A candidate with q(y) = 0 (one
the drafter says it could not have drawn) is rejected, as in the chain.

Exactness across backends: masses are integer sums of weights floored to multiples of 2^-48
(the chain's grid, as in :mod:`specviz.verifiers.block`), the coin compares ``u * q(y) * M < r(y)``
with r kept unnormalized and M its integer-summed mass, and elementwise float64 arithmetic is the same in NumPy and
torch, so both return identical tokens for the same uniforms. Flooring moves each mass by at
most V 2^-48, which moves the law by about that much per tested candidate.

Also here, for demos and tests: tree shapes, their closed forms and one verification node by
node (:func:`trace`). The exact law of rounds on Markov chains is :func:`specviz.proof.court.judge_tree`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .._types import Array
from ..errors import InputError
from . import _validate as check
from ._sample import GRID
from ._xp import NumpyOps, TorchOps, accepts, ops_for
from .block import inverse_cdf, quantize
from .verify import PAD_TOKEN, Uniforms, Verification

Ops = NumpyOps | TorchOps

ROOT_PARENT = -1  # parents[b, 0]: the root has no parent


class TreeVerification(NamedTuple):
    """Result of verifying a batch of trees. Arrays are of the input's kind, on its device.

    ``tokens``: (B, N) int64, the accepted path's tokens then the drawn token, padded with -1.
    ``num_tokens``: (B,) int64, tokens emitted (accepted + 1).
    ``num_accepted``: (B,) int64, candidates accepted (the depth of the last node).
    ``path``: (B, N-1) int64, the accepted nodes' indices from the root's child down, -1 padded.
    ``last_node``: (B,) int64, the node whose r the final token was drawn from (0: the root).
    ``bonus``: (B,) bool, True where the last node is a leaf (the token is from its target row).
    ``accept_uniforms``: (B, N-1) float64, at column n - 1 the coin of node n where it was
    tried, NaN elsewhere.
    ``thresholds``: (B, N-1) float64, at column n - 1 the acceptance probability of node n when
    it was tried (min(1, r(y)/q(y)), or r(y) for deterministic candidates), NaN elsewhere.
    ``sample_uniforms``: (B,) float64, the uniform of the final draw.
    """

    tokens: Array
    num_tokens: Array
    num_accepted: Array
    path: Array
    last_node: Array
    bonus: Array
    accept_uniforms: Array
    thresholds: Array
    sample_uniforms: Array


class _Tree(NamedTuple):
    ops: Ops
    target: Array  # (B, N, V) as given
    draft: Array | None  # (B, N, V) as given
    tokens: Array  # (B, N) int64, 0 where unread
    parents: Array  # (B, N) int64, -2 where unread
    has_child: Array  # (B, N) bool
    B: int
    N: int
    V: int


def verify_tree(
    target_probs: Array,
    draft_probs: Array | None,
    node_tokens: Array,
    parents: Array,
    num_nodes: Array,
    *,
    rng: Any = None,
    uniforms: Uniforms | tuple[Array, Array] | None = None,
    validate: bool = True,
) -> TreeVerification:
    """Verify a padded batch of candidate trees; the output follows the target exactly.

    Parameters
    ----------
    target_probs
        Shape (B, N, V): at node n the target's next-token distribution after the path to n.
    draft_probs
        Shape (B, N, V): at node n the law its children were drawn from, i.i.d. ``None``:
        deterministic candidates (accept y with probability r(y)).
    node_tokens
        Shape (B, N) integers in [0, V) at nodes 1 .. num_nodes[b]-1 (node 0 and padding ignored).
    parents
        Shape (B, N) integers: -1 at node 0, and 0 <= parents[b, n] < n at nodes 1 .. num_nodes[b]-1
        (padding ignored). Children are tried in increasing index order.
    num_nodes
        Shape (B,) integers in [1, N].
    rng
        ``numpy.random.Generator`` for NumPy inputs, ``torch.Generator`` for torch inputs;
        default a fresh unseeded one. Draws ``accept`` (B, N-1) first, then ``sample`` (B,).
    uniforms
        Explicit :class:`~specviz.Uniforms`: ``accept`` (B, N-1) with node n's coin at column
        n - 1, ``sample`` (B,) the uniform of the final draw. For a chain-shaped tree this is
        :func:`specviz.verify`'s layout.
    validate
        Check the probability rows that can be read (every live node's target row, the draft
        row of every live node with a child). Shapes, tree structure and token ids are checked
        either way.

    Returns
    -------
    TreeVerification
    """
    tree = _prepare(target_probs, draft_probs, node_tokens, parents, num_nodes, validate)
    ua, us = _uniforms(tree, rng, uniforms, validate)
    return _verify(tree, ua, us, validate)


def verify_tree_chain(
    target_probs: Array,
    draft_probs: Array | None,
    draft_tokens: Array,
    num_draft: Array,
    *,
    rng: Any = None,
    uniforms: Uniforms | tuple[Array, Array] | None = None,
    validate: bool = True,
) -> Verification:
    """:func:`verify_tree` on the chain-shaped tree of each row, with :func:`specviz.verify`'s signature.

    Row b's tree has nodes 0 .. num_draft[b]: node i + 1 holds draft_tokens[b, i] with parent i,
    node i has target row target_probs[b, i] and draft row draft_probs[b, i]. With one candidate
    per node, recursive rejection sampling is the chain rule, so the law is :func:`specviz.verify`'s
    (the tokens for given uniforms can differ in the last bits of the draw's rounding).

    Shapes as in :func:`specviz.verify`: target (B, K+1, V), draft (B, K, V) or None, drafts
    (B, K), num_draft (B,). ``ratios`` in the result holds the acceptance probability of each
    tried draft (NaN elsewhere).
    """
    ops = ops_for(target_probs)
    T, x, j, valid = check.padded_inputs(ops, target_probs, draft_tokens, num_draft, "target_probs")
    B, K, V = int(x.shape[0]), int(x.shape[1]), int(T.shape[2])
    # ids below num_draft, named as the caller named them (not as the tree's node_tokens)
    check.check_range("draft_tokens", x[valid], 0, V - 1, ops, "token ids at positions < num_draft")
    D = None
    if draft_probs is not None:
        Q = check.as_array(ops, draft_probs, "draft_probs")
        check.check_shape("draft_probs", Q, (B, K, V), "(B, K, V)")
        check.check_float("draft_probs", Q, ops)
        D = ops.full((B, K + 1, V), 0.0, np.float64)  # (B, K+1, V): the last node has no children
        D[:, :K] = ops.to_float64(Q)
    toks = ops.full((B, K + 1), 0, np.int64)
    toks[:, 1:] = ops.where(valid, x, 0)
    par = ops.arange(K + 1)[None, :] - 1 + ops.full((B, K + 1), 0, np.int64)  # (B, K+1) -1, 0, .., K-1
    tree = _prepare(T, D, toks, par, j + 1, validate)
    ua, us = _chain_uniforms(tree, rng, uniforms, validate)
    res = _verify(tree, ua, us, validate)
    tried = res.thresholds == res.thresholds  # (B, K) not NaN: the draft was tried
    return Verification(
        tokens=res.tokens,
        num_tokens=res.num_tokens,
        num_accepted=res.num_accepted,
        accept_uniforms=ops.where(tried, res.accept_uniforms, float("nan")),
        ratios=res.thresholds,
        bonus=res.bonus,
        sample_uniforms=res.sample_uniforms,
    )


# ---------------------------------------------------------------- checks


def _prepare(
    target_probs: Array, draft_probs: Array | None, node_tokens: Array, parents: Array, num_nodes: Array, validate: bool
) -> _Tree:
    ops = ops_for(target_probs)
    T = check.as_array(ops, target_probs, "target_probs")
    tok = check.as_array(ops, node_tokens, "node_tokens")
    par = check.as_array(ops, parents, "parents")
    n = check.as_array(ops, num_nodes, "num_nodes")
    check.check_ndim("target_probs", T, 3, "(B, N, V)")
    B, N, V = (int(s) for s in T.shape)
    if N < 1 or V < 1:
        raise InputError("target_probs", "at least one node (the root) and one token", f"shape {(B, N, V)}")
    check.check_shape("node_tokens", tok, (B, N), "(B, N) from target_probs (B, N, V)")
    check.check_shape("parents", par, (B, N), "(B, N) from target_probs (B, N, V)")
    check.check_shape("num_nodes", n, (B,), "(B,)")
    for name, a in (("node_tokens", tok), ("parents", par), ("num_nodes", n)):
        check.check_integer(name, a, ops)
    check.check_float("target_probs", T, ops)
    tok, par, n = ops.to_int64(tok), ops.to_int64(par), ops.to_int64(n)
    check.check_range("num_nodes", n, 1, N, ops, "node counts (the root included)")
    idx = ops.arange(N)
    live = idx[None, :] < n[:, None]  # (B, N)
    if B:
        check.check_range("parents", par[:, 0], ROOT_PARENT, ROOT_PARENT, ops, "-1 at the root (node 0)")
    inner = live & (idx[None, :] >= 1)  # (B, N) nodes with a parent
    if bool((inner & ((par < 0) | (par >= idx[None, :]))).any()):
        bad = par[inner & ((par < 0) | (par >= idx[None, :]))][0]
        raise InputError("parents", "0 <= parents[b, n] < n at nodes 1 .. num_nodes[b]-1 (topological order)",
                         f"a parent {int(bad)} out of order")  # fmt: skip
    check.check_range("node_tokens", tok[inner], 0, V - 1, ops, "token ids at nodes 1 .. num_nodes[b]-1")
    tok = ops.where(inner, tok, 0)
    par = ops.where(inner, par, -2)  # -2 matches no current node
    has_child = ops.full((B, N), False, bool)
    for i in range(1, N):
        rows = ops.nonzero(inner[:, i])
        if int(rows.shape[0]):
            has_child[rows, par[rows, i]] = True
    Q = None
    if draft_probs is not None:
        Q = check.as_array(ops, draft_probs, "draft_probs")
        check.check_shape("draft_probs", Q, (B, N, V), "(B, N, V)")
        check.check_float("draft_probs", Q, ops)
    if validate:
        check.check_prob_rows("target_probs", T[live], ops)  # (rows read, V)
        if Q is not None:
            check.check_prob_rows("draft_probs", Q[has_child], ops)
    return _Tree(ops=ops, target=T, draft=Q, tokens=tok, parents=par, has_child=has_child, B=B, N=N, V=V)


def _uniforms(tree: _Tree, rng: Any, uniforms: Any, validate: bool) -> tuple[Array, Array]:
    """(B, N-1) accept and (B,) sample uniforms, drawn or checked."""
    shape, names = (tree.B, tree.N - 1), "(B, N-1): one coin per non-root node"
    return check.get_uniforms(tree.ops, rng, uniforms, shape, tree.B, validate, names)


def _chain_uniforms(tree: _Tree, rng: Any, uniforms: Any, validate: bool) -> tuple[Array, Array]:
    try:
        return _uniforms(tree, rng, uniforms, validate)
    except InputError as e:  # name the chain's layout, (B, K), in the message
        expected = e.expected.replace("(B, N-1): one coin per non-root node", "(B, K)")
        raise InputError(e.argument, expected, e.got) from None


# ---------------------------------------------------------------- the rule


def _mass(ops: Ops, r: Array, validate: bool) -> Array:
    """(R,) float64: the integer-summed mass of unnormalized weights r (R, V)."""
    return ops.to_float64(quantize(ops, r, validate).sum(-1)) / GRID


def _verify(tree: _Tree, ua: Array, us: Array, validate: bool) -> TreeVerification:
    """The rule (its plain statement, and its mistakes: :mod:`specviz.verifiers.reference`)."""
    ops, B, N = tree.ops, tree.B, tree.N
    ar = ops.arange(B)
    cur = ops.full((B,), 0, np.int64)  # (B,) current node
    depth = ops.full((B,), 0, np.int64)
    path = ops.full((B, max(N - 1, 0)), PAD_TOKEN, np.int64)  # (B, N-1)
    thr = ops.full((B, max(N - 1, 0)), float("nan"), np.float64)  # (B, N-1)
    r = ops.to_float64(tree.target[:, 0]) + 0.0  # (B, V) unnormalized law at the current node
    M = _mass(ops, r, validate)  # (B,)
    for i in range(1, N):  # topological order: a node's children all come after it
        rows = ops.nonzero(tree.parents[:, i] == cur)
        R = int(rows.shape[0])
        if not R:
            continue
        ri = ops.arange(R)
        y = tree.tokens[rows, i]  # (R,)
        rr, MM = r[rows], M[rows]  # (R, V), (R,)
        ry = rr[ri, y]  # (R,)
        if tree.draft is None:
            qrow = None
            qy = ops.full((R,), 1.0, np.float64)
        else:
            qrow = ops.to_float64(tree.draft[rows, cur[rows]])  # (R, V)
            qy = qrow[ri, y]
        u = ua[rows, i - 1]
        acc = accepts(u, qy, ry, MM)  # (R,) u q(y) M < r(y)
        den = qy * MM
        t = ops.where(den > 0, ry / ops.where(den > 0, den, 1.0), 0.0)
        thr[rows, i - 1] = ops.where(t < 1, t, 1.0)
        a = rows[acc]
        if int(a.shape[0]):
            path[a, depth[a]] = i
            depth[a] = depth[a] + 1
            cur[a] = i
            pa = ops.to_float64(tree.target[a, ops.full((int(a.shape[0]),), i, np.int64)]) + 0.0  # (A, V)
            r[a] = pa
            M[a] = _mass(ops, pa, validate)
        rej = ops.nonzero(~acc)
        if int(rej.shape[0]):
            b = rows[rej]
            if qrow is None:
                new = rr[rej] + 0.0
                new[ops.arange(int(rej.shape[0])), y[rej]] = 0.0
            else:
                new = ops.clamp_min0(rr[rej] - MM[rej][:, None] * qrow[rej])
            m = _mass(ops, new, validate)
            empty = m <= 0  # rejection had probability 0 up to rounding: fall back to the node's row
            if bool(empty.any()):
                e = ops.nonzero(empty)
                new[e] = ops.to_float64(tree.target[b[e], cur[b[e]]])
                m = _mass(ops, new, validate)
            r[b] = new
            M[b] = m
    token = inverse_cdf(ops, r, us, validate)  # (B,)
    bonus = ~tree.has_child[ar, cur]
    tokens = ops.full((B, N), PAD_TOKEN, np.int64)
    if N > 1:
        safe = ops.where(path >= 0, path, 0)
        tokens[:, : N - 1] = ops.where(path >= 0, tree.tokens[ar[:, None], safe], PAD_TOKEN)
    tokens[ar, depth] = token
    return TreeVerification(
        tokens=tokens,
        num_tokens=depth + 1,
        num_accepted=depth + 0,
        path=path,
        last_node=cur,
        bonus=bonus,
        accept_uniforms=ops.where(thr == thr, ua, float("nan")) if N > 1 else ua + 0.0,
        thresholds=thr,
        sample_uniforms=us + 0.0,
    )


# ---------------------------------------------------------------- k-ary trees of a context-free pair


def kary_parents(k: int, depth: int) -> np.ndarray:
    """(N,) parents of the full tree with k children per node down to ``depth``, numbered level by
    level (N = 1 + k + .. + k^depth); node 0 is the root."""
    if int(k) < 1 or int(depth) < 0:
        raise InputError("k", "k >= 1 children per node and depth >= 0", f"k = {k}, depth = {depth}")
    parents, level = [ROOT_PARENT], [0]
    for _ in range(int(depth)):
        nxt = []
        for node in level:
            for _ in range(int(k)):
                parents.append(node)
                nxt.append(len(parents) - 1)
        level = nxt
    return np.array(parents, dtype=np.int64)


class TreeBatch(NamedTuple):
    """Inputs of :func:`verify_tree` for n rows."""

    target_probs: np.ndarray  # (n, N, V)
    draft_probs: np.ndarray | None  # (n, N, V), None for deterministic candidates
    node_tokens: np.ndarray  # (n, N)
    parents: np.ndarray  # (n, N)
    num_nodes: np.ndarray  # (n,)


def context_free_trees(
    target_probs: np.ndarray, draft_probs: np.ndarray, parents: np.ndarray, n: int, rng: np.random.Generator, *,
    iid: bool = True,
) -> TreeBatch:  # fmt: skip
    """n trees of one shape for a context-free pair (the same p and q after every prefix).

    ``iid``: every node's children are drawn independently from q (SpecInfer); otherwise they
    are q's most likely tokens, in order (ties to the lowest id), as a top-k tree, and the
    verifier is told no q.
    """
    p = np.asarray(target_probs, dtype=np.float64)
    q = np.asarray(draft_probs, dtype=np.float64)
    par = np.asarray(parents, dtype=np.int64)
    N, V = par.shape[0], p.shape[0]
    tokens = np.zeros((int(n), N), dtype=np.int64)
    if iid:
        cdf = np.cumsum(q)
        tokens[:, 1:] = np.minimum((cdf[None, None, :] <= rng.random((int(n), N - 1, 1)) * cdf[-1]).sum(-1), V - 1)
    else:
        order = np.lexsort((np.arange(V), -q))  # q's tokens, most likely first
        rank = np.zeros(N, dtype=np.int64)
        for i in range(1, N):
            if rank[par[i]] >= V:
                raise InputError("parents", f"at most V = {V} distinct candidates per node", "more")
            tokens[:, i] = order[rank[par[i]]]
            rank[par[i]] += 1
    T = np.broadcast_to(p, (int(n), N, V))
    Q = np.broadcast_to(q, (int(n), N, V)) if iid else None
    return TreeBatch(T, Q, tokens, np.broadcast_to(par, (int(n), N)), np.full(int(n), N, dtype=np.int64))


def node_acceptance(target_probs: np.ndarray, draft_probs: np.ndarray, k: int, *, iid: bool = True) -> float:
    """Chance that one of a node's k candidates is accepted, for a context-free pair.

    i.i.d. candidates: 1 - prod_i (1 - a_i) with a_i = sum min(r_i, q), r_0 = p and
    r_{i+1} = (r_i - q)^+ / (1 - a_i). Top-k deterministic candidates y_1 .. y_k: the sum of
    p(y_i) (candidate i is accepted with probability r_{i-1}(y_i), and r is p renormalized
    without the earlier candidates).
    """
    p = np.asarray(target_probs, dtype=np.float64)
    q = np.asarray(draft_probs, dtype=np.float64)
    if not iid:
        order = np.lexsort((np.arange(q.size), -q))
        return float(p[order[: int(k)]].sum())
    r, miss = p.copy(), 1.0
    for _ in range(int(k)):
        a = float(np.minimum(r, q).sum())
        miss *= 1.0 - a
        if a >= 1.0:
            break
        r = np.maximum(r - q, 0.0) / (1.0 - a)
    return 1.0 - miss


def kary_expected_accepted(
    target_probs: np.ndarray, draft_probs: np.ndarray, k: int, depth: int, *, iid: bool = True
) -> float:
    """Exact expected accepted candidates of a full k-ary tree of ``depth`` for a context-free pair.

    After an acceptance the child's candidates face the same p and q again, so the depth reached
    is at least d with probability A^d, A = :func:`node_acceptance`: the sum of A^d, d = 1..depth.
    With k = 1 this is the chain's a (1 - a^K) / (1 - a).
    """
    A = node_acceptance(target_probs, draft_probs, k, iid=iid)
    return float(sum(A**d for d in range(1, int(depth) + 1)))


class Measured(NamedTuple):
    """Accepted candidates per verification, measured over n rows."""

    mean: float
    se: float
    n: int


def measure_kary(
    target_probs: np.ndarray, draft_probs: np.ndarray, k: int, depth: int, n: int, seed: int, *, iid: bool = True
) -> Measured:
    """Run :func:`verify_tree` on n seeded k-ary trees of a context-free pair; mean accepted and its SE."""
    if int(n) < 2:
        raise InputError("n", "at least 2 rows", str(n))
    rng = np.random.default_rng(int(seed))
    batch = context_free_trees(target_probs, draft_probs, kary_parents(k, depth), int(n), rng, iid=iid)
    acc = verify_tree(*batch, rng=rng).num_accepted.astype(np.float64)
    return Measured(float(acc.mean()), float(acc.std(ddof=1) / np.sqrt(acc.size)), int(n))


def trace(batch: TreeBatch, result: TreeVerification, row: int = 0) -> list[dict[str, Any]]:
    """One row's verification, node by node, for display: what each candidate was compared with.

    One dict per node 1 .. num_nodes-1: its parent, token, the chance it was accepted when tried
    (NaN if it never was: an ancestor or an earlier sibling was accepted first, or an ancestor
    was rejected), its coin, and the outcome ("accepted", "rejected", "not tried"). The last
    entry describes the final draw: the node it came from and whether it was the bonus.
    """
    b = int(row)
    n = int(np.asarray(batch.num_nodes)[b])
    par, tok = np.asarray(batch.parents)[b], np.asarray(batch.node_tokens)[b]
    thr, u = np.asarray(result.thresholds)[b], np.asarray(result.accept_uniforms)[b]
    on_path = set(np.asarray(result.path)[b].tolist())
    out: list[dict[str, Any]] = []
    for i in range(1, n):
        tried = bool(thr[i - 1] == thr[i - 1])
        outcome = "accepted" if i in on_path else ("rejected" if tried else "not tried")
        out.append({"node": i, "parent": int(par[i]), "token": int(tok[i]), "acceptance probability": float(thr[i - 1]),
                    "coin u": float(u[i - 1]), "outcome": outcome})  # fmt: skip
    last = int(np.asarray(result.last_node)[b])
    drawn = int(np.asarray(result.tokens)[b, int(np.asarray(result.num_accepted)[b])])
    source = (
        "the bonus: its target row (a leaf)"
        if bool(np.asarray(result.bonus)[b])
        else "the residual after its children's rejections"
    )
    out.append({"node": last, "parent": int(par[last]) if last else ROOT_PARENT, "token": drawn,
                "acceptance probability": float("nan"), "coin u": float(np.asarray(result.sample_uniforms)[b]),
                "outcome": f"drawn at node {last} from {source}"})  # fmt: skip
    return out


def multi_draft_parents(k: int, depth: int) -> np.ndarray:
    """(N,) parents of k draft sequences of length ``depth`` sharing the root (SpecInfer's
    multi-sequence speculation, a tree whose only branching is at the root), numbered level by
    level: N = 1 + k * depth. k = 1 is a chain."""
    if int(k) < 1 or int(depth) < 0:
        raise InputError("k", "k >= 1 drafts and depth >= 0", f"k = {k}, depth = {depth}")
    parents = [ROOT_PARENT]
    for d in range(int(depth)):
        for c in range(int(k)):
            parents.append(0 if d == 0 else 1 + (d - 1) * int(k) + c)
    return np.array(parents, dtype=np.int64)
