"""The simulation's fast paths against plain references, and its joint law against the target's.

# n sequences, L tokens, K drafts per round, V vocabulary, A rows of one round

Three layers: the inverse-CDF drafting tables give exactly the tokens of the reference
inverse CDF (``sample_rows``) and exactly the chain's probabilities as intervals of u; the
padded batches built by gathering table rows equal the reference built with ``probs()`` and
``np.eye``; and whole runs, cut into chunks that do not divide n, pass the joint chi-square
while a bug fails it. The chi-square runs: V = 4, L = 3, so 64 cells (fewer after pooling),
level 0.001; for 63 degrees of freedom the critical value is 103.44 (scipy).
"""

from __future__ import annotations

import numpy as np
import pytest

from specviz import verify
from specviz.errors import InputError
from specviz.proof.bugs import BUGS
from specviz.proof.markov import GUIDE, START, Drafter, inverse_cdf, make_chain, random_chain
from specviz.proof.simulate import Round, build_round, draft_tokens, garbage_token, generate, sample_rows
from specviz.proof.stats import joint_test
from specviz.proof.theory import chain_expected_tokens

V, L, K = 4, 3, 3
ALPHA = 0.001


@pytest.fixture(scope="module")
def chains():
    rng = np.random.default_rng(7)
    return random_chain(V, rng), random_chain(V, rng, zero_fraction=0.5)


def reference_round(target, drafter, ctx, drafts, num_draft) -> Round:
    """The layout written out plainly: probs() at each context, np.eye for the padding."""
    A, K_ = drafts.shape
    g = garbage_token(target.V)
    pos = np.arange(K_ + 1)
    ctxs = np.concatenate([ctx[:, None], drafts], axis=1)  # (A, K+1)
    valid_t = pos[None, :] <= num_draft[:, None]
    target_probs = target.probs(np.where(valid_t, ctxs, START))
    target_probs[~valid_t] = np.eye(target.V)[g]
    valid = pos[None, :K_] < num_draft[:, None]
    draft_probs = None
    if drafter.reports_q:
        draft_probs = drafter.chain.probs(np.where(valid_t, ctxs, START)[:, :K_])
        draft_probs[~valid] = np.eye(target.V)[g]
    return Round(target_probs, draft_probs, np.where(valid, drafts, g), num_draft)


# --- drafting ------------------------------------------------------------------------------------


def test_inverse_cdf_gives_the_tokens_of_sample_rows():
    rng = np.random.default_rng(1)
    for Vt, zeros in ((3, 0.0), (4, 0.5), (7, 0.6), (111, 0.3)):
        chain = random_chain(Vt, rng, concentration=0.3, zero_fraction=zeros)
        icdf = chain.inverse_cdf()
        rows = rng.integers(0, Vt + 1, size=20_000)
        u = rng.random(rows.size)
        # Uniforms on and next to every threshold, where a different comparison would differ.
        edge_rows = np.repeat(np.arange(Vt + 1), Vt)
        edge = (np.cumsum(chain.table, axis=1) / chain.table.sum(1, keepdims=True)).ravel().clip(0, 1 - 2**-53)
        # ... and on both ends of every guide bucket.
        bucket = np.arange(GUIDE + 1) / GUIDE
        bucket = np.concatenate([bucket[:-1], np.nextafter(bucket[1:], 0)])
        bucket_rows = rng.integers(0, Vt + 1, size=bucket.size)
        for uu, rr in ((u, rows), (edge, edge_rows), (np.nextafter(edge, 0), edge_rows),
                       (np.nextafter(edge, 1).clip(0, 1 - 2**-53), edge_rows), (bucket, bucket_rows)):  # fmt: skip
            got = icdf.draw(rr, uu)
            assert (got == sample_rows(chain.table[rr], uu)).all()
            assert (got == icdf.count_thresholds(rr, uu)).all()  # the guide table agrees with the definition
            assert chain.table[rr, got].min() > 0  # never a token of probability 0
        assert (icdf.guide < 0).reshape(Vt + 1, GUIDE).sum(1).max() <= Vt - 1  # one unsure bucket per threshold


