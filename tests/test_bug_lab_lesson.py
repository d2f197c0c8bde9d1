"""specviz.app.bug_lab: the Bug lab's sentences, computed without Streamlit (the page only lays them out)."""

from __future__ import annotations

import pytest

from specviz import InputError
from specviz.app import bug_lab as bl
from specviz.proof import stats
from specviz.proof.bugs import BUGS
from specviz.proof.scenarios import HOME, SCENARIOS


def test_each_bug_starts_in_its_home_scenario():
    assert bl.home_scenario(bl.NONE) == "reference"
    for bug in BUGS:
        assert bl.home_scenario(bug) in SCENARIOS
        assert bl.home_scenario(bug) == HOME.get(bug, ("reference",))[0]


def test_a_prediction_travels_with_the_link_and_back():
    for prediction in bl.PREDICTIONS:
        assert bl.prediction_from_link(bl.link_word(prediction)) == prediction
    assert bl.link_word(None) is None and bl.prediction_from_link("none") is None


@pytest.mark.parametrize(
    "prediction, word, right",
    [
        ("the test will fail", "fail", True),
        ("the test will pass", "fail", False),
        ("the test will pass", "pass", True),
        ("the test will pass", "missed", True),  # a missed bug passed the test
        ("the test will fail", "missed", False),
    ],
)
def test_a_prediction_is_judged_against_what_the_test_did(prediction, word, right):
    judged = bl.judge_prediction(prediction, word, presenting=False)
    assert judged.judged and ("You were right." in judged.text) == right
    assert ("read the explanation above" in judged.text) == (not right)
    assert "below" in bl.judge_prediction(prediction, word, presenting=True).text or right


def test_no_prediction_and_an_inconclusive_verdict_judge_nothing():
    assert not bl.judge_prediction("the test will pass", "inconclusive", False).judged
    assert "not judged" in bl.judge_prediction("the test will pass", "inconclusive", False).text
    assert "did not predict" in bl.judge_prediction(None, "fail", False).text
    with pytest.raises(InputError, match="prediction"):
        bl.judge_prediction("maybe", "fail", False)


def test_the_tokens_caption_gives_z_only_when_the_test_speaks():
    def mean_test(rounds: int, conclusive: bool) -> stats.MeanTest:
        return stats.MeanTest(2.6, 2.5, 0.01, 10.0, rounds, 0.01, 0.02, 0.9, False, conclusive)

    spoke = bl.tokens_caption(mean_test(10_000, True), 0.01)
    assert "says fail (|z| = 10.00 against" in spoke
    silent = bl.tokens_caption(mean_test(3, False), 0.01)
    assert "says inconclusive." in silent and "|z|" not in silent
