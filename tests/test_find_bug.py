"""The lesson "Find the bug": the line-up from the real verifiers, the eye and test thresholds, and the page."""

from __future__ import annotations

import numpy as np
import pytest
from apptest import link, metric, open_page, rerun

from specviz.app import find_bug as fb
from specviz.proof import stats, theory
from specviz.proof.bugs import BUGS

ALPHA = 0.001  # level of every chi-square below (critical value 16.27 on 3 degrees of freedom)
TRIALS = 400  # simulated line-ups per pick rate: a rate's standard error is at most 0.025


def test_the_mistakes_are_those_whose_first_token_is_off():
    assert set(fb.MISTAKES) <= set(BUGS)
    for name in fb.MISTAKES:
        assert theory.total_variation(fb.first_token_law(name), fb.P) > 0.01
    for name in ("no_bonus", "shared_uniform", "unclamped_residual"):  # first token right in the textbook example
        assert name not in fb.MISTAKES
        assert theory.total_variation(theory.position_law(fb.P, fb.Q, name, K=fb.K), fb.P) < 1e-12


@pytest.mark.parametrize("mistake", ["shared_noise_stream", "count_after_rejection", "greedy_draft_sampled_q"])
def test_lineup_runs_the_real_verifiers(mistake):
    """At N = 20,000 the odd panel (where the seed put it) fits the mistake's exact law and fails against p;
    the 19 others, from specviz.verify, pass against p. Seed fixed; level ALPHA."""
    seed = 11
    line = fb.lineup(mistake, fb.MAX_N, seed)
    assert line.odd == fb.place(seed)
    law = fb.first_token_law(mistake)
    for i, (c, t) in enumerate(zip(line.counts, line.tests, strict=True)):
        assert t.critical_value == pytest.approx(16.266, abs=1e-3) and t.alpha == ALPHA
        if i == line.odd:
            assert not t.passed  # negative control: the mistake is rejected against p
            assert stats.chi_square(c, law).passed  # and it is the mistake's own law
        else:
            assert t.passed, (i, t.p_value)
    assert fb.place(seed) != fb.place(seed + 1) or fb.place(seed + 2) != fb.place(seed)  # the seed moves it


def pick_rates(mistake: str, n: int, seed: int = 0) -> tuple[float, float]:
    """How often the eye's pick (the bar furthest from its tick) and the test's pick (the largest chi-square)
    find the mistake among 20 panels of n multinomial draws."""
    rng = np.random.default_rng(seed)
    c = rng.multinomial(n, fb.P, size=(TRIALS, fb.PANELS))
    c[:, 0] = rng.multinomial(n, fb.first_token_law(mistake), size=TRIALS)
    eye = np.mean([np.argmax(fb.eye_scores(x)) == 0 for x in c])
    test = np.mean([np.argmax(fb.chi_scores(x)) == 0 for x in c])
    return float(eye), float(test)


@pytest.mark.parametrize("mistake", ["resample_from_p", "shared_noise_stream", "target_unprocessed"])
def test_each_threshold_is_where_its_pick_works_about_half_the_time(mistake):
    th = fb.thresholds(mistake)
    eye_at, _ = pick_rates(mistake, th.n_eye)
    _, test_at = pick_rates(mistake, th.n_test)
    assert 0.35 < eye_at < 0.75 and 0.35 < test_at < 0.75
    eye_lo, test_lo = pick_rates(mistake, max(1, th.n_test // 4))
    eye_hi, test_hi = pick_rates(mistake, 4 * th.n_eye)
    assert eye_lo < 0.3 and test_lo < 0.3  # a quarter of the threshold: mostly wrong (1 in 20 is chance)
    assert eye_hi > 0.9 and test_hi > 0.9


def test_between_the_thresholds_the_test_sees_what_the_eye_does_not():
    """shared_noise_stream moves the rare tokens: small in height, large in standard errors."""
    th = fb.thresholds("shared_noise_stream")
    assert th.n_eye > 2 * th.n_test
    eye, test = pick_rates("shared_noise_stream", int(np.sqrt(th.n_eye * th.n_test)))
    assert test > eye + 0.15
    # Control: for resample_from_p, whose shift sits on the largest bar, the two are about equal.
    th2 = fb.thresholds("resample_from_p")
    assert th2.n_eye / th2.n_test < 1.2


def test_power_threshold_is_the_stats_modules():
    th = fb.thresholds("resample_from_p")
    d = fb.first_token_law("resample_from_p") - fb.P
    D = float((d**2 / fb.P).sum())
    # Noncentrality n D against the lam* of stats.detectable_tv(n) = sqrt(lam* / n) / 2.
    assert 4 * stats.detectable_tv(th.n_power, 3) ** 2 <= D * (1 + 1e-9)  # detectable at n_power
    assert 4 * stats.detectable_tv(th.n_power - 1, 3) ** 2 > D  # not one sample earlier


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="^mistake"):
        fb.lineup("no_bonus", 100, 0)
    with pytest.raises(ValueError, match="^n"):
        fb.lineup("resample_from_p", fb.MAX_N + 1, 0)


# --- the page --------------------------------------------------------------------------------------


def test_page_reveal_names_the_odd_histogram_and_its_test():
    at = open_page("app_pages/find_bug.py", {"mistake": "count_after_rejection", "n": "400", "seed": "3"})
    assert link(at) == {"mistake": "count_after_rejection", "n": "400", "seed": "3"}
    assert not at.dataframe  # nothing revealed before the guess
    odd = fb.place(3) + 1
    at.selectbox(key="findbug.guess").set_value(str(odd))
    at.button(key="findbug.reveal").click()
    rerun(at)
    assert [s.value for s in at.success] == [f"Right: histogram {odd} is count_after_rejection."]
    th = fb.thresholds("count_after_rejection")
    assert metric(at, "the eye picks it out from N ≈") == f"{th.n_eye:,}"
    assert metric(at, "the chi-square picks it out from N ≈") == f"{th.n_test:,}"
    table = at.dataframe[0].value
    line = fb.lineup("count_after_rejection", 400, 3)
    order = [odd, *(i for i in range(1, fb.PANELS + 1) if i != odd)]  # the mistake's row first, then the rule's
    assert list(table["histogram"]) == order
    assert list(table["chi-square"]) == [round(line.tests[i - 1].statistic, 2) for i in order]
    assert list(table["from"]) == ["count_after_rejection"] + ["the rule"] * (fb.PANELS - 1)
    # A new N hides the answer again, and a wrong guess is called wrong.
    at.number_input(key="findbug.n").set_value(200)
    rerun(at)
    assert not at.dataframe and link(at)["n"] == "200"
    at.selectbox(key="findbug.guess").set_value(str(odd % fb.PANELS + 1))
    at.button(key="findbug.reveal").click()
    rerun(at)
    assert [e.value for e in at.error] == [f"Histogram {odd} is count_after_rejection, not {odd % fb.PANELS + 1}."]


def test_page_caps_n_and_says_so():
    at = open_page("app_pages/find_bug.py", {"n": str(10**6)})
    assert any("capped at 20,000" in w.value for w in at.warning)


def test_p_values_never_print_as_a_bare_zero():
    line = fb.lineup("greedy_draft_sampled_q", fb.MAX_N, 1)
    odd = line.tests[line.odd]
    assert odd.p_value == 0.0  # underflows in float
    text = fb.p_value_text(odd)
    assert text != "0" and ("e-" in text or text == "< 1e-300")
    honest = line.tests[(line.odd + 1) % fb.PANELS]
    assert fb.p_value_text(honest) == f"{honest.p_value:.3g}"
