"""Every page of the app under streamlit's AppTest.

AppTest runs app.py in-process, switches to a page, sets widgets and clicks buttons; the
assertions read the numbers the page prints and compare them with specviz.proof.theory. The
helpers behind the pages are tested headless in test_links, test_position, test_batch_demo
and test_speed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from apptest import metric, open_page, plotly_array, texts
from streamlit.testing.v1 import AppTest

from specviz.app import batch_demo, flow, limits, links, position, results, speed, why_exact
from specviz.proof import prove, theory
from specviz.proof.bugs import BUGS

ROOT = Path(__file__).resolve().parents[1]
REF_P = np.array(position.REFERENCE_P)
UNIFORM = np.full(4, 0.25)


def test_the_url_paths_shared_links_use_stay():
    # Shared links and bookmarks depend on these five; pages added later keep unique paths and existing files.
    table = {lesson.file: (lesson.title, lesson.url_path) for lesson in flow.LESSONS}
    paths = [lesson.url_path for lesson in flow.LESSONS]
    assert len(paths) == len(set(paths)) and all((ROOT / f).is_file() for f in table)
    pinned = [f"app_pages/{name}.py" for name in ("home", "exact", "batch", "bug_lab", "tokens")]
    assert {f: table[f] for f in pinned} == {
        "app_pages/home.py": ("Home", ""),
        "app_pages/exact.py": ("Why it is exact", "why-exact"),
        "app_pages/batch.py": ("Batch", "batch"),
        "app_pages/bug_lab.py": ("Bug lab", "bug-lab"),
        "app_pages/tokens.py": ("Tokens per step", "tokens-per-step"),
    }


@pytest.mark.parametrize(
    "page, title",
    [
        (None, "specviz: lossless speculative sampling"),
        ("app_pages/exact.py", "Why it is exact"),
        ("app_pages/batch.py", "Batch"),
        ("app_pages/bug_lab.py", "Bug lab"),
        ("app_pages/tokens.py", "Tokens per step"),
    ],
)
def test_every_page_renders_without_exception(page, title):
    at = open_page(page)
    assert at.title[0].value == title


# Why it is exact


def test_exact_default_is_the_reference_example():
    at = open_page("app_pages/exact.py")
    assert metric(at, "acceptance rate a") == "0.7000"
    assert metric(at, "TV(p, q) = 1 − a") == "0.3000"
    assert float(metric(at, "largest |output − p|")) < 1e-12
    assert metric(at, "TV(output law, p)") == "0.000000"
    assert len(at.latex) >= 4


@pytest.mark.parametrize("bug, K", [("resample_from_p", 1), ("reused_coin", 1), ("count_after_rejection", 3)])
def test_exact_selecting_a_bug_prints_its_exact_tv(bug, K):
    at = open_page("app_pages/exact.py")
    at.selectbox(key="exact.bug").select(bug)
    at.slider(key="exact.K").set_value(K).run()
    expected = theory.total_variation(theory.position_law(REF_P, UNIFORM, bug, K=K), REF_P)
    assert expected > 0.01
    assert metric(at, "TV(output law, p)") == f"{expected:.6f}"
    assert BUGS[bug].title in texts(at.markdown)


def test_exact_wrong_bonus_row_says_why_it_has_no_single_position_law():
    at = open_page("app_pages/exact.py", {"bug": "wrong_bonus_row"})
    assert metric(at, "TV(output law, p)") == "no single-position law"
    assert "ragged" in texts(at.info)


def test_exact_bad_p_shows_an_error_and_the_page_keeps_working():
    at = open_page("app_pages/exact.py", {"p": "0.5,-0.2,0.7,0.0"})
    assert "p: expected non-negative probabilities, got -0.2 for token 1" in texts(at.error)
    at.selectbox(key="exact.bug").select("resample_from_p").run()  # the rest of the page still answers
    assert not at.exception
    assert "Fix p and q above" in texts(at.info)


def test_exact_edited_table_is_validated_and_renormalized_visibly():
    at = open_page("app_pages/exact.py")
    at.session_state["exact.table0"] = {"edited_rows": {0: {"p": 0.8}}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert "Your p summed to 1.3; divided by 1.3" in texts(at.info)
    assert (
        metric(at, "acceptance rate a")
        == f"{theory.acceptance_rate(np.array([0.8, 0.3, 0.15, 0.05]) / 1.3, UNIFORM):.4f}"
    )
    at.session_state["exact.table0"] = {"edited_rows": {1: {"q": None}}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert not at.exception
    assert "q: expected a number in every row, got an empty or NaN entry for token 1" in texts(at.error)


def test_exact_presets_replace_the_table():
    at = open_page("app_pages/exact.py")
    at.selectbox(key="exact.preset").select("disjoint supports").run()
    assert metric(at, "acceptance rate a") == "0.0000"
    assert at.query_params["p"] == "0.5,0.5,0,0" and at.query_params["q"] == "0,0,0.5,0.5"
    assert at.selectbox(key="exact.preset").value == "disjoint supports"  # the selector shows what is loaded
    at.session_state["exact.table1"] = {"edited_rows": {0: {"p": 0.4}}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert at.selectbox(key="exact.preset").value is None  # an edited table is your own, no preset


def test_exact_sampling_overlays_samples_and_traces_one_verification():
    at = open_page("app_pages/exact.py", {"bug": "resample_from_p"})
    at.button(key="exact.sample100000").click().run()
    tv = float(metric(at, "TV(sampled, exact), 100,000 rows"))
    assert tv < 0.01  # the sampled law is the bug's exact law, not p (TV 0.1 from it)
    at.button(key="exact.sample1").click().run()
    trace = at.table[-1].value  # a table that wraps in the half-width column
    assert list(trace.columns) == ["step", "token", "p(x)", "q(x)", "p/q", "u", "outcome"]
    first = trace.iloc[0]
    assert (first["outcome"] == "accepted") == (first["u"] < float(first["p/q"]))
    assert "None" not in trace.astype(str).to_numpy().ravel().tolist()
    assert trace.iloc[-1]["p/q"] == "— (drawn, not tested)"
    assert "100,001 rows" in " ".join(m.label for m in at.metric)


def test_exact_link_reproduces_the_demo_and_bad_values_are_noted():
    query = {"p": "0.1,0.6,0.1,0.2", "q": "0.4,0.1,0.4,0.1", "bug": "unclamped_residual", "K": "99", "seed": "3"}
    at = open_page("app_pages/exact.py", query)
    assert at.selectbox(key="exact.bug").value == "unclamped_residual"
    assert at.slider(key="exact.K").value == 1
    assert "K='99' is not valid" in texts(at.warning)
    law = theory.position_law([0.1, 0.6, 0.1, 0.2], [0.4, 0.1, 0.4, 0.1], "unclamped_residual")
    assert metric(at, "TV(output law, p)") == f"{theory.total_variation(law, [0.1, 0.6, 0.1, 0.2]):.6f}"
    assert at.query_params == {**query, "K": "1"}  # the link now holds what is shown


def chart_spec(at: AppTest, index: int) -> dict:
    import json

    return json.loads(at.get("plotly_chart")[index].proto.spec)


def test_exact_each_bug_shows_or_says_where_to_look():
    """Issue 8: unclamped_residual shows TV 0 on the default preset; "show me" loads a setting where TV > 0."""
    at = open_page("app_pages/exact.py", {"bug": "unclamped_residual"})
    assert at.selectbox(key="exact.preset").value == "textbook"
    assert metric(at, "TV(output law, p)") == "0.000000"
    assert "leaves the first token's law at p (TV 0)" in texts(at.warning)
    at.button(key="exact.show_me").click().run()
    where = position.show_me("unclamped_residual")
    p, q = position.preset(where.preset)
    tv = theory.total_variation(theory.position_law(p, q, "unclamped_residual", K=where.K), p)
    assert tv > 0.05
    assert metric(at, "TV(output law, p)") == f"{tv:.6f}"
    assert at.selectbox(key="exact.preset").value == where.preset
    assert at.slider(key="exact.K").value == where.K
    assert "leaves the first token's law at p" not in texts(at.warning)


def test_exact_count_after_rejection_show_me_raises_k():
    at = open_page("app_pages/exact.py", {"bug": "count_after_rejection"})
    assert metric(at, "TV(output law, p)") == "0.000000"  # K = 1: nothing after a rejection to keep
    at.button(key="exact.show_me").click().run()
    assert at.slider(key="exact.K").value > 1
    assert float(metric(at, "TV(output law, p)")) > 0.05


@pytest.mark.parametrize("bug", ["shared_uniform", "no_bonus", "wrong_bonus_row"])
def test_exact_bugs_without_a_one_position_effect_link_to_the_bug_lab(bug):
    at = open_page("app_pages/exact.py", {"bug": bug})
    assert f"/bug-lab?bug={bug}" in texts(at.info)
    links_ = [(e.proto.page, e.proto.query_string) for e in at.get("page_link")]
    assert ("bug-lab", f"bug={bug}") in links_
    assert not [b for b in at.button if b.key == "exact.show_me"]


def test_exact_decomposition_chart_draws_q():
    at = open_page("app_pages/exact.py", {"q": "0.1,0.2,0.3,0.4"})
    spec = chart_spec(at, 0)
    q_trace = [t for t in spec["data"] if t.get("name") == "draft q"]
    assert len(q_trace) == 1
    np.testing.assert_array_equal(plotly_array(q_trace[0]["y"]), [0.1, 0.2, 0.3, 0.4])


def test_exact_text_entry_parses_and_says_what_it_did():
    at = open_page("app_pages/exact.py")
    at.text_input(key="exact.p_text").input("1e-3, 1/2 50%  0.02")
    at.button(key="exact.use_text").click().run()
    said = "read 4 values (1e-3 → 0.001; 1/2 → 0.5; 50% → 0.5); normalized: sum was 1.021"
    assert "p: " + links.plain(said) in texts(at.success)  # what the user typed is echoed as plain text
    assert at.query_params["p"] == "0.001,0.5,0.5,0.02" and at.query_params["q"] == "0.25,0.25,0.25,0.25"
    d = np.array([0.001, 0.5, 0.5, 0.02]) / 1.021
    assert metric(at, "acceptance rate a") == f"{theory.acceptance_rate(d, UNIFORM):.4f}"
    at.text_input(key="exact.q_text").input("0.5, 1/0")
    at.button(key="exact.use_text").click().run()
    assert "q: expected numbers such as 0.25, 1/4, 25% or 2.5e-1" in texts(at.error)
    assert at.query_params["q"] == "0.25,0.25,0.25,0.25"  # a bad text changes nothing


def test_exact_one_sample_is_one_highlighted_token():
    at = open_page("app_pages/exact.py")
    at.button(key="exact.sample1").click().run()
    law = chart_spec(at, 1)
    names = [t.get("name") for t in law["data"]]
    assert not any(n.startswith("sampled") for n in names)  # no histogram, no error bars
    star = [t for t in law["data"] if t.get("name", "").startswith("one sample: token")]
    token = int(star[0]["name"].rsplit(" ", 1)[1])
    trace = at.table[-1].value
    first_token = trace.iloc[0]["token"] if trace.iloc[0]["outcome"] == "accepted" else trace.iloc[-1]["token"]
    assert token == first_token
    assert not [m for m in at.metric if m.label.startswith("TV(sampled")]
    at.button(key="exact.sample1000").click().run()
    assert "sampled (1,001 rows)" in [t.get("name") for t in chart_spec(at, 1)["data"]]


# Batch


def test_batch_runs_and_shows_strips_histogram_and_timings():
    at = open_page("app_pages/batch.py", {"B": "40", "K": "3", "V": "20", "seed": "2"})
    assert "click **Run batch**" not in texts(at.info)  # issue 19: a link restores the result, not only settings
    at.button(key="batch.run").click().run()
    assert not at.exception
    assert metric(at, "rows verified") == "40"
    num_draft = batch_demo.draft_counts("random 0..K", 40, 3, 2)
    assert metric(at, "mean drafts per row") == f"{num_draft.mean():.2f}"
    report = batch_demo.run_batch_demo(40, 3, 20, num_draft, "random Dirichlet", 1.0, 2, "NumPy", [])
    assert metric(at, "mean tokens per row") == f"{report.num_tokens.mean():.3f}"
    timings = at.dataframe[0].value
    assert {"NumPy", "PyTorch CPU"} <= set(timings["backend"]) and set(timings["agrees"]) == {"yes"}
    assert "Showing the first 32 of 40 rows" in texts(at.caption)
    assert batch_demo.loops_note() in texts(at.caption)  # which code ran the hot loops


def test_batch_typed_counts_are_checked_and_cuda_is_explained():
    at = open_page("app_pages/batch.py", {"B": "4", "counts": "typed", "typed": "1,2,3"})
    assert "draft counts: expected B = 4 comma-separated counts, one per row, got 3" in texts(at.error)
    assert at.button(key="batch.run").disabled
    at.text_input(key="batch.typed").input("4, 0, 2, 9").run()
    assert "counts in [0, K = 4], got 9 for row 3" in texts(at.error)
    at.text_input(key="batch.typed").input("4, 0, 2, 1").run()
    at.button(key="batch.run").click().run()
    assert metric(at, "mean drafts per row") == "1.75"
    cuda_ok, reason = batch_demo.cuda_status()
    if not cuda_ok:
        assert at.checkbox(key="batch.cuda_off").disabled and links.plain(reason) in texts(at.caption)
        assert "PyTorch CUDA" not in at.radio(key="batch.backend").options


def test_batch_caps_huge_inputs_with_a_message():
    at = open_page("app_pages/batch.py", {"B": "1000000", "K": "4", "V": "32000", "backend": "PyTorch CUDA"})
    rows = batch_demo.cap_batch(1_000_000, 4, 32_000).B
    assert rows * 5 * 32_000 <= limits.MAX_BATCH_ELEMENTS
    assert f"B capped at {rows:,} (you asked for 1,000,000)" in texts(at.warning)
    if not batch_demo.cuda_status()[0]:
        assert "PyTorch CUDA is not available here" in texts(at.warning)
        assert at.radio(key="batch.backend").value == "NumPy"


def test_batch_switching_the_backend_keeps_the_results():
    at = open_page("app_pages/batch.py", {"B": "12", "K": "3", "V": "10"})
    at.button(key="batch.run").click().run()
    shown = metric(at, "mean tokens per row")
    at.radio(key="batch.backend").set_value("PyTorch CPU").run()
    assert "click **Run batch**" not in texts(at.info)  # nothing thrown away
    assert metric(at, "mean tokens per row") == shown
    assert "Backend shown: PyTorch CPU." in texts(at.caption)
    import torch

    timings = at.dataframe[0].value
    threads = dict(zip(timings["backend"], timings["torch threads"], strict=True))
    assert threads["PyTorch CPU"] == str(torch.get_num_threads()) and threads["NumPy"] == ""
    assert f"PyTorch CPU ran with torch.get_num_threads() = {torch.get_num_threads()}" in texts(at.caption)
    assert "zero-copy views" in texts(at.caption)
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["Download this run (JSON)", "Download the first 12 rows (CSV)"]


def test_batch_k_zero_defines_the_acceptance_rate():
    at = open_page("app_pages/batch.py", {"B": "5", "K": "0", "V": "4"})
    at.button(key="batch.run").click().run()
    assert metric(at, "acceptance rate (accepted / tested)") == "—"
    assert "No draft was tested" in texts(at.caption)
    assert "nan" not in " ".join(m.value for m in at.metric).lower()


# Bug lab


def run_bug_lab(at: AppTest, bug: str, prediction: str | None = None) -> AppTest:
    at.selectbox(key="buglab.bug").select(bug).run()
    if prediction:
        at.radio(key="buglab.prediction").set_value(prediction).run()
    at.button(key="buglab.run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_bug_lab_correct_verifier_passes_and_resample_from_p_is_caught():
    at = open_page("app_pages/bug_lab.py")
    assert at.number_input(key="buglab.n").value == 100_000
    run_bug_lab(at, "none (correct verifier)", "the test will pass")
    assert "Verdict: pass" in texts(at.success)
    assert "You were right" in texts(at.markdown)
    res = prove.run_case("reference", n=100_000, seed=0)
    assert metric(at, f"chi-square ({res.joint.dof} dof)") == f"{res.joint.statistic:,.1f}"
    assert metric(at, "joint test") == "pass"

    run_bug_lab(at, "resample_from_p", "the test will pass")
    assert "Verdict: caught" in texts(at.error)
    assert metric(at, "joint test") == "fail"
    assert "You were wrong" in texts(at.markdown)


def test_bug_lab_shared_uniform_shows_the_first_token_lesson():
    at = run_bug_lab(open_page("app_pages/bug_lab.py"), "shared_uniform")
    assert metric(at, "first token only") == "pass"
    assert metric(at, "joint law of 3 tokens") == "fail"
    assert any("first-token-only test misses it" in s.value for s in at.subheader)


def test_bug_lab_no_bonus_is_caught_by_tokens_per_step():
    at = run_bug_lab(open_page("app_pages/bug_lab.py"), "no_bonus")
    assert metric(at, "joint test") == "pass"
    assert "Verdict: caught" in texts(at.error)
    assert "The tokens-per-step test says fail" in texts(at.caption)


def test_bug_lab_bug_moves_to_its_home_scenario_and_n_is_capped():
    at = open_page("app_pages/bug_lab.py")
    at.selectbox(key="buglab.bug").select("wrong_bonus_row").run()
    assert at.selectbox(key="buglab.scenario").value == "ragged"
    at.number_input(key="buglab.n").set_value(5_000_000).run()
    assert "N capped at 1,000,000 (you asked for 5,000,000)" in texts(at.warning)
    assert at.query_params == {"bug": "wrong_bonus_row", "scenario": "ragged", "n": "5000000", "seed": "0"}


def test_bug_lab_link_reproduces_settings():
    at = open_page("app_pages/bug_lab.py", {"bug": "greedy_draft_sampled_q", "n": "20000", "seed": "abc"})
    assert at.selectbox(key="buglab.bug").value == "greedy_draft_sampled_q"
    assert at.selectbox(key="buglab.scenario").value == "deterministic"  # the bug's home, as the link named none
    assert at.number_input(key="buglab.n").value == 20_000
    assert "seed='abc' is not valid" in texts(at.warning)
    at.button(key="buglab.run").click().run()
    assert "Verdict: caught" in texts(at.error)


@pytest.mark.parametrize("n", [1, 30])
def test_bug_lab_a_powerless_run_is_inconclusive_not_pass_or_fail(n):
    """Issue 7 item 9: N = 1 said "Verdict: pass" and N = 1-30 "FAIL" for the correct verifier."""
    at = open_page("app_pages/bug_lab.py", {"n": str(n)})
    at.button(key="buglab.run").click().run()
    verdict = results.case_verdict(prove.run_case("reference", n=n, seed=0))
    assert verdict.word == "inconclusive"
    text = texts(at.warning)
    assert f"Verdict: inconclusive: N = {n} is too small — need N ≥ {verdict.needed_n:,}" in text
    assert "Verdict: pass" not in texts(at.success) and "FAIL" not in texts(at.error)
    assert metric(at, "joint test") == "inconclusive"
    assert metric(at, "detectable TV (99% power)") == "∞ (no power)"
    assert f"need N ≥ {verdict.needed_n:,} at least" in text  # the tokens test's spread is unknown at N <= 30
    at.button(key="buglab.use_needed_n").click().run()  # follow the page's advice once: one click sets N and runs
    assert at.number_input(key="buglab.n").value == results.suggested_n(verdict.needed_n)
    assert "Verdict: pass" in texts(at.success)  # with the N it suggested, the test speaks (issue 19: it cleared)


def test_bug_lab_every_verdict_says_what_it_could_have_seen():
    at = open_page("app_pages/bug_lab.py")
    at.button(key="buglab.run").click().run()
    res = prove.run_case("reference", n=100_000, seed=0)
    assert f"TV ≥ {res.joint.detectable_tv:.4f} with 99% probability" in texts(at.success)
    run_bug_lab(at, "resample_from_p")
    assert "Verdict: caught" in texts(at.error) and "TV ≥ " in texts(at.error)
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["Download this run (JSON)", "Download the counts (CSV)"]


def test_bug_lab_shared_uniform_lesson_says_what_each_test_sees():
    """Issue 8: the lesson said only the joint test sees it while tokens per step failed at z = +50."""
    at = run_bug_lab(open_page("app_pages/bug_lab.py"), "shared_uniform")
    res = prove.run_case("reference", n=100_000, seed=0, bug=BUGS["shared_uniform"])
    assert res.first_token.passed and not res.joint.passed and not res.tokens.passed  # what the run shows
    assert metric(at, "tokens per step") == "fail"
    lesson = texts(at.markdown)
    seen = lesson.split("tests that see it: ")[1].split(";")[0]
    assert "tokens per step" in seen and "joint law of 3 tokens" in seen and "first token" not in seen
    assert "tests that miss it: first token only" in lesson
    # the page's sentence "raises the tokens per step": one shared coin u accepts the first i drafts with
    # probability E[min_j r_j] >= E[prod_j r_j], the lossless chance; the run agrees
    assert res.tokens.measured > res.tokens.expected
    assert f"measured {res.tokens.measured:.4f} against {res.tokens.expected:.4f} for a lossless rule (more)" in lesson
    for t, c in enumerate(res.positions[1:], start=1):
        assert metric(at, f"token {t + 1} on its own") == ("fail" if not c.passed else "pass")


# Tokens per step


def test_tokens_page_numbers_follow_theory_and_the_sliders():
    at = open_page("app_pages/tokens.py")
    assert metric(at, "E[tokens], K = 3") == "2.5330"
    assert metric(at, "without the bonus, K = 3") == "2.1900"
    assert metric(at, "theory, K = 3") == "2.533"
    measured = float(metric(at, "measured (100,000 rows)").split(" ± ")[0])
    assert abs(measured - 2.533) < 0.02
    at.slider(key="tokens.a").set_value(0.9)
    at.slider(key="tokens.K").set_value(5).run()
    assert metric(at, "E[tokens], K = 5") == f"{theory.expected_tokens(0.9, 5):.4f}"
    table = speed.speedup_table(0.9, range(17), 0.1)
    assert metric(at, "best K") == str(table.best_K)
    assert at.query_params["a"] == "0.9" and at.query_params["K"] == "5"


def test_tokens_page_bad_link_values_fall_back_with_a_note():
    at = open_page("app_pages/tokens.py", {"a": "1.5", "c": "0.3", "n": "5000000"})
    assert "a='1.5' is not valid (expected a number in [0, 1]); using the default 0.7" in texts(at.warning)
    assert "Rows per point capped at 200,000" in texts(at.warning)
    assert at.slider(key="tokens.c").value == pytest.approx(0.3)


def test_tokens_page_tiny_n_is_inconclusive_not_plus_minus_zero():
    at = open_page("app_pages/tokens.py", {"n": "2"})
    caption = texts(at.caption)
    assert "± 0.0000" not in caption
    assert "inconclusive: 2 rows is too few" in caption
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["Download the points (CSV)", "Download the points (JSON)"]
    big = open_page("app_pages/tokens.py", {"n": "20000"})  # negative control: enough rows speak
    assert "inconclusive" not in texts(big.caption) and " ± " in texts(big.caption)


def test_home_numbers_are_the_computed_ones():
    """Every number the home page states: the reference example's tokens, the exact page's sample sizes."""
    at = open_page(None)
    ref = theory.expected_tokens(theory.acceptance_rate(REF_P, UNIFORM), 3)
    assert f"the {ref:.3f} tokens of the textbook example" in texts(at.markdown)
    sizes = why_exact.SAMPLE_SIZES  # the Sample buttons of Why it is exact
    listed = ", ".join(f"{n:,}" for n in sizes[:-1]) + f" or {sizes[-1]:,}"
    assert f"sample {listed} times" in texts(at.caption)


def test_bug_lab_lists_the_faults_tested_directly():
    from specviz.proof import engine_bugs

    at = open_page("app_pages/bug_lab.py")
    shown = " ".join(m.value for m in at.markdown)
    for name, fault in engine_bugs.FAULTS.items():
        assert f"**{name}: {fault.title}.**" in shown
