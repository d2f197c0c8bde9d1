"""The Sampling-settings lesson: the correct pipeline is lossless, each mismatch has its exact TV."""

from __future__ import annotations

import numpy as np
import pytest

from specviz.app import settings_demo as sd
from specviz.errors import InputError
from specviz.verifiers.processing import Settings, process_logits

REQUESTS = [Settings(), Settings(temperature=0.7, top_p=0.9), Settings(top_k=3), Settings(temperature=0)]
DRAFTERS = [Settings(), Settings(temperature=1.5), Settings(top_k=2), Settings(temperature=0)]


@pytest.mark.parametrize("preset", list(sd.PRESETS))
def test_correct_pipeline_is_lossless_for_every_pair_of_settings(preset):
    zt, zd, _ = sd.PRESETS[preset]
    for request in REQUESTS:
        for drafter in DRAFTERS:
            rep = sd.settings_report(zt, zd, request, drafter)
            correct = rep.pipelines[0]
            assert correct.name == "correct" and correct.lossless and correct.tv_plain < 1e-12
            np.testing.assert_allclose(correct.law, process_logits(zt, request), atol=1e-12)


def test_mismatches_are_lossy_exactly_when_raw_and_processed_differ():
    zt, zd, _ = sd.PRESETS["hot drafter"]
    rep = sd.settings_report(zt, zd, Settings(top_p=0.9), Settings(top_k=2))
    by = {pl.name: pl for pl in rep.pipelines}
    assert not by["q_unprocessed"].lossless and by["q_unprocessed"].tv_plain > 0.01
    assert not by["target_unprocessed"].lossless
    # The unprocessed target is exactly what the verifier then reproduces: the raw softmax.
    np.testing.assert_allclose(by["target_unprocessed"].law, rep.p_raw, atol=1e-12)
    assert by["target_unprocessed"].tv_plain == pytest.approx(0.5 * np.abs(rep.p_raw - rep.p).sum(), abs=1e-12)
    # Negative control for the badge: with default settings on both sides nothing differs.
    plain = sd.settings_report(zt, zd, Settings(), Settings())
    assert all(pl.lossless for pl in plain.pipelines)


def test_greedy_drafter_reporting_its_softmax_is_the_classic_pipeline_bug():
    zt, zd, _ = sd.PRESETS["similar models"]
    rep = sd.settings_report(zt, zd, Settings(), Settings(temperature=0))
    by = {pl.name: pl for pl in rep.pipelines}
    assert rep.q.max() == 1.0 and by["correct"].lossless
    assert by["q_unprocessed"].tv_plain > 0.01


def test_removed_tokens_and_tokens_per_step():
    zt, zd, _ = sd.PRESETS["hot drafter"]
    rep = sd.settings_report(zt, zd, Settings(top_k=2), Settings(), K=3)
    assert rep.removed_p.sum() == 6 and not rep.removed_q.any()
    a = np.minimum(rep.p, rep.q).sum()
    assert rep.tokens_per_step == pytest.approx((1 - a**4) / (1 - a), abs=1e-12)


def test_sweep_finds_where_filtering_the_drafter_raises_acceptance():
    zt, zd, _ = sd.PRESETS["hot drafter"]
    pts = sd.sweep(zt, zd, Settings(top_k=2), Settings(), "top_k", [0, 1, 2, 3, 8], K=3)
    acc = {int(pt.value): pt.acceptance for pt in pts}
    assert acc[2] > acc[0]  # filtering the drafter like the request raises acceptance here
    assert acc[8] == pytest.approx(acc[0], abs=1e-15)  # top-k >= V changes nothing
    for pt in pts:
        assert pt.tokens_per_step == pytest.approx(sum(pt.acceptance**i for i in range(4)), abs=1e-12)
    temps = sd.sweep(zt, zd, Settings(), Settings(), "temperature", [1.0], K=1)
    assert temps[0].acceptance == pytest.approx(np.minimum(process_logits(zt), process_logits(zd)).sum())