def interval_lengths(draw, R: int, Vt: int) -> np.ndarray:
    """(R, Vt) length of the set of u in [0, 1) on which ``draw(row, u)`` gives each token.

    The draw is monotone in u, so each token owns an interval; its end is found by bisection
    down to adjacent doubles.
    """
    rows = np.repeat(np.arange(R), Vt)
    v = np.tile(np.arange(Vt), R)
    lo, hi = np.zeros(rows.size), np.ones(rows.size)  # draw(lo) <= v < draw(hi), hi = 1 standing for "never"
    for _ in range(80):
        mid = (lo + hi) / 2
        up = draw(rows, np.minimum(mid, 1 - 2**-53)) > v
        hi, lo = np.where(up, mid, hi), np.where(up, lo, mid)
    hi = np.where(draw(rows, np.zeros(rows.size)) > v, 0.0, hi)  # an empty interval at u = 0 ends at 0
    ends = hi.reshape(R, Vt)  # first u whose token exceeds v, 1 when none does
    return np.diff(np.concatenate([np.zeros((R, 1)), ends], axis=1), axis=1)


def test_inverse_cdf_intervals_are_the_chain_probabilities():
    table = random_chain(5, np.random.default_rng(3), zero_fraction=0.4).table  # (6, 5), two zeros a row
    icdf = inverse_cdf(table)
    lengths = interval_lengths(icdf.draw, *table.shape)
    assert np.abs(lengths - table).max() < 1e-12
    assert (lengths[table == 0] == 0).all()
    # Negative control: the off-by-one of the start row (row c instead of c + 1) is seen.
    shifted = interval_lengths(lambda r, u: icdf.draw((r + 1) % table.shape[0], u), *table.shape)
    assert np.abs(shifted - table).max() > 0.05


def test_draft_tokens_follow_the_drafter_chain_exactly(chains):
    _, draft = chains
    rng = np.random.default_rng(5)
    ctx = rng.integers(-1, V, size=50_000)
    got = draft_tokens(Drafter(draft), ctx, K, np.random.default_rng(9))
    # Reference: the same uniforms, one per step, through sample_rows on the gathered rows.
    u = np.random.default_rng(9).random((K, ctx.size))
    prev, want = ctx, np.empty_like(got)
    for i in range(K):
        prev = want[:, i] = sample_rows(draft.probs(prev), u[i])
    assert (got == want).all()
    greedy = draft_tokens(Drafter(draft, "argmax"), ctx, K, rng)
    assert (greedy[:, 0] == np.argmax(draft.probs(ctx), axis=1)).all()
    assert (greedy[:, 1] == np.argmax(draft.probs(greedy[:, 0]), axis=1)).all()


# --- the padded batch ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sample", "argmax", "argmax_reports_softmax"])
def test_build_round_equals_the_plain_layout(chains, mode):
    target, draft = chains
    drafter = Drafter(draft, mode)
    rng = np.random.default_rng(11)
    for A, Kr in ((1, 1), (7, 3), (99, 4)):
        ctx = rng.integers(-1, V, size=A)
        drafts = rng.integers(0, V, size=(A, Kr))
        for j in (np.full(A, Kr), rng.integers(0, Kr + 1, size=A)):
            got, want = build_round(target, drafter, ctx, drafts, j), reference_round(target, drafter, ctx, drafts, j)
            assert np.array_equal(got.target_probs, want.target_probs)
            assert np.array_equal(got.draft_tokens, want.draft_tokens)
            assert (got.draft_probs is None) == (want.draft_probs is None)
            if want.draft_probs is not None:
                assert np.array_equal(got.draft_probs, want.draft_probs)


def test_build_round_pads_with_garbage_rows(chains):
    target, draft = chains
    j = np.array([0, 1, 2, 3])
    rnd = build_round(target, Drafter(draft), np.array([-1, 0, 1, 2]), np.zeros((4, 3), dtype=np.int64), j)
    g = garbage_token(V)
    for b in range(4):
        assert (rnd.target_probs[b, j[b] + 1 :] == np.eye(V)[g]).all()
        assert (rnd.draft_probs[b, j[b] :] == np.eye(V)[g]).all()
        assert (rnd.draft_tokens[b, j[b] :] == g).all()
        assert not (rnd.target_probs[b, : j[b] + 1] == np.eye(V)[g]).all(axis=1).any()  # real rows are not one-hot


def test_build_round_rejects_tokens_outside_the_vocabulary(chains):
    target, draft = chains
    with pytest.raises(InputError, match=r"drafts.*\[-1, 3\].*\[0, 4\]"):
        build_round(target, Drafter(draft), np.array([0]), np.array([[0, 4, 1]]), np.array([3]))
    with pytest.raises(InputError, match="ctx"):
        build_round(target, Drafter(draft), np.array([-2]), np.array([[0, 1, 1]]), np.array([3]))


