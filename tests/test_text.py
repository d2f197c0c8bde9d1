"""Real text: the n-gram models are proper and smoothed, and speculative sampling on them is exact."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from specviz.app import text
from specviz.errors import InputError
from specviz.proof import stats
from specviz.proof.bugs import BUGS
from specviz.verifiers.processing import Settings

pytestmark = pytest.mark.heavy  # the n-gram models trained and run: left out of the quick subset


def witten_bell(corpus: str, order: int, history: str, V: int) -> np.ndarray:
    """Plain dictionary reference: interpolated Witten-Bell down to uniform, one history."""
    ids = text.encode(corpus).tolist()
    hist = text.encode(history).tolist()
    P = np.full(V, 1.0 / V)
    for n in range(1, order + 1):
        k = n - 1
        if k > len(hist):
            break
        h = tuple(hist[len(hist) - k :]) if k else ()
        follow = Counter(tuple(ids[i : i + n])[-1] for i in range(len(ids) - n + 1) if tuple(ids[i : i + k]) == h)
        c, T = sum(follow.values()), len(follow)
        if c + T == 0:
            continue
        C = np.zeros(V)
        for w, m in follow.items():
            C[w] = m
        P = (C + T * P) / (c + T)
    return P


def test_ngram_matches_a_plain_dictionary_reference():
    corpus = "the cat sat on the mat; the hat is flat.\nthat cat ate."
    model = text.NGram(text.encode(corpus), 4)
    V = len(text.ALPHABET)
    for history in ["", "t", "th", "the", "the c", "xyz", "at.", "\nth", "q the"]:
        got = model.probs([text.encode(history).tolist()])[0]
        np.testing.assert_allclose(got, witten_bell(corpus, 4, history, V), rtol=1e-12, atol=0)


def test_trained_models_are_distributions_without_zeros_and_deterministic():
    pair = text.trained_pair()
    rng = np.random.default_rng(5)
    ids = text.encode(text.corpus())
    starts = rng.integers(0, ids.size - 10, 200)
    hist = [[]] + [ids[s : s + rng.integers(0, 8)].tolist() for s in starts] + [[0] * 6]
    for model in pair:
        P = model.probs(hist)
        np.testing.assert_allclose(P.sum(1), 1, atol=1e-12)
        assert (P > 0).all()  # smoothing leaves no zero anywhere the drafter could propose
        assert np.isfinite(model(hist)).all()
    again = text.NGram(ids, text.TARGET_ORDER)
    np.testing.assert_array_equal(again.probs(hist), pair.target.probs(hist))
    assert text.decode(text.encode("Hi\n\té")) == "Hi\n??"


def test_acceptance_rate_on_the_corpus_is_about_the_stated_0_6():
    """The module docstring says about 0.6: the mean of sum min(p, q) over 2,000 corpus contexts."""
    pair = text.trained_pair()
    ids = text.encode(text.corpus())
    starts = np.random.default_rng(11).integers(8, ids.size - 1, 2000)
    hist = [ids[s - 8 : s].tolist() for s in starts]
    a = np.minimum(pair.target.probs(hist), pair.drafter.probs(hist)).sum(1).mean()
    assert 0.55 < a < 0.65


def test_target_law_is_the_product_of_conditionals():
    pair = text.trained_pair()
    prompt = text.encode("The ").tolist()
    law = text.target_law(pair.target, prompt, 2, Settings(temperature=0.7))
    assert law.shape == (len(text.ALPHABET),) * 2 and abs(law.sum() - 1) < 1e-12
    p1 = text.process_logits(pair.target([prompt]), Settings(temperature=0.7))[0]
    a = int(text.encode("a")[0])
    p2 = text.process_logits(pair.target([prompt + [a]]), Settings(temperature=0.7))[0]
    np.testing.assert_allclose(law[a], p1[a] * p2, rtol=1e-12)
    with pytest.raises(InputError, match="^L"):
        text.target_law(pair.target, prompt, 4, Settings())


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_speculative_text_follows_the_target_and_a_bug_does_not(temperature):
    """Joint chi-square of the next 2 characters after a prompt, 20,000 sequences, seed 3,
    level 0.001 (critical value from scipy, about 292 on ~220 pooled cells); the negative
    control resample_from_p must fail the same test on the same seed."""
    pair = text.trained_pair()
    prompt = text.encode("The ").tolist()
    s = Settings(temperature=temperature)
    law = text.target_law(pair.target, prompt, 2, s)
    good = text.generate(pair.target, pair.drafter, prompt, n=20_000, L=2, K=3, settings=s,
                         rng=np.random.default_rng(3))  # fmt: skip
    res = stats.joint_test(good, law)
    assert res.passed and res.conclusive, res
    bad = text.generate(pair.target, pair.drafter, prompt, n=20_000, L=2, K=3, settings=s,
                        rng=np.random.default_rng(3), verifier=BUGS["resample_from_p"].verifier)  # fmt: skip
    assert not stats.joint_test(bad, law).passed


def test_one_step_reports_what_it_did():
    pair = text.trained_pair()
    st = text.step(pair.target, pair.drafter, text.encode("import ").tolist(), 4, Settings(), np.random.default_rng(0))
    assert len(st.drafts) == 4 and len(st.emitted) == st.accepted + 1
    assert st.emitted[: st.accepted] == st.drafts[: st.accepted]
    assert st.bonus == (st.accepted == 4)
    ratios = [min(1, p / q) for p, q in zip(st.p_draft, st.q_draft, strict=True)]
    assert st.expected_tokens == pytest.approx(1 + np.cumprod(ratios).sum())
    for i in range(st.accepted):
        assert st.coins[i] < ratios[i]
    if st.accepted < 4:
        assert st.coins[st.accepted] >= ratios[st.accepted] - 1e-15
    with pytest.raises(InputError, match="^K"):
        text.step(pair.target, pair.drafter, [], 0, Settings(), np.random.default_rng(0))


def test_a_model_that_breaks_the_protocol_is_named():
    pair = text.trained_pair()

    def short(histories):
        return np.zeros((len(histories), 3))

    with pytest.raises(InputError, match="^model"):
        text.generate(pair.target, short, [1], n=2, L=1, K=1, settings=Settings(), rng=np.random.default_rng(0))


# --- the page's transcript ---------------------------------------------------------------------


def test_transcript_is_reproduced_round_by_round_and_stops_where_asked():
    pair = text.trained_pair()
    prompt = text.encode("def ").tolist()
    s = Settings(temperature=0.8)
    five = text.transcript(pair.target, pair.drafter, prompt, 3, s, 9, rounds=5)
    six = text.transcript(pair.target, pair.drafter, prompt, 3, s, 9, rounds=6)
    # repr: exact floats, and the NaN coins of positions not reached compare equal
    assert len(five) == 5 and repr(six[:5]) == repr(five)  # one more round leaves the rounds before it alone
    other = text.transcript(pair.target, pair.drafter, prompt, 3, s, 10, rounds=5)
    assert [x.emitted for x in other] != [x.emitted for x in five]  # and the seed matters
    # Each round is text.step on the history so far with the round's own generator.
    history = list(prompt)
    for r, st in enumerate(five):
        assert repr(st) == repr(text.step(pair.target, pair.drafter, history, 3, s, text.round_rng(9, r)))
        history += st.emitted
    upto = text.transcript(pair.target, pair.drafter, prompt, 3, s, 9, until=40)
    lengths = np.cumsum([len(x.emitted) for x in upto])
    assert lengths[-1] >= 40 and (len(upto) == 1 or lengths[-2] < 40)
    measured, expected = text.tokens_per_call(upto)
    assert measured == lengths[-1] / len(upto)
    assert expected == pytest.approx(np.mean([x.expected_tokens for x in upto]), abs=1e-15)
    assert all(np.isnan(text.tokens_per_call([])))
    with pytest.raises(InputError, match="^rounds"):
        text.transcript(pair.target, pair.drafter, prompt, 3, s, 9)


def test_transcript_html_escapes_text_and_colours_each_token_by_its_fate():
    pair = text.trained_pair()
    prompt = text.encode('<script>alert("x")</script> & ').tolist()
    steps = text.transcript(pair.target, pair.drafter, prompt, 4, Settings(), 1, rounds=30)
    colors = {"accepted": "green", "rejected": "grey", "replaced": "orange", "bonus": "blue"}
    html = text.transcript_html(prompt, steps, colors)
    assert "<script>" not in html and "&lt;script&gt;" in html and "&amp;" in html
    assert html.count('class="sv-accepted"') == sum(x.accepted for x in steps)
    assert html.count('class="sv-bonus"') == sum(x.bonus for x in steps)
    assert html.count('class="sv-replaced"') == html.count('class="sv-rejected"') == sum(not x.bonus for x in steps)
    assert 0 < sum(x.bonus for x in steps) < len(steps)  # both kinds occur in this run, so the counts say something
    first = steps[0]
    assert f"p = {first.p_draft[0]:.4f}, q = {first.q_draft[0]:.4f}" in html


def test_text_bugs_and_cell_labels():
    names = text.text_bugs()
    assert "resample_from_p" in names
    assert "no_bonus" not in names  # lossless: nothing to drift
    assert "wrong_bonus_row" not in names  # needs ragged rows: every row here has K drafts
    assert "greedy_draft_sampled_q" not in names  # a drafter's mistake: generate drafts correctly
    labels = text.cell_labels(2)
    V = len(text.ALPHABET)
    assert len(labels) == V * V
    ids = text.encode("a b\n")
    cell = int(stats.counts(np.array([ids[:2]]), V, 2).argmax())  # base-V order, as the joint test counts
    assert labels[cell] == "a␣"
    assert labels[int(stats.counts(np.array([ids[2:]]), V, 2).argmax())] == "b↵"


def test_the_page_check_cap_reaches_the_stated_power_after_the_default_prompt():
    """text.MAX_CHECK_N's comment: 20,000 sequences are enough for the default prompt."""
    pair = text.trained_pair()
    law = text.target_law(pair.target, text.encode("The ").tolist(), 2, Settings())
    assert stats.needed_n(law) <= text.MAX_CHECK_N