def test_bad_input_names_the_argument():
    with pytest.raises(InputError, match="^draft_logits"):
        sd.settings_report([0, 1], [0, 1, 2], Settings(), Settings())
    with pytest.raises(InputError, match="^knob"):
        sd.sweep([0, 1], [0, 1], Settings(), Settings(), "heat", [1])
    with pytest.raises(InputError, match="^target_logits"):
        sd.settings_report(["a"], [0], Settings(), Settings())
    with pytest.raises(InputError, match="^K"):
        sd.settings_report([0, 1], [0, 1], Settings(), Settings(), K=0)


# --- the page's inputs (parse_logits, random_logits, sweep_values, greedy_pick) ----------------


def test_typed_logits_parse_commas_spaces_and_minus_inf():
    z = sd.parse_logits(" 2, 1 0,, -inf  -1.5e0 ", "target logits")
    np.testing.assert_array_equal(z, [2.0, 1.0, 0.0, -np.inf, -1.5])
    assert process_logits(z)[3] == 0  # -inf is a token ruled out, not an error


@pytest.mark.parametrize(
    "typed, got",
    [("", "nothing"), ("1, two", "'two'"), ("1, nan", "'nan'"), ("inf, 1", "'inf'"), ("-inf -inf", "only -inf"),
     (" ".join(["1"] * (sd.MAX_TYPED_V + 1)), f"{sd.MAX_TYPED_V + 1}")],
)  # fmt: skip
def test_typed_logits_errors_name_the_field_and_what_was_typed(typed, got):
    with pytest.raises(InputError, match="^draft logits: expected") as e:
        sd.parse_logits(typed, "draft logits")
    assert e.value.got == got


def test_random_logits_follow_the_seed():
    a, b = sd.random_logits(7), sd.random_logits(7)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert a[0].shape == (sd.RANDOM_V,) and not np.array_equal(a[0], a[1])
    assert not np.array_equal(sd.random_logits(8)[0], a[0])


def test_sweep_values_and_greedy_pick():
    assert sd.sweep_values("top_k", 5) == [1.0, 2.0, 3.0, 4.0, 5.0]
    t, p = sd.sweep_values("temperature", 8), sd.sweep_values("top_p", 8)
    assert t[0] == 0.1 and t[-1] == 2.0 and p[0] == 0.05 and p[-1] == 1.0
    with pytest.raises(InputError, match="^knob"):
        sd.sweep_values("heat", 8)
    assert sd.greedy_pick([1.0, 3.0, 3.0, -np.inf]) == (1, 2)  # the lowest id among the tied top
    assert sd.greedy_pick([0.0, -1.0]) == (0, 1)
    for z in ([1.0, 3.0, 3.0], [5.0, 1.0, 5.0, 5.0]):  # the same token plain greedy decoding takes
        assert process_logits(np.array(z), Settings(temperature=0)).argmax() == sd.greedy_pick(z)[0]


def test_a_mismatch_is_lossy_only_when_its_side_settings_change_its_law():
    """The page's caption: q_unprocessed needs q != raw q, target_unprocessed needs p != raw p."""
    rng = np.random.default_rng(12)
    lossy_seen = {"q_unprocessed": 0, "target_unprocessed": 0}
    unchanged = 0

    def settings() -> Settings:
        return Settings(float(rng.choice([0.5, 1.0])), int(rng.integers(0, 7)), float(rng.choice([0.6, 1.0])))

    for _ in range(400):
        zt, zd = np.round(rng.normal(size=6) * 2), np.round(rng.normal(size=6) * 2)
        rep = sd.settings_report(zt, zd, settings(), settings())
        by = {pl.name: pl for pl in rep.pipelines}
        if np.array_equal(rep.q, rep.q_raw):
            assert by["q_unprocessed"].lossless
            unchanged += 1
        if np.array_equal(rep.p, rep.p_raw):
            assert by["target_unprocessed"].lossless
            unchanged += 1
        for name in lossy_seen:
            lossy_seen[name] += not by[name].lossless
    assert unchanged > 50 and min(lossy_seen.values()) > 50  # both branches happen often: neither check is vacuous


