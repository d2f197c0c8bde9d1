"""Issue 19 (classroom): claims that are computed, a flow that walks every page, links that restore results.

AppTest runs app.py; each assertion compares what a page prints with the fact computed here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from apptest import metric, open_page, rerun, shown_table, texts

from specviz.app import flow, links, position, presenter, results
from specviz.proof import prove, theory
from specviz.proof.bugs import BUGS

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sidebar() -> list[tuple[str, str, str, str]]:
    """(file, url_path, title, icon) of every page app.py's st.navigation registered, in the sidebar's order."""
    at = open_page(None)
    return [
        (str(Path(i["script_path"]).relative_to(ROOT)), i["url_pathname"], i["page_name"], i["icon"])
        for i in at._registered_pages.values()  # AppTest's record of the navigation, in registration order
    ]


# --- flow ------------------------------------------------------------------------------------------


def test_the_sidebar_lists_the_page_table_in_class_order(sidebar):
    assert sidebar == [(p.file, p.url_path, p.title, p.icon) for p in flow.LESSONS]
    assert all((ROOT / p.file).is_file() for p in flow.LESSONS)
    assert len({p.url_path for p in flow.LESSONS}) == len({p.file for p in flow.LESSONS}) == len(flow.LESSONS)
    assert flow.LESSONS[0].url_path == ""  # Home first, then the lessons a class meets first (issue 29.3)
    assert [p.title for p in flow.LESSONS[1:3]] == ["One round, step by step", "Why it is exact"]
    assert flow.next_lesson(flow.LESSONS[-1].url_path) == flow.LESSONS[0]
    assert flow.next_lesson("no-such-page") is None


def test_home_names_every_page_with_what_it_teaches():
    at = open_page(None)
    linked = [link.proto.page for link in at.get("page_link")]
    for lesson in flow.LESSONS[1:]:
        assert lesson.url_path in linked, lesson
        assert lesson.teaches in texts(at.caption)
    assert linked[: len(flow.LESSONS) - 1] == [p.url_path for p in flow.LESSONS[1:]]  # in the table's order


@pytest.mark.parametrize("lesson", flow.LESSONS, ids=lambda lesson: lesson.url_path or "home")
def test_every_page_ends_with_a_link_to_the_next_lesson(lesson):
    at = open_page(None if lesson.url_path == "" else lesson.file)
    index = [p.url_path for p in flow.LESSONS].index(lesson.url_path)
    following = flow.LESSONS[(index + 1) % len(flow.LESSONS)]  # the next row of the table; Home after the last
    last = at.get("page_link")[-1].proto
    assert (last.label, last.page) == (f"Next: {following.title}", following.url_path)


# --- the residual caption ---------------------------------------------------------------------------


def test_the_residual_is_p_exactly_when_q_is_a_scaled_copy_of_p_on_its_support():
    same = position.residual_is_target([0.5, 0.5, 0.0], [0.25, 0.25, 0.5])  # the example
    assert same.equal and same.scaled and same.acceptance_rate == pytest.approx(0.5)
    d = theory.decompose([0.5, 0.5, 0.0], [0.25, 0.25, 0.5])
    assert np.abs(d.residual - [0.5, 0.5, 0.0]).max() < 1e-15 and d.acceptance_rate < 1  # reachable: a = 0.5
    rng = np.random.default_rng(19)
    seen = {True: 0, False: 0}
    for _ in range(300):  # random pairs (never scaled) and built ones (q = a p on supp p, the rest off it)
        V = int(rng.integers(2, 7))
        p = rng.dirichlet(np.ones(V))
        if rng.random() < 0.5:
            off = rng.random(V) < 0.4
            off[0] = False
            if off.all() or not off.any():
                off[-1] = True
            p[off] = 0
            p /= p.sum()
            a = float(rng.uniform(0.05, 0.95))
            rest = np.where(off, rng.random(V), 0.0)
            q = a * p + (1 - a) * rest / rest.sum()
        else:
            q = rng.dirichlet(np.ones(V))
        r = position.residual_is_target(p, q)
        assert r.equal == r.scaled, (p, q)
        seen[r.equal] += 1
    assert seen[True] > 50 and seen[False] > 50  # both sides of the condition were exercised


def test_the_exact_page_says_whether_the_residual_is_p():
    at = open_page("app_pages/exact.py", {"p": "0.5,0.5,0", "q": "0.25,0.25,0.5"})
    assert "q = a·p wherever p > 0" in texts(at.caption) and "Here it is p." in texts(at.caption)
    assert "only in the unreachable case" not in texts(at.caption)
    at = open_page("app_pages/exact.py")  # the textbook preset: q uniform is no scaled copy of p
    assert "Here it is not p." in texts(at.caption)


# --- Bug lab: verdicts, the one-click rerun, links ---------------------------------------------------


def test_bug_lab_a_rejection_at_small_n_is_caught_in_a_red_box_with_a_monte_carlo_p_value():
    at = open_page("app_pages/bug_lab.py", {"bug": "shared_uniform", "scenario": "reference", "n": "300"})
    at.button(key="buglab.run").click().run()
    v = results.case_verdict(prove.run_case("reference", n=300, seed=0, bug=BUGS["shared_uniform"]), "shared_uniform")
    assert v.word == "caught" and v.joint_p.method == "Monte Carlo"
    assert "Verdict: caught: the test fails on shared_uniform" in texts(at.error)
    assert "Verdict" not in texts(at.success) and "inconclusive" not in texts(at.warning)
    assert metric(at, "p-value (Monte Carlo)") == results.p_text(v.joint_p) == "≤ 0.0001"
    assert metric(at, "joint test") == "fail"


def test_bug_lab_never_prints_a_p_value_of_zero():
    at = open_page("app_pages/bug_lab.py", {"bug": "resample_from_p", "n": "100000"})
    at.button(key="buglab.run").click().run()
    shown = metric(at, "p-value")
    assert shown != "0" and "e-" in shown


def test_bug_lab_link_restores_the_prediction_and_the_verdict_waits_for_run():
    query = {"bug": "resample_from_p", "scenario": "reference", "n": "20000", "seed": "3", "predict": "fail"}
    at = open_page("app_pages/bug_lab.py", query)  # no click: a shared link must not answer the prediction
    assert not any("Verdict" in str(e.value) for kind in ("error", "success", "warning") for e in getattr(at, kind))
    assert at.radio(key="buglab.prediction").value == "the test will fail"
    at.button(key="buglab.run").click().run()
    assert "Verdict: caught" in texts(at.error)
    assert "You predicted *the test will fail*; it failed. You were right." in texts(at.markdown)
    assert at.query_params["predict"] == ["fail"] or at.query_params["predict"] == "fail"


def test_bug_lab_a_page_opened_without_a_link_waits_for_the_click():
    at = open_page("app_pages/bug_lab.py")
    assert "click **Run the test**" in texts(at.info) and not any("Verdict" in e.value for e in at.error)


@pytest.mark.parametrize("present, where", [(False, "above"), (True, "below")])
def test_bug_lab_points_at_the_explanation_where_it_is(present, where):
    at = open_page("app_pages/bug_lab.py", {"bug": "resample_from_p", "n": "20000", "predict": "pass"})
    at.session_state[links.PRESENT_KEY] = present  # the sidebar toggle
    at.button(key="buglab.run").click()
    at = rerun(at)
    assert presenter.presenting(at.session_state) == present
    assert f"You were wrong: read the explanation {where}." in texts(at.markdown)


# --- Batch: a link restores the result ----------------------------------------------------------------


def test_batch_link_restores_the_result_within_its_caps():
    at = open_page("app_pages/batch.py", {"B": "8", "K": "3", "seed": "5"})  # no click
    assert metric(at, "rows verified") == "8"
    assert "click **Run batch**" not in texts(at.info)
    plain = open_page("app_pages/batch.py")  # opened from the menu: waits for the click
    assert "click **Run batch**" in texts(plain.info)


# --- Medusa's fallback, one way ----------------------------------------------------------------------


def test_medusa_fallback_is_described_as_the_code_does_it():
    """The Verifiers page's Medusa rule falls back to the target's argmax; the interview's, to a sample from p."""
    from functools import partial

    from specviz.app import interview
    from specviz.proof import court
    from specviz.verifiers import lossy

    p, q = np.array([0.5, 0.3, 0.15, 0.05]), np.full(4, 0.25)
    pb = court.pair_problem(p, q, 1, L=1)
    medusa = court.judge("typical acceptance (Medusa)", pb).law  # the rule the Verifiers page names
    eps, delta = lossy.TYPICAL_EPSILON, lossy.TYPICAL_DELTA
    h = -float(np.sum(p * np.log(p)))
    kept = p > min(eps, delta * np.exp(-h))
    argmax_law = q * kept + (1 - q[kept].sum()) * np.eye(4)[np.argmax(p)]
    assert np.abs(medusa - argmax_law).max() < 1e-12
    sampled_law = q * kept + (1 - q[kept].sum()) * p
    assert np.abs(medusa - sampled_law).max() > 0.01  # the two fallbacks differ here: the words matter
    e2, d2 = interview.TYPICAL_EXAMPLE
    from_p = court.judge(partial(lossy.verify_typical, epsilon=e2, delta=d2, fallback="target"), pb).law
    assert np.abs(interview.typical_acceptance_law(p, q, e2, d2) - from_p).max() < 1e-12
    question = next(x for x in interview.questions() if x.key == "typical")
    assert "sample from p here" in question.prompt and "argmax" in question.prompt
    # Issue 29: "Medusa's threshold" named (0.3, 0.6); Medusa's defaults are the ones lossy.py and the Verifiers use
    assert (e2, d2) == (lossy.TYPICAL_EPSILON, lossy.TYPICAL_DELTA) == (0.09, 0.3)
    assert f"min({e2:g}, {d2:g}" in question.prompt