def test_readme_names_the_model_orders_the_code_uses():

    import prose  # tests/ is on the path: README.md and docs/*.md

    readme = prose.text()
    names = {2: "bigram", 3: "trigram", 4: "4-gram", 5: "5-gram"}
    assert f"{names[text.TARGET_ORDER]} target and a {names[text.DRAFT_ORDER]} drafter" in " ".join(readme.split())


def test_transcript_html_without_rejected_drafts_reads_as_the_generated_text():
    import html as htmllib
    import re

    pair = text.trained_pair()
    prompt = text.encode("The <b> & ").tolist()
    steps = text.transcript(pair.target, pair.drafter, prompt, 4, Settings(), 1, rounds=30)
    colors = {"accepted": "green", "rejected": "grey", "replaced": "orange", "bonus": "blue"}
    assert sum(not x.bonus for x in steps) > 0  # rejections occur, so leaving them out is visible

    def shown(markup: str) -> str:
        return htmllib.unescape(re.sub(r"<[^>]*>", "", markup)).replace("↵", "")

    want = text.decode(prompt) + "".join(text.decode(x.emitted) for x in steps)
    quiet = text.transcript_html(prompt, steps, colors, show_rejected=False)
    assert 'class="sv-rejected"' not in quiet and shown(quiet) == want
    assert quiet.count('class="sv-replaced"') == sum(not x.bonus for x in steps)
    first = next(x for x in steps if not x.bonus)
    assert f"in place of {text.ALPHABET[first.drafts[first.accepted]]!r}" in htmllib.unescape(quiet)
    # Control: with the rejected drafts shown, the spans no longer read as the text.
    loud = text.transcript_html(prompt, steps, colors)
    assert shown(loud) != want and len(shown(loud)) == len(want) + sum(not x.bonus for x in steps)


