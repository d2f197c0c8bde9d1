"""The engine bugs of issue 11: exact laws, prove at home, and the faults tested directly.

Exact laws come from enumerating the real verifiers over their explicit uniforms
(:func:`specviz.proof.exact.verifier_law`); closed forms from :mod:`specviz.proof.theory` and
:mod:`specviz.verifiers.processing` are checked against them. The statistical checks are prove's own
(level ``stats.ALPHA``, fixed seeds) with the correct verifier on the same scenario and seed as
the control that must pass.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as sps

from specviz.app.settings_demo import settings_report
from specviz.errors import InputError
from specviz.proof import engine_bugs, prove, report, scenarios, theory
from specviz.proof.bugs import BUGS
from specviz.proof.engine_bugs import FAULTS, verify_seeded, verify_seeded_first_request
from specviz.proof.exact import breakpoints, verifier_law
from specviz.proof.markov import Drafter, make_chain
from specviz.verifiers.processing import Settings, process_logits
from specviz.verifiers.verify import Uniforms, verify

NEW = ("q_unprocessed", "target_unprocessed", "shared_noise_stream", "late_rejection")
TOL = 1e-12


def home_tv(name: str, scenario: str) -> float:
    sc = scenarios.SCENARIOS[scenario]
    target, draft = scenarios.scenario_chains(sc)
    res = verifier_law(BUGS[name].verifier, target, Drafter(draft), L=sc.L, num_draft=sc.K, K=sc.K)
    assert res.unresolved < TOL
    return 0.5 * float(np.abs(res.law - target.joint_law(sc.L)).sum())


@pytest.mark.parametrize("name", NEW)
def test_exact_law_at_home_differs_by_the_printed_tv(name):
    (home,) = scenarios.HOME[name]
    tv = home_tv(name, home)
    assert tv > 0.05, tv  # well above what prove's joint test needs to see (stats.MIN_TV)
    printed = report.home_tvs(name)  # what `specviz list` prints
    assert f"{home}: {tv:.4f}" in printed, printed


@pytest.fixture(scope="module")
def control():
    res = prove.run_case("reference", n=100_000, seed=7)
    assert res.verdict == "pass", (res.joint, res.tokens)
    return res


@pytest.mark.parametrize("name", NEW)
def test_prove_catches_each_at_home_and_the_correct_verifier_passes(control, name):
    for home in scenarios.HOME[name]:
        res = prove.run_case(home, bug=BUGS[name], n=100_000, seed=7)
        assert res.verdict == "caught" and not res.joint.passed, (home, res.joint)


def test_unprocess_recovers_the_raw_softmax_exactly():
    rng = np.random.default_rng(3)
    z = rng.normal(size=(5, 7)) * 2
    z[0, 2] = -np.inf  # a banned token stays banned
    raw = process_logits(z)
    for T in (0.3, 0.5, 2.0):
        got = engine_bugs.unprocess(process_logits(z, Settings(temperature=T)), Settings(temperature=T))
        assert np.abs(got - raw).max() < 1e-12
    with pytest.raises(InputError, match="settings: expected a temperature > 0 without filters"):
        engine_bugs.unprocess(raw, Settings(top_p=0.9))


def test_one_position_laws_agree_with_the_settings_page():
    """The bugs' laws are the settings page's pipelines when the logits are processed as the bugs assume."""
    zt, zd = np.array([2.0, 1.5, 0.5, 0.0, -1.0]), np.array([0.2, 1.2, 0.9, -0.4, 0.1])
    rep = settings_report(zt, zd, engine_bugs.REQUEST, engine_bugs.DRAFTER)
    by = {pl.name: pl for pl in rep.pipelines}
    assert abs(theory.position_law(rep.p, rep.q, "q_unprocessed") - by["q_unprocessed"].law).max() < 1e-12
    assert abs(theory.position_law(rep.p, rep.q, "target_unprocessed") - by["target_unprocessed"].law).max() < 1e-12
    assert by["q_unprocessed"].tv_plain > 0.01 and by["target_unprocessed"].tv_plain > 0.01


def test_shared_noise_stream_as_the_real_shared_stream():
    """The fault itself: x = inverse CDF of u, and the same u handed to verify as uniforms.accept.

    With one draft the output is piecewise constant in u between the thresholds F(x) and p(x)/q(x)
    (the replacement has its own uniform, whose law is the residual's): summing the pieces gives the
    exact law, which must equal the closed form and the enumerated law of the bug's verifier.
    """
    p, q = np.array([0.1, 0.45, 0.05, 0.4]), np.array([0.3, 0.2, 0.35, 0.15])
    V = 4
    F = np.cumsum(q)
    cuts = np.unique(np.concatenate([[0.0, 1.0], F[:-1], (p / q)[p < q]]))
    mid, width = (cuts[:-1] + cuts[1:]) / 2, np.diff(cuts)
    n = mid.size
    x = np.searchsorted(F, mid, side="right")  # (n,) the drafter's inverse CDF of u
    res = verify(np.broadcast_to(p, (n, 2, V)), np.broadcast_to(q, (n, 1, V)), x[:, None], np.ones(n, np.int64),
                 uniforms=Uniforms(mid[:, None], np.full(n, 0.5)))  # fmt: skip
    accepted = np.asarray(res.num_accepted) == 1
    law = np.bincount(x[accepted], weights=width[accepted], minlength=V)
    law = law + (1 - law.sum()) * theory.decompose(p, q).residual
    assert abs(law - theory.position_law(p, q, "shared_noise_stream")).max() < TOL
    target, draft = make_chain(np.tile(p, (V + 1, 1))), make_chain(np.tile(q, (V + 1, 1)))
    enum = verifier_law(BUGS["shared_noise_stream"].verifier, target, Drafter(draft), L=1, num_draft=1).law
    assert abs(enum - law).max() < 1e-9
    assert theory.total_variation(law, p) > 0.05  # and the correct rule's law is p (control)
    assert abs(verifier_law(verify, target, Drafter(draft), L=1, num_draft=1).law - p).max() < TOL


# --- inclusive_coin: only a coin of exactly 0 shows it ------------------------------------------------


def _zero_coin_case():
    p = np.array([0.0, 0.5, 0.5])  # token 0 is ruled out by the target (top-k, say)
    q = np.array([0.6, 0.2, 0.2])
    return p[None, None].repeat(2, 1), q[None, None], np.array([[0]]), np.array([1])


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_inclusive_coin_accepts_a_banned_token_on_a_zero_coin(kind):
    P, Q, x, j = _zero_coin_case()
    u = Uniforms(np.array([[0.0]]), np.array([0.5]))
    args = (P, Q, x, j)
    if kind == "torch":
        torch = pytest.importorskip("torch")
        args = tuple(torch.tensor(a) for a in args)
        u = Uniforms(torch.tensor(u.accept), torch.tensor(u.sample))
    bad = FAULTS["inclusive_coin"].verifier(*args, uniforms=u)
    good = verify(*args, uniforms=u)
    assert int(bad.num_accepted[0]) == 1 and int(bad.tokens[0, 0]) == 0  # p(0) = 0, emitted anyway
    assert int(good.num_accepted[0]) == 0 and int(good.tokens[0, 0]) != 0  # the control: rejected
    # Any coin above 0 and the two agree.
    u2 = Uniforms(u.accept + 1e-300, u.sample)
    assert int(FAULTS["inclusive_coin"].verifier(*args, uniforms=u2).num_accepted[0]) == 0


def test_inclusive_coin_law_is_exact_with_continuous_uniforms():
    sc = scenarios.SCENARIOS["zeros"]  # zeros in both supports: drafts with p(x) = 0 are proposed
    target, draft = scenarios.scenario_chains(sc)
    res = verifier_law(FAULTS["inclusive_coin"].verifier, target, Drafter(draft), L=sc.L, num_draft=sc.K)
    assert res.unresolved < TOL
    assert np.abs(res.law - target.joint_law(sc.L)).max() < TOL
    assert not FAULTS["inclusive_coin"].changes_law
    assert "reference: 0.0000" in report.fault_tv("inclusive_coin")


def test_numpy_uniforms_are_multiples_of_2_to_the_minus_53():
    """The explanation's premise: Generator.random returns k * 2^-53 (k = 0 included), so 0 is possible."""
    u = np.random.default_rng(0).random(100_000)
    k = u * 2.0**53
    assert (k == np.floor(k)).all() and (u >= 0).all() and (u < 1).all()
    assert 2**24 == 16_777_216  # the float32 figure the text states


# --- nan_row: refuse, never emit token id V ----------------------------------------------------------


def _nan_batch():
    rng = np.random.default_rng(4)
    B, K, V = 3, 2, 5
    P = rng.dirichlet(np.ones(V), (B, K + 1))
    Q = rng.dirichlet(np.ones(V), (B, K))
    P[1] = np.nan  # softmax of a row of all -inf
    x = rng.integers(0, V, (B, K))
    return P, Q, x, np.full(B, K), V


def _verifiers():
    out = {
        "verify": verify,
        **{n: b.verifier for n, b in BUGS.items()},
        "inclusive_coin": FAULTS["inclusive_coin"].verifier,
    }
    return out


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("validate", [True, False])
def test_a_nan_target_row_is_refused_or_defined_never_token_v(kind, validate):
    P, Q, x, j, V = _nan_batch()
    coins = list(itertools.product([0.0, 0.3, 0.999], repeat=2))
    for name, fn in _verifiers().items():
        for c in coins:
            u = Uniforms(np.tile(c, (3, 1)), np.full(3, 0.5))
            args = (P, Q, x, j)
            if kind == "torch":
                torch = pytest.importorskip("torch")
                args = tuple(torch.tensor(a) for a in args)
                u = Uniforms(torch.tensor(u.accept), torch.tensor(u.sample))
            try:
                res = fn(*args, uniforms=u, validate=validate)
            except InputError:
                continue
            # FAULTS["nan_row"]: every verifier raises but unclamped_residual without validation ...
            assert name == "unclamped_residual" and not validate, (name, c)
            toks, num = np.asarray(res.tokens), np.asarray(res.num_tokens)
            emitted = toks[np.arange(toks.shape[1])[None, :] < num[:, None]]
            assert ((emitted >= 0) & (emitted < V)).all(), (name, c, toks)
            assert int(toks[1, num[1] - 1]) == V - 1  # ... which falls through to its last token


def test_correct_verifier_refuses_the_nan_row_and_processing_refuses_all_minus_inf():
    P, Q, x, j, _ = _nan_batch()
    for validate in (True, False):
        with pytest.raises(InputError, match="target_probs"):
            verify(P, Q, x, j, uniforms=Uniforms(np.full((3, 2), 0.5), np.full(3, 0.5)), validate=validate)
    with pytest.raises(InputError, match="a row of all -inf"):
        process_logits(np.array([[0.0, 1.0], [-np.inf, -np.inf]]))


# --- seed_of_first_request --------------------------------------------------------------------------


def _request(V: int = 8, K: int = 2):
    rng = np.random.default_rng(5)
    p = rng.dirichlet(np.ones(V), K + 1)[None]  # (1, K+1, V)
    q = rng.dirichlet(np.ones(V), K)[None]
    x = rng.integers(0, V, (1, K))
    return p, q, x, np.array([K])


def test_per_request_seeds_alone_and_batched():
    p, q, x, j = _request()
    both = tuple(np.concatenate([a, a]) for a in (p, q, x, j))  # the same request twice, two seeds
    trials, same_ok, same_bad, moved_bad = 300, 0, 0, 0
    for s in range(trials):
        s_a, s_b = 2 * s + 1, 2 * s + 2
        alone_a = verify_seeded(p, q, x, j, seeds=[s_a]).tokens[0]
        alone_b = verify_seeded(p, q, x, j, seeds=[s_b]).tokens[0]
        ok = verify_seeded(*both, seeds=[s_a, s_b]).tokens
        assert (ok[0] == alone_a).all() and (ok[1] == alone_b).all()  # alone == batched, every time
        bad = verify_seeded_first_request(*both, seeds=[s_a, s_b]).tokens
        assert (bad[0] == alone_a).all()  # the first request is unharmed
        same_ok += bool((ok[0] == ok[1]).all())
        same_bad += bool((bad[0] == bad[1]).all())
        moved_bad += bool((bad[1] != alone_b).any())
    # Buggy: the two requests are identical in every trial, and the second differs from itself alone.
    assert same_bad == trials and moved_bad > 0
    # Correct: the rows are independent, identical only when two independent draws collide, with
    # probability c = sum P(out)^2 over the outputs of one verification (computed exactly below).
    # Critical value: identical in >= 150 of 300 trials has probability below 1e-9 under Binomial(300, c).
    c = collision_probability(p, q, x)
    assert c < 0.25 and sps.binom.sf(149, trials, c) < 1e-9, c
    assert same_ok < 150, same_ok


def collision_probability(p, q, x) -> float:
    """sum over outputs of P(output)^2 for one verification of fixed drafts, exactly: the output is
    constant on the boxes the listed thresholds (:func:`specviz.proof.exact.breakpoints`) cut in the
    two coins and the draw uniform."""
    K, V = x.shape[1], p.shape[2]
    edges = np.unique(np.concatenate([[0.0, 1.0], breakpoints(p[0], q[0], x[0])]))
    mid, width = (edges[:-1] + edges[1:]) / 2, np.diff(edges)
    idx = np.array(list(itertools.product(range(mid.size), repeat=K + 1)))
    u, vol = mid[idx], np.prod(width[idx], axis=1)
    n = vol.size
    res = verify(np.broadcast_to(p, (n, K + 1, V)), np.broadcast_to(q, (n, K, V)), np.broadcast_to(x, (n, K)),
                 np.full(n, K), uniforms=Uniforms(u[:, :K], u[:, K]))  # fmt: skip
    _, inv = np.unique(np.asarray(res.tokens), axis=0, return_inverse=True)
    mass = np.bincount(inv.ravel(), weights=vol)
    assert abs(mass.sum() - 1) < 1e-9
    return float((mass**2).sum())


def test_seeded_helpers_check_their_seeds():
    p, q, x, j = _request()
    with pytest.raises(InputError, match=r"seeds: expected shape \(B,\) = \(1,\)"):
        verify_seeded(p, q, x, j, seeds=[1, 2])
    with pytest.raises(InputError, match="seeds: expected shape"):
        verify_seeded(p, q, x, j, seeds=[-1])


def test_fault_entries_are_documented():
    for name in ("inclusive_coin", "nan_row", "seed_of_first_request"):
        f = FAULTS[name]
        assert f.explanation and f.caught_by and not f.changes_law and name not in BUGS
        assert "test_engine_bugs.py" in f.caught_by


@pytest.mark.parametrize("kernels", ["numpy_views", "torch"])
@pytest.mark.parametrize("name", NEW)
def test_new_bugs_give_the_same_tokens_on_numpy_and_torch(name, kernels, monkeypatch):
    """Same explicit uniforms, same outputs, every field to the bit (float32 and float64 tables): torch CPU
    tensors (NumPy views, or the torch kernels forced)."""
    torch = pytest.importorskip("torch")
    if kernels == "torch":
        monkeypatch.setenv("SPECVIZ_BACKEND", "torch")  # specviz.verifiers._fused.backend
    rng = np.random.default_rng(8)
    B, K, V = 64, 3, 7
    P, Q = rng.dirichlet(np.ones(V), (B, K + 1)), rng.dirichlet(np.ones(V), (B, K))
    x, j = rng.integers(0, V, (B, K)), rng.integers(0, K + 1, B)
    u = Uniforms(rng.random((B, K)), rng.random(B))
    fn = BUGS[name].verifier
    for dtype in (np.float64, np.float32):
        p, qq = P.astype(dtype), Q.astype(dtype)
        qq /= qq.sum(-1, keepdims=True)
        p /= p.sum(-1, keepdims=True)
        for q in (qq, None):
            a = fn(p, q, x, j, uniforms=u)
            t = fn(torch.tensor(p), None if q is None else torch.tensor(q), torch.tensor(x), torch.tensor(j),
                   uniforms=Uniforms(torch.tensor(u.accept), torch.tensor(u.sample)))  # fmt: skip
            for field, ours, theirs in zip(a._fields, a, t, strict=True):
                np.testing.assert_array_equal(np.asarray(theirs), ours, err_msg=f"{name} {field} {dtype.__name__}")


def test_the_real_shared_stream_end_to_end_follows_the_wrappers_exact_law():
    """Rounds over prove's reference chains where each draft's inverse-CDF uniform is handed to verify
    as its acceptance coin (the fault itself, not the wrapper): the joint law of 3 tokens passes the
    chi-square against the wrapper's exact law (level stats.ALPHA, fixed seed) and fails against the
    target's (the negative control)."""
    from specviz.proof import stats
    from specviz.proof.markov import START
    from specviz.proof.simulate import build_round

    sc = scenarios.SCENARIOS["reference"]
    target, dchain = scenarios.scenario_chains(sc)
    icdf = dchain.inverse_cdf()
    n, L, K = 60_000, sc.L, sc.K
    rng = np.random.default_rng(11)
    out = np.full((n, L + K + 1), -1, dtype=np.int64)
    length = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    while active.size:
        A = active.size
        ctx = np.where(length[active] > 0, out[active, np.maximum(length[active] - 1, 0)], START)
        u = rng.random((A, K))  # the drafter's uniforms
        drafts, code = np.empty((A, K), dtype=np.int64), ctx + 1
        for i in range(K):
            drafts[:, i] = icdf.draw(code, u[:, i])
            code = drafts[:, i] + 1
        rnd = build_round(target, Drafter(dchain), ctx, drafts, np.full(A, K))
        res = verify(rnd.target_probs, rnd.draft_probs, rnd.draft_tokens, rnd.num_draft,
                     uniforms=Uniforms(u, rng.random(A)))  # fmt: skip
        num = np.asarray(res.num_tokens)
        for t in range(K + 1):
            rows = active[num > t]
            out[rows, length[rows] + t] = np.asarray(res.tokens)[num > t, t]
        length[active] += num
        active = active[length[active] < L]
    observed = stats.counts(out[:, :L], sc.V, L)
    law = report.exact_bug_law("reference", "shared_noise_stream")
    fit = stats.chi_square(observed, law, alpha=stats.ALPHA)
    assert fit.passed, fit
    control = stats.chi_square(observed, target.joint_law(L).ravel(), alpha=stats.ALPHA)
    assert not control.passed, control