def test_the_page_defaults_show_both_mismatches_lossy_and_the_correct_pipeline_lossless():
    zt, zd, _ = sd.PRESETS[sd.DEFAULT_PRESET]
    rep = sd.settings_report(zt, zd, sd.DEFAULT_REQUEST, sd.DEFAULT_DRAFTER)
    by = {pl.name: pl for pl in rep.pipelines}
    assert by["correct"].lossless
    # Visibly lossy: far above rounding, and each mismatch has its own TV.
    assert by["q_unprocessed"].tv_plain > 0.01 and by["target_unprocessed"].tv_plain > 0.01
    assert abs(by["q_unprocessed"].tv_plain - by["target_unprocessed"].tv_plain) > 1e-3
    assert rep.removed_p.any() and rep.removed_q.any()  # both sides' settings remove tokens in the bars


def test_format_tv_shows_the_bound_for_rounding_noise_and_the_value_otherwise():
    zt, zd, _ = sd.PRESETS["hot drafter"]
    plain = sd.settings_report(zt, zd, Settings(), Settings())
    noise = [pl.tv_plain for pl in plain.pipelines]
    assert any(tv > 0 for tv in noise)  # the closed forms leave float noise (6e-17 here): the case to format
    assert all(sd.format_tv(tv) == "0 (to 1e-12)" for tv in noise)
    assert sd.format_tv(0.0) == "0 (to 1e-12)"
    # Control: a TV at the bound, or a real one, is printed as its value.
    assert sd.format_tv(sd.LOSSLESS_TV) == "1e-12" and sd.format_tv(0.0676) == "0.0676"
    with pytest.raises(ValueError, match="^tv"):
        sd.format_tv(float("nan"))


# --- the page's sentences and table, computed here (the page lays them out) ---------------------------


def test_parse_logit_pair_needs_as_many_draft_logits_as_target_logits():
    zt, zd = sd.parse_logit_pair("1, 2, -inf", "0 0 0")
    assert zt.size == zd.size == 3 and np.isneginf(zt[2])
    with pytest.raises(InputError, match="draft logits"):
        sd.parse_logit_pair("1, 2, 3", "0, 0")


def test_token_list_names_the_marked_tokens():
    assert sd.token_list(np.array([True, False, True])) == "token 0, token 2"
    assert sd.token_list(np.zeros(3, dtype=bool)) == "none"


def test_pipeline_rows_say_lossless_only_for_the_correct_pipeline_when_settings_differ():
    zt, zd = sd.PRESETS[sd.DEFAULT_PRESET][0], sd.PRESETS[sd.DEFAULT_PRESET][1]
    rep = sd.settings_report(zt, zd, Settings(0.7, 0, 0.9), Settings(1.3, 2, 1.0), 3)
    rows = sd.pipeline_rows(rep)
    assert [r["pipeline"] for r in rows] == [pl.name for pl in rep.pipelines]
    assert [r["verdict"].endswith("lossless") for r in rows] == [pl.lossless for pl in rep.pipelines]
    assert rows[0]["verdict"] == "✓\u00a0lossless" and any(r["verdict"] == "✗\u00a0lossy" for r in rows[1:])


def test_greedy_text_names_the_argmax_and_q_s_mass_on_it():
    zt, zd = (2.0, 2.0, 0.0), (0.0, 1.0, 3.0)
    rep = sd.settings_report(zt, zd, Settings(), Settings(), 2)
    greedy = sd.settings_report(zt, zd, Settings(temperature=0.0), Settings(), 2)
    text = sd.greedy_text(zt, greedy, rep)
    assert "**token 0** (tied with 1 other token;" in text and f"q gives it {greedy.q[0]:.4f}" in text
    assert text.endswith("The drafter's most likely token is token 2.")
