"""The interview's later questions on the page: each reveal's live widget follows its controls.

The computed answers themselves are pinned in tests/test_interview.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from apptest import link, metric, open_page, rerun

from specviz.app import interview as iv
from specviz.app import interview_topics as topics
from specviz.proof import theory
from specviz.verifiers.processing import Settings, process_logits

INTERVIEW = "app_pages/interview.py"
KEYS = [q.key for q in iv.questions()]
NEW = ("first_rejection", "kv_rollback", "trees", "block", "settings", "unclamped", "ragged")


def answered(key: str, right: bool = True):
    """The page at question ``key`` with its answer committed (right, or another choice)."""
    q = next(x for x in iv.questions() if x.key == key)
    given = q.answer if right else (q.answer + 1 if q.kind == "number" else next(c for c in q.choices if c != q.answer))
    return open_page(INTERVIEW, {"step": str(KEYS.index(key)), "ans": iv.encode_answers({key: given})})


def test_every_new_topic_has_a_question_a_widget_and_a_cheat_sheet_line():
    qs = {q.key: q for q in iv.questions()}
    sheet = iv.cheat_sheet()
    for key in NEW:
        assert key in qs
        assert f"**{qs[key].title}.** {qs[key].reveal}" in sheet
    # Old links stay valid: the new questions come after the old ones.
    assert KEYS[: KEYS.index("typical") + 1] == [k for k in KEYS if k not in NEW]


@pytest.mark.parametrize("key", NEW)
def test_reveal_says_right_or_wrong_and_shows_the_widget(key):
    at = answered(key)
    assert at.success and f"{KEYS.index(key) + 1}. " in at.subheader[0].value
    assert at.metric, key  # the live widget is there
    wrong = answered(key, right=False)
    assert "Not quite" in wrong.error[0].value


def test_first_rejection_widget_follows_k():
    at = answered("first_rejection")
    label = "TV from p when passing drafts after a rejection count"
    assert metric(at, label) == f"{topics.count_after_rejection_tv(3):.4f}"
    at.slider(key="interview.Kr").set_value(1)
    rerun(at)
    assert metric(at, label) == "0.0000" and link(at)["Kr"] == "1"


def test_kv_widget_follows_its_sliders_and_keeps_j_at_most_k():
    at = answered("kv_rollback")
    assert metric(at, "pages freed") == "1"
    at.slider(key="interview.j").set_value(0)
    at.slider(key="interview.pg").set_value(4)
    rerun(at)
    r = topics.kv_rollback(60, 8, 0, 4)
    assert metric(at, "pages freed") == f"{r.pages_freed}" and r.pages_freed == 2
    at.slider(key="interview.j").set_value(8)
    rerun(at)
    at.slider(key="interview.Kv").set_value(3)  # j = 8 no longer fits: it follows K down
    rerun(at)
    assert at.slider(key="interview.j").value == 3
    assert metric(at, "the drafter feeds next round") == "2 token(s)"


def test_trees_widget_follows_k_and_depth():
    at = answered("trees")
    at.slider(key="interview.k").set_value(3)
    at.slider(key="interview.d").set_value(2)
    rerun(at)
    sh = topics.tree_shapes(3, 2)
    assert metric(at, "full 3-ary tree: drafts kept") == f"{sh.kary:.4f}"
    assert metric(at, "3 chains from the root: drafts kept") == f"{sh.chains:.4f}"


def test_block_settings_unclamped_and_ragged_widgets():
    at = answered("block")
    assert metric(at, "block verification: drafts kept per step") == f"{11 / 9:.4f}"
    at = answered("settings")
    at.slider(key="interview.T").set_value(1.0)
    at.slider(key="interview.tp").set_value(1.0)
    rerun(at)
    assert metric(at, "TV(raw p, processed p): what the raw target gets wrong") == "0.0000"
    at.slider(key="interview.T").set_value(0.5)
    rerun(at)
    p = np.asarray(process_logits(np.log(np.array(iv.REFERENCE_P)), Settings(temperature=0.5)))
    assert metric(at, "TV(raw p, processed p): what the raw target gets wrong") == (
        f"{theory.total_variation(iv.REFERENCE_P, p):.4f}")  # fmt: skip
    at = answered("unclamped")
    assert float(metric(at, "TV from p, unclamped residual (K = 1)")) == pytest.approx(topics.unclamped().tv, abs=1e-4)
    at.selectbox(key="interview.up").set_value(theory_preset := at.selectbox(key="interview.up").options[0])
    rerun(at)
    assert link(at)["up"] == theory_preset
    at = answered("ragged")
    at.slider(key="interview.nd").set_value(1)
    rerun(at)
    assert metric(at, "bonus from specviz.verify (token = row)") == "1"
    assert metric(at, "bonus from wrong_bonus_row") == f"{iv.RAGGED_EXAMPLE[1]}"