def test_the_readme_code_for_your_own_models_runs_with_the_ngram_pair():
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "docs" / "models.md").read_text()
    section = readme[readme.index("## Your own models") :]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)[:1]
    pair = text.trained_pair()
    env = {"target": pair.target, "drafter": pair.drafter, "prompt_ids": text.encode("The ").tolist(),
           "V": len(text.ALPHABET)}  # fmt: skip
    exec(compile(code, "docs/models.md", "exec"), env)
    assert env["seqs"].shape == (1000, 8) and (env["seqs"] >= 0).all()
    assert abs(env["law"].sum() - 1) < 1e-12


def test_ngram_probs_of_a_batch_equal_one_call_per_history_to_the_bit():
    # probs computes each distinct context once (histories share them): rows must not depend on the batch.
    pair = text.trained_pair()
    rng = np.random.default_rng(3)
    V = len(text.ALPHABET)
    hist = [rng.integers(0, V, size=int(rng.integers(0, 8))).tolist() for _ in range(200)] + [[1, 2, 3]] * 40
    for model in pair:
        batch = model.probs(hist)
        assert np.array_equal(batch, np.vstack([model.probs([h]) for h in hist]))
        assert np.allclose(batch.sum(1), 1.0)
    # Control: the rows differ between contexts, so an equality of the batch with one shared row would fail.
    assert not np.array_equal(pair.target.probs(hist)[0], pair.target.probs(hist)[1])


def test_the_check_judges_the_correct_rule_and_a_bug_against_the_target_s_law():
    pair = text.trained_pair()
    s = Settings(temperature=1.0)
    honest = text.check(pair, "The ", 2, s, seed=3, n=text.MAX_CHECK_N)
    broken = text.check(pair, "The ", 2, s, seed=3, n=text.MAX_CHECK_N, verifier=BUGS["resample_from_p"].verifier)
    assert honest.counts.sum() == broken.counts.sum() == text.MAX_CHECK_N
    assert abs(honest.law.sum() - 1) < 1e-12 and honest.needed == stats.needed_n(honest.law)
    says, sentence = text.check_verdict(honest.joint, "the correct verifier", text.MAX_CHECK_N, honest.needed, True)
    assert says in ("pass", "inconclusive") and "the correct verifier" in sentence
    says, sentence = text.check_verdict(broken.joint, "the bug", text.MAX_CHECK_N, broken.needed, False)
    assert says == "fail" and "catches this bug" in sentence and says in text.CHECK_BOXES  # negative control


def test_round_rows_say_what_happened_to_each_draft():
    pair = text.trained_pair()
    steps = text.transcript(pair.target, pair.drafter, text.encode("The ").tolist(), 4, Settings(), 0, rounds=6)
    for st in steps:
        rows = text.round_rows(st)
        assert len(rows) == len(st.drafts)
        results = [r["result"] for r in rows]
        assert results[: st.accepted] == ["accepted"] * st.accepted
        assert results[st.accepted + 1 :] == ["not reached"] * len(results[st.accepted + 1 :])
        assert all((r["coin u"] is None) == (r["result"] == "not reached") for r in rows)
