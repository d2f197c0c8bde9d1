"""Vocabularies past one block of the sampler (V > 256): blocks, the tail block, column chunks.

The replacement-or-bonus draw in ``specviz.verifiers._sample`` searches blocks of 256 tokens, summed a
chunk of columns at a time for all rows together (V < 8192) or one row at a time through views
(V >= 8192 on the CPU). Two independent checks cover it at V = 255 .. 32001:

- token for token against the reference, :func:`specviz.verifiers.reference.verify` (NumPy
  padded, NumPy flat, torch CPU padded and flat, float32 and float64, sampled and deterministic
  drafters, ragged rows, zeros, and uniforms at 0, just below 1 and at the block boundaries of
  the reference's own integer weights);
- the law of the drawn token by chi-square, which does not depend on the quantization, with
  negative controls that must fail.
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
import torch
from scipy import stats

import specviz
from specviz import Uniforms, verify, verify_flat
from specviz.proof.bugs import BUGS
from specviz.verifiers import reference
from specviz.verifiers.layout import padded_to_flat

pytestmark = pytest.mark.heavy  # V up to 32001, chi-square at V = 600: left out of the quick subset

BLOCK = 256  # tokens per block of the two-level search (specviz.verifiers._sample.BLOCK)
NUMPY_CHUNK_ELEMS = 2**16  # columns x rows per chunk on NumPy (specviz.verifiers._xp.NumpyOps.chunk_elems)
ROW_LOOP_V = 8192  # from this V on, the CPU processes each row alone (specviz.verifiers._sample.ROW_LOOP_V)
U_MAX = 1.0 - 2.0**-53  # the largest uniform below 1
ALPHA = 0.001  # chi-square level; the critical value comes from scipy


# --- the draw's weights, from the reference ---------------------------------------------------------


def draw_weights(target, draft, tokens, num, accepted) -> list[tuple[list[int], bool]]:
    """Per row, the integer weights the reference draws from (reference.on_grid of the residual at the
    first rejection, p where it has no mass, or p at row num_draft for the bonus) and whether the
    residual fell back to p: where the sample uniforms are placed."""
    out = []
    for b, n in enumerate(accepted):
        p = target[b, n][None]  # (1, V)
        if n == num[b]:
            out.append(([int(v) for v in reference.on_grid(p)[0]], False))
            continue
        w = reference.residual(p, None if draft is None else draft[b, n][None], tokens[b, n : n + 1])
        empty = reference.on_grid(w).sum() == 0
        out.append(([int(v) for v in reference.on_grid(p if empty else w)[0]], bool(empty)))
    return out


def boundary_uniforms(weights: list[int], m: int) -> tuple[float, float] | None:
    """The two adjacent float64 uniforms whose thresholds straddle the running weight before
    token m: the last one with thr < C (draws before m) and the first with thr >= C (draws at
    or after m). None when nothing lies on one side."""
    total = sum(weights)
    c = sum(weights[:m])
    if not 0 < c < total:
        return None
    ft = float(total)
    # Bisect on the bit patterns of non-negative float64s, which are ordered like their values:
    # u = 0 gives thr = 0 < c, u = 1 gives thr >= c.
    lo, hi = 0, float_bits(1.0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if int(bits_float(mid) * ft) >= c:
            hi = mid
        else:
            lo = mid
    below, at = bits_float(lo), bits_float(hi)
    return (below, at) if at < 1.0 else None


def float_bits(u: float) -> int:
    return struct.unpack("<q", struct.pack("<d", u))[0]


def bits_float(b: int) -> float:
    return struct.unpack("<d", struct.pack("<q", b))[0]


# --- inputs ---------------------------------------------------------------------------------------


def prob_row(rng: np.random.Generator, V: int) -> np.ndarray:
    """One float64 probability row of a random kind; most kinds have exact zeros."""
    kind = int(rng.integers(6))
    w = rng.gamma(0.5, size=V)
    if kind == 1:  # sparse
        w[rng.random(V) > 0.08] = 0.0
    elif kind == 2:  # one-hot
        w[:] = 0.0
        w[rng.integers(V)] = 1.0
    elif kind == 3:  # peaked: one token holds 0.97, a sparse spread the rest
        w[rng.random(V) < 0.5] = 0.0
        w *= 0.03 / max(w.sum(), 1e-300)
        w[rng.integers(V)] += 0.97
    elif kind == 4:  # a span of zeros: whole blocks (possibly the tail) when V has several
        nb = -(-V // BLOCK)
        if nb > 1:
            a = int(rng.integers(nb))
            w[a * BLOCK : int(rng.integers(a + 1, nb + 1)) * BLOCK] = 0.0
        else:
            a = int(rng.integers(V))
            w[a : int(rng.integers(a + 1, V + 1))] = 0.0
    idx = rng.choice(V, size=min(V - 1, 40), replace=False) if kind == 5 else []
    w[idx] = 0.0
    if w.sum() == 0:
        w[rng.integers(V)] = 1.0
    w = w / w.sum()
    # Kind 5: entries at and around the quantum (2^-48 and 1.5 * 2^-48 -> 1, smaller -> 0).
    w[idx] = rng.choice([2.0**-48, 1.5 * 2.0**-48, 2.0**-49, 1e-16, 0.0], size=len(idx))
    return w


def draft_row(rng, p, V):
    """A draft distribution q for target row p and a token drawn from it (or off it)."""
    mode = int(rng.integers(4))
    q = p.copy() if mode == 0 else 0.7 * p + 0.3 * prob_row(rng, V) if mode == 1 else prob_row(rng, V)
    q = q / q.sum()
    zeros = np.flatnonzero(q == 0)
    if mode == 0 and len(zeros) and rng.random() < 0.5:
        x = int(rng.choice(zeros))  # q == p and q(x) = 0: rejected with no residual mass
    elif rng.random() < 0.1:
        x = int(rng.integers(V))  # may be a token q gives no mass: rejected
    else:
        x = int(rng.choice(V, p=q))
    return q, x


def make_case(seed: int, B: int, K: int, V: int, dtype, sampled: bool):
    """A ragged batch (num_draft in [0, K] with both ends present) and its uniforms."""
    rng = np.random.default_rng(seed)
    target = np.stack([prob_row(rng, V) for _ in range(B * (K + 1))]).reshape(B, K + 1, V)
    num = rng.integers(0, K + 1, size=B)
    num[:2] = [K, 0]
    tokens = np.full((B, K), -1, dtype=np.int64)
    draft = np.zeros((B, K, V)) if sampled else None
    for b in range(B):
        for i in range(num[b]):
            p = target[b, i]
            if sampled:
                draft[b, i], tokens[b, i] = draft_row(rng, p, V)
            else:  # the drafter's own choice: p's argmax, a draw from p, or any token
                mode = int(rng.integers(3))
                tokens[b, i] = np.argmax(p) if mode == 0 else rng.choice(V, p=p) if mode == 1 else rng.integers(V)
    target = target.astype(dtype)
    draft = None if draft is None else draft.astype(dtype)

    ua = rng.random((B, K))
    r = rng.random((B, K))
    ua[r < 0.05] = 0.0
    ua[(r >= 0.05) & (r < 0.1)] = U_MAX
    ua[0, :2] = [0.0, U_MAX]  # row 0 has K drafts: both extremes are tested in every case
    for b, i in zip(*np.nonzero((r >= 0.1) & (r < 0.25)), strict=True):  # coins at p(x) / q(x)
        if i < num[b]:
            px = float(target[b, i, tokens[b, i]])
            qx = 1.0 if draft is None else float(draft[b, i, tokens[b, i]])
            if 0 < px < qx:
                ua[b, i] = px / qx if r[b, i] < 0.175 else math.nextafter(px / qx, 0.0)
    return target, draft, tokens, num, ua, rng


def sample_uniforms(rng, weights_per_row, V):
    """Per row: 0, 1 - 2^-53, a pair straddling a block (or token) boundary, or a random value."""
    nb = -(-V // BLOCK)
    us = rng.random(len(weights_per_row))
    for b, weights in enumerate(weights_per_row):
        r = rng.random()
        if r < 0.05:
            us[b] = 0.0
        elif r < 0.1:
            us[b] = U_MAX
        elif r < 0.5:
            pick = rng.random()
            if nb > 1 and pick < 0.35:
                m = (nb - 1) * BLOCK  # the start of the last (tail) block
            elif nb > 1 and pick < 0.7:
                m = int(rng.integers(1, nb)) * BLOCK
            else:
                m = int(rng.integers(1, V))
            pair = boundary_uniforms(weights, m)
            if pair is not None:
                us[b] = pair[int(rng.integers(2))]
    us[:2] = [0.0, U_MAX]  # in every case
    return us


def numpy_chunk_width(rows: int) -> int:
    """Columns per chunk of NumPy's block-sum pass for a group of `rows` rows (as in _sample)."""
    return max(BLOCK, NUMPY_CHUNK_ELEMS // rows // BLOCK * BLOCK)


def to_np(res) -> specviz.Verification:
    return specviz.Verification(*[f.numpy() if isinstance(f, torch.Tensor) else np.asarray(f) for f in res])


# --- 1. token for token against the reference -----------------------------------------------------

CASES = [  # (V, B, K): B >= 300 so NumPy's chunks are one block wide; V = 32001 runs the per-row loop
    (255, 600, 4),
    (256, 600, 4),
    (257, 600, 4),
    (600, 600, 4),
    (32001, 48, 3),
]


@pytest.mark.parametrize("sampled", [True, False], ids=["sampled_q", "deterministic"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize(("V", "B", "K"), CASES, ids=[f"V{c[0]}" for c in CASES])
def test_every_path_matches_the_reference(V, B, K, dtype, sampled):
    seed = V * 10 + (dtype == np.float32) * 2 + sampled
    target, draft, tokens, num, ua, rng = make_case(seed, B, K, V, dtype, sampled)

    u0 = Uniforms(ua, np.zeros(B))  # the accept phase reads no sample uniform
    accepted = np.asarray(reference.verify(target, draft, tokens, num, uniforms=u0).num_accepted)
    drawn = draw_weights(target, draft, tokens, num, accepted)  # per row: (integer weights, fell back to p)
    us = sample_uniforms(rng, [w for w, _ in drawn], V)
    u = Uniforms(ua, us)
    want = reference.verify(target, draft, tokens, num, uniforms=u)  # the oracle of every path below
    draw = want.tokens[np.arange(B), accepted]
    assert all(w[t] > 0 for (w, _), t in zip(drawn, draw, strict=True))  # a token of weight 0 is never drawn
    rejected = accepted < num

    # The batch reaches what it is meant to exercise.
    assert (draw < V).all() and rejected.any() and (~rejected).any()
    assert (us == 0).any() and (us == U_MAX).any() and (ua == 0).any() and (ua == U_MAX).any()
    if BLOCK < V < ROW_LOOP_V:
        for group in (rejected, ~rejected):  # both NumPy groups run several column chunks
            assert numpy_chunk_width(int(group.sum())) < V
    if V > BLOCK:
        assert (draw >= BLOCK).any() and (draw >= (V - 1) // BLOCK * BLOCK).any()  # later and tail blocks
        if draft is None and V >= 600:  # drafted tokens to remove outside the first chunk
            removed = tokens[np.arange(B), np.minimum(accepted, K - 1)][rejected]
            assert (removed >= numpy_chunk_width(int(rejected.sum()))).sum() >= 10
    if sampled:
        assert any(fell_back for _, fell_back in drawn)  # residual without mass: drawn from p

    valid = np.arange(K)[None, :] < num[:, None]
    flat = padded_to_flat(target, draft, tokens, num)
    tt = [None if a is None else torch.as_tensor(a) for a in (target, draft, tokens, num, ua, us)]
    ft = [None if a is None else torch.as_tensor(a) for a in flat]
    runs = {
        "numpy": verify(target, draft, tokens, num, uniforms=u),
        "numpy_flat": verify_flat(*flat, uniforms=Uniforms(ua[valid], us)),
        "torch": verify(*tt[:4], uniforms=Uniforms(tt[4], tt[5])),
        "torch_flat": verify_flat(*ft, uniforms=Uniforms(tt[4][torch.as_tensor(valid)], tt[5])),
    }
    for name, res in runs.items():
        res = to_np(res)
        mismatch = np.flatnonzero((res.tokens != want.tokens).any(1))
        assert not len(mismatch), (name, mismatch[:5], res.tokens[mismatch[:5]], want.tokens[mismatch[:5]])
        for field, got, ref in zip(res._fields, res, want, strict=True):  # every field, to the bit
            np.testing.assert_array_equal(got, ref, err_msg=f"{name}: {field}")
        np.testing.assert_array_equal(res.num_accepted, accepted, err_msg=name)


# --- 2. the law of the draw, by chi-square --------------------------------------------------------

V_LAW = 600
ROWS = 300_000
BATCH = 50_000  # rows per call, to keep memory small


def law_with_zeros(rng: np.random.Generator, V: int) -> np.ndarray:
    p = rng.dirichlet(np.full(V, 0.3))
    p[rng.random(V) < 0.2] = 0.0
    return p / p.sum()


def chi2_test(counts: np.ndarray, probs: np.ndarray) -> tuple[float, float, bool]:
    """Pearson statistic, its critical value at ALPHA, and whether the counts pass.

    Cells with probs == 0 must be empty; cells with expected count < 5 are pooled into one.
    """
    keep = probs > 0
    n = counts.sum()
    obs, exp = counts[keep].astype(np.float64), n * probs[keep] / probs[keep].sum()
    small = exp < 5
    if small.any():
        obs = np.append(obs[~small], obs[small].sum())
        exp = np.append(exp[~small], exp[small].sum())
        if exp[-1] < 5:  # the pool itself is still small: merge it into the smallest cell
            i = int(np.argmin(exp[:-1]))
            obs[i] += obs[-1]
            exp[i] += exp[-1]
            obs, exp = obs[:-1], exp[:-1]
    stat = float(((obs - exp) ** 2 / exp).sum())
    crit = float(stats.chi2.isf(ALPHA, len(obs) - 1))
    return stat, crit, bool(stat < crit and counts[~keep].sum() == 0)


def shifted(p: np.ndarray) -> np.ndarray:
    """p with 0.01 of mass moved from its largest token to its second largest."""
    a, b = np.argsort(p)[-2:][::-1]
    out = p.copy()
    out[a] -= 0.01
    out[b] += 0.01
    return out


def counts_of(tokens: np.ndarray, V: int) -> np.ndarray:
    assert tokens.min() >= 0 and tokens.max() < V, (tokens.min(), tokens.max())
    return np.bincount(tokens, minlength=V)


def test_bonus_draw_follows_target_at_v600():
    # K = 0: every row draws its bonus from target_probs[:, 0] = p.
    p = law_with_zeros(np.random.default_rng(600), V_LAW)
    rng = np.random.default_rng(601)
    counts = np.zeros(V_LAW, dtype=np.int64)
    for _ in range(ROWS // BATCH):
        res = verify(
            np.broadcast_to(p, (BATCH, 1, V_LAW)),
            None,
            np.zeros((BATCH, 0), dtype=np.int64),
            np.zeros(BATCH, dtype=np.int64),
            rng=rng,
        )
        counts += counts_of(res.tokens[:, 0], V_LAW)
    stat, crit, ok = chi2_test(counts, p)
    assert ok, (stat, crit)
    assert counts[BLOCK:].sum() > 0 and counts[2 * BLOCK :].sum() > 0  # every block is reached
    # Negative control: the same counts against a law with 0.01 of mass moved must fail.
    stat, crit, ok = chi2_test(counts, shifted(p))
    assert not ok, (stat, crit)


def first_tokens_after_one_draft(verifier, p, q, seed):
    """K = 1, drafts from q: the first emitted token of each row and whether the draft was rejected."""
    rng = np.random.default_rng(seed)
    first, rejected = [], []
    for _ in range(ROWS // BATCH):
        x = rng.choice(V_LAW, size=(BATCH, 1), p=q)
        res = verifier(
            np.broadcast_to(p, (BATCH, 2, V_LAW)),
            np.broadcast_to(q, (BATCH, 1, V_LAW)),
            x,
            np.ones(BATCH, dtype=np.int64),
            rng=rng,
        )
        first.append(np.asarray(res.tokens)[:, 0])
        rejected.append(np.asarray(res.num_accepted) == 0)
    return np.concatenate(first), np.concatenate(rejected)


def one_draft_laws():
    rng = np.random.default_rng(602)
    return law_with_zeros(rng, V_LAW), law_with_zeros(rng, V_LAW)


def test_first_token_after_one_draft_follows_target_at_v600():
    p, q = one_draft_laws()
    first, rejected = first_tokens_after_one_draft(verify, p, q, seed=603)
    assert rejected.mean() > 0.5  # most rows draw from the residual
    stat, crit, ok = chi2_test(counts_of(first, V_LAW), p)
    assert ok, ("first token vs p", stat, crit)
    # The replacements alone follow the normalized residual max(0, p - q).
    residual = np.maximum(p - q, 0)
    stat, crit, ok = chi2_test(counts_of(first[rejected], V_LAW), residual / residual.sum())
    assert ok, ("replacement vs residual", stat, crit)


def test_resample_from_p_fails_the_first_token_test_at_v600():
    # Negative control: drawing the replacement from p instead of the residual changes the law.
    p, q = one_draft_laws()
    first, _ = first_tokens_after_one_draft(BUGS["resample_from_p"].verifier, p, q, seed=603)
    stat, crit, ok = chi2_test(counts_of(first, V_LAW), p)
    assert not ok, (stat, crit)