# --- trees: one name per shape, each drawn ------------------------------------------------------------


def test_tree_shapes_have_one_name_each_and_are_drawn():
    from specviz.app import tree_shapes
    from specviz.verifiers import tree

    chains, kary = tree.multi_draft_parents(2, 3), tree.kary_parents(2, 3)
    assert chains.size - 1 == 2 * 3 and kary.size - 1 == 2 + 4 + 8  # drafted tokens of each shape
    x, depth = tree_shapes.layout(kary)
    assert depth.max() == 3 and (np.bincount(depth) == [1, 2, 4, 8]).all()
    assert len(set(np.round(x[depth == 3], 9))) == 8  # leaves never drawn on top of each other
    x, depth = tree_shapes.layout(chains)
    assert (np.bincount(depth) == [1, 2, 2, 2]).all()
    with pytest.raises(ValueError, match="parents"):
        tree_shapes.layout([0, 0])
    toy = ((1 / 3, 2 / 3), (2 / 3, 1 / 3))
    # The two shapes keep different numbers of drafts: why they need two names.
    assert abs(tree.kary_expected_accepted(*toy, 2, 2, iid=True) - 1.3827160493827) < 1e-9
    at = open_page("app_pages/verifiers.py")
    table = shown_table(at, "verdict")
    assert "2 chains from the root, i.i.d. from q" in set(table["rule"])
    assert not table["rule"].str.startswith("tree:").any()
    trees = shown_table(at, "candidates")
    assert list(trees["candidates"]) == ["full 2-ary tree, i.i.d. from q (SpecInfer)",
                                         "full 2-ary tree, q's top k (EAGLE-style)"]  # fmt: skip
    titles = [c.proto.spec for c in at.get("plotly_chart")]
    assert any("2 chains from the root: 4 drafts" in t for t in titles)
    assert any("full 2-ary tree: 6 drafts" in t for t in titles)


# --- latency: the warm-up at server start -------------------------------------------------------------


def test_warm_up_runs_once_per_process_and_imports_torch_off_the_click():
    import subprocess
    import sys

    code = (
        "import sys, time\n"
        "from specviz.app import warm\n"
        "assert 'torch' not in sys.modules\n"  # negative control: nothing imported it before
        "first, again = warm.start(), warm.start()\n"
        "deadline = time.monotonic() + 120\n"
        "while 'torch' not in sys.modules and time.monotonic() < deadline: time.sleep(0.05)\n"
        "print(first, again, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert out.stdout.split() == ["True", "False", "True"], out.stderr