# --- whole runs ----------------------------------------------------------------------------------


def run(verifier, chains, seed, *, n=200_003, chunk=1_000, ragged=True, mode="sample"):
    target, draft = chains
    sim = generate(verifier, target, Drafter(draft, mode), n=n, L=L, K=K, rng=np.random.default_rng(seed),
                   ragged=ragged, chunk=chunk)  # fmt: skip
    return sim, joint_test(sim.sequences, target.joint_law(L), alpha=ALPHA)


@pytest.mark.parametrize("ragged", [False, True])
def test_chunked_run_passes_the_joint_test_and_a_bug_fails_it(chains, ragged):
    # n = 200,003 in chunks of 1,000: 200 full chunks and a last one of 3 sequences.
    sim, res = run(verify, chains, 21, ragged=ragged)
    assert (sim.sequences >= 0).all()  # every sequence is complete, the last chunk's too
    assert res.passed, res
    assert res.dof >= 20 and res.detectable_tv < 0.02  # the zeros pool some cells; the pass still means something
    _, bad = run(BUGS["shared_uniform"].verifier, chains, 21, ragged=ragged)
    assert not bad.passed, bad
    assert bad.statistic > 5 * bad.critical_value


def test_reading_the_padding_fails_with_chunks(chains):
    def reads_padding(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None):
        return verify(target_probs, draft_probs, draft_tokens, np.full_like(num_draft, K), rng=rng)

    _, res = run(reads_padding, chains, 22, n=50_000)
    assert not res.passed, res


@pytest.mark.parametrize("mode", ["sample", "argmax"])
def test_every_call_gets_rng_and_a_padded_batch_with_garbage(chains, mode):
    target, draft = chains
    g, seen = garbage_token(V), []

    def inspecting(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None):
        assert isinstance(rng, np.random.Generator)
        assert target_probs.shape[1:] == (K + 1, V) and draft_tokens.shape[1] == K
        for b in range(min(len(num_draft), 50)):
            j = num_draft[b]
            assert (target_probs[b, j + 1 :] == np.eye(V)[g]).all() and (draft_tokens[b, j:] == g).all()
            if draft_probs is not None:
                assert (draft_probs[b, j:] == np.eye(V)[g]).all()
        seen.append(int((num_draft < K).sum()))
        return verify(target_probs, draft_probs, draft_tokens, num_draft, rng=rng)

    generate(inspecting, target, Drafter(draft, mode), n=3_000, L=L, K=K, rng=np.random.default_rng(8), ragged=True,
             chunk=1_000)  # fmt: skip
    assert sum(seen) > 1_000  # the ragged rows were there to inspect


def test_the_tally_matches_a_recount_of_every_round(chains):
    target, draft = chains
    seen, odd = [], np.random.default_rng(17)

    def recording(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None):
        res = verify(target_probs, draft_probs, draft_tokens, num_draft, rng=rng)
        # num_accepted only feeds the statistics: move it off by -2..+2 so the counts must cope
        # with values outside 0..K the way the plain masks below do.
        res = res._replace(num_accepted=res.num_accepted + odd.integers(-2, 3, size=len(num_draft)))
        # The context is the table row equal to the first target row (the chain's rows are distinct).
        ctx = np.argmin(np.abs(target_probs[:, 0, None, :] - target.table[None]).sum(-1), axis=1) - 1
        seen.append((num_draft.copy(), np.asarray(res.num_tokens), np.asarray(res.num_accepted), ctx))
        return res

    expected = chain_expected_tokens(target, Drafter(draft), K)
    sim = generate(recording, target, Drafter(draft), n=5_001, L=L, K=K, rng=np.random.default_rng(3), ragged=True,
                   expected=expected, chunk=700)  # fmt: skip
    j = np.concatenate([s[0] for s in seen])
    num = np.concatenate([s[1] for s in seen]).astype(np.float64)
    n_acc = np.concatenate([s[2] for s in seen])
    ctx = np.concatenate([s[3] for s in seen])
    pos = np.arange(K)
    tested = ((pos[None, :] <= n_acc[:, None]) & (pos[None, :] < j[:, None])).sum(0)
    accepted = (pos[None, :] < n_acc[:, None]).sum(0)
    assert sim.num_verifications == j.size
    assert sim.tokens_per_round == pytest.approx(num.mean(), rel=1e-12)
    assert sim.tokens_per_round_se == pytest.approx(num.std() / np.sqrt(num.size), rel=1e-9)
    assert sim.mean_num_draft == pytest.approx(j.mean(), rel=1e-12)
    assert np.array_equal(sim.tested_by_position, tested)
    assert np.array_equal(sim.accept_by_position, accepted / np.maximum(tested, 1))
    assert sim.expected_tokens_per_round == pytest.approx(expected[ctx + 1, j].mean(), rel=1e-12)


