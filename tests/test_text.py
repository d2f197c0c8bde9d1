"""Real text: the n-gram models are proper and smoothed, and speculative sampling on them is exact."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from specviz import stats, text
from specviz.bugs import BUGS
from specviz.errors import InputError
from specviz.processing import Settings


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