def test_expected_table_may_hold_nan_where_nothing_is_met(chains):
    # exact.verifier_law's expected_tokens is NaN for draft counts a run never uses.
    target, draft = chains
    expected = chain_expected_tokens(target, Drafter(draft), K)
    partial = np.full_like(expected, np.nan)
    partial[:, K] = expected[:, K]  # rows are not ragged: only j = K is met
    args = dict(n=20_000, L=L, K=K, chunk=3_000)
    full = generate(verify, target, Drafter(draft), rng=np.random.default_rng(2), expected=expected, **args)
    part = generate(verify, target, Drafter(draft), rng=np.random.default_rng(2), expected=partial, **args)
    assert np.isfinite(part.expected_tokens_per_round)
    assert part.expected_tokens_per_round == full.expected_tokens_per_round


def test_skips_validation_only_for_verifiers_that_offer_it(chains):
    target, draft = chains
    calls = []

    def with_validate(tp, dp, dt, nd, *, rng=None, validate=True):
        calls.append(("with", validate))
        return verify(tp, dp, dt, nd, rng=rng, validate=validate)

    def without(tp, dp, dt, nd, *, rng=None):
        calls.append(("without", None))
        return verify(tp, dp, dt, nd, rng=rng)

    for fn in (with_validate, without):
        generate(fn, target, Drafter(draft), n=10, L=L, K=K, rng=np.random.default_rng(0))
    assert set(calls) == {("with", False), ("without", None)}


def test_bad_settings_and_silent_verifiers_are_reported(chains):
    target, draft = chains
    rng = np.random.default_rng(0)
    with pytest.raises(InputError, match="chunk"):
        generate(verify, target, Drafter(draft), n=10, L=L, K=K, rng=rng, chunk=0)
    with pytest.raises(InputError, match=r"expected.*\(5, 4\)"):
        generate(verify, target, Drafter(draft), n=10, L=L, K=K, rng=rng, expected=np.zeros((5, 3)))

    def silent(tp, dp, dt, nd, *, rng=None):
        res = verify(tp, dp, dt, nd, rng=rng)
        return res._replace(num_tokens=np.zeros_like(res.num_tokens))

    with pytest.raises(InputError, match="at least one token"):
        generate(silent, target, Drafter(draft), n=10, L=L, K=K, rng=rng, chunk=3)
    empty = generate(verify, target, Drafter(draft), n=0, L=L, K=K, rng=rng)
    assert empty.sequences.shape == (0, L) and empty.num_verifications == 0


def test_one_token_chain_and_zero_drafts():
    # V = 1 (the garbage token is the only token) and K = 0 (every round is a bonus draw).
    one = make_chain(np.ones((2, 1)))
    sim = generate(verify, one, Drafter(one), n=100, L=4, K=2, rng=np.random.default_rng(0), ragged=True)
    assert (sim.sequences == 0).all()
    t, d = random_chain(V, np.random.default_rng(4)), random_chain(V, np.random.default_rng(5))
    sim = generate(verify, t, Drafter(d), n=50_000, L=2, K=0, rng=np.random.default_rng(6), chunk=999)
    assert sim.tokens_per_round == 1.0 and sim.tested_by_position.shape == (0,)
    res = joint_test(sim.sequences, t.joint_law(2), alpha=ALPHA)  # 16 cells: critical value 37.70 at 15 dof
    assert res.passed, res
    # Negative control: the same run with target and drafter swapped follows the other chain.
    swapped = generate(verify, d, Drafter(t), n=50_000, L=2, K=0, rng=np.random.default_rng(6), chunk=999)
    assert not joint_test(swapped.sequences, t.joint_law(2), alpha=ALPHA).passed
