"""One position (specviz.app.position): the typed table, presets, and the sampler behind the exact page."""

from __future__ import annotations

import numpy as np
import pytest

from specviz import InputError
from specviz.app import position
from specviz.proof import stats, theory
from specviz.proof.bugs import BUGS
from specviz.proof.simulate import sample_rows

REF_P = np.array(position.REFERENCE_P)
UNIFORM = np.full(4, 0.25)


def test_parse_distribution_renormalizes_visibly():
    d = position.parse_distribution([0.5, 0.3, 0.3, 0.2], "p")
    assert d.note == "your p summed to 1.3; divided by 1.3"
    np.testing.assert_allclose(d.probs, np.array([0.5, 0.3, 0.3, 0.2]) / 1.3, rtol=1e-15)
    assert position.parse_distribution(position.REFERENCE_P, "p").note is None


@pytest.mark.parametrize(
    "values, match",
    [
        ([], "at least one token"),
        ([0.5, None, 0.5], "empty or NaN entry for token 1"),
        ([0.5, float("nan")], "empty or NaN entry for token 1"),
        ([0.5, -0.2, 0.7], "non-negative probabilities, got -0.2 for token 1"),
        ([0.0, 0.0, 0.0], "all zeros"),
        ([1.0, float("inf")], "finite numbers"),
        (["abc"], "a number in every row"),
        ([0.01] * 65, "at most 64 tokens"),
    ],
)
def test_parse_distribution_explains_bad_entries(values, match):
    with pytest.raises(InputError, match=match):
        position.parse_distribution(values, "p")


@pytest.mark.parametrize("name", position.PRESETS)
def test_presets_are_valid_distributions(name):
    p, q = position.preset(name, seed=7)
    for v in (p, q):
        assert min(v) >= 0 and abs(sum(v) - 1) < 1e-12
        assert position.parse_distribution(v, "p").note is None
    a = theory.acceptance_rate(p, q)
    expected = {"textbook": 0.7, "p == q": 1.0, "disjoint supports": 0.0, "one-hot q": 0.3}
    if name in expected:
        assert a == pytest.approx(expected[name], abs=1e-12)


@pytest.mark.parametrize("bug", [None, *[b for b in BUGS if b != "wrong_bonus_row"]])
def test_sample_position_follows_the_exact_law_of_each_bug(bug):
    """The page's sampler feeds each verifier exactly as theory.position_law assumes."""
    p, q = np.array([0.1, 0.6, 0.1, 0.2]), np.array([0.4, 0.1, 0.4, 0.1])
    K = 3
    draws = position.sample_position(p, q, 50_000, K, bug, seed=[5, 0])
    law = theory.position_law(p, q, bug, K=K)
    test = stats.chi_square(np.bincount(draws.first_tokens, minlength=4), law)
    assert test.passed, (bug, test)


def test_sample_position_rejects_bad_settings():
    with pytest.raises(InputError, match="K: expected drafts per row in"):
        position.sample_position(REF_P, UNIFORM, 10, 0, None, 0)
    with pytest.raises(InputError, match="bug"):
        position.sample_position(REF_P, UNIFORM, 10, 1, "nonsense", 0)


def test_trace_table_tells_the_story_of_one_row():
    outcomes = set()
    for i in range(20):
        draws = position.sample_position(REF_P, UNIFORM, 1, 3, None, seed=[0, i])
        *drafts, last = position.trace_table(draws, REF_P, UNIFORM)
        for r in drafts:
            assert (r["outcome"] == "accepted") == (r["u"] < r["p/q"])
            assert r["p/q"] == pytest.approx(r["p(x)"] / r["q(x)"])
        accepted = sum(r["outcome"] == "accepted" for r in drafts)
        assert [r["outcome"] for r in drafts] == ["accepted"] * accepted + ["rejected"] * (len(drafts) - accepted)
        assert last["step"] == f"slot {accepted}"  # the replacement or bonus lands after the accepted run
        assert last["outcome"].startswith("bonus" if accepted == 3 else "replacement")
        first = drafts[0]["token"] if accepted else last["token"]
        assert first == draws.first_tokens[0]
        outcomes.add(accepted)
    assert len(outcomes) >= 3  # the seeds cover rejections at several positions and full acceptance


@pytest.mark.parametrize(
    "probs",
    [REF_P, np.array([0.0, 0.2, 0.0, 0.3, 0.5, 0.0, 0.0]), np.array([0.0, 0.0, 1.0]), np.full(111, 1 / 111)],
)
def test_draw_iid_agrees_with_sample_rows(probs):
    """The shared-CDF sampler is the package's inverse-CDF rule, token for token."""
    u = np.concatenate([np.random.default_rng(3).random(5000), [0.0, 1 - 2**-53]])  # (n,), both ends included
    expected = sample_rows(np.broadcast_to(probs, (u.size, probs.size)), u)
    np.testing.assert_array_equal(position.draw_iid(probs, u), expected)
    np.testing.assert_array_equal(position.draw_iid(probs, u.reshape(-1, 1)), expected.reshape(-1, 1))


# --- typed text, presets shown, "show me" -----------------------------------------------------------


@pytest.mark.parametrize(
    "text, values, note",
    [
        ("1e-3, 1/2, 50%, 0.02", [0.001, 0.5, 0.5, 0.02], "normalized: sum was 1.021"),
        ("0.5 0.3 0.15 0.05", [0.5, 0.3, 0.15, 0.05], "they sum to 1"),
        ("25%;25%\n25%  25%", [0.25] * 4, "they sum to 1"),
        ("1/3, 1/3, 1/3", [1 / 3] * 3, "read 3 values (1/3 → 0.333333"),
        ("2 1 1", [2.0, 1.0, 1.0], "normalized: sum was 4, each value divided by it"),
    ],
)
def test_parse_text_reads_every_form_and_says_what_it_did(text, values, note):
    parsed = position.parse_text(text, "p")
    np.testing.assert_allclose(parsed.values, values, rtol=1e-15)
    np.testing.assert_allclose(parsed.dist.probs, np.array(values) / sum(values), rtol=1e-12)
    assert parsed.message.startswith(f"read {len(values)} values")
    assert note in parsed.message


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "q: expected numbers such as 0.25, 1/4, 25% or 2.5e-1, separated by commas or spaces, got an empty text"),
        ("0.5, abc", r"q: expected numbers .*, got 'abc' \(item 2\)"),
        ("1/0, 1", r"got '1/0' \(item 1\)"),
        ("0.5, inf", r"q: expected finite numbers, got 'inf' \(item 2\)"),
        ("0.5, -1/2", "q: expected non-negative probabilities, got -0.5 for token 1"),
        ("0 0", "q: expected at least one positive entry"),
        ("1e308 1e308", "q: expected entries whose sum is a finite number"),
    ],
)
def test_parse_text_names_the_field_and_the_bad_item(text, match):
    with pytest.raises(InputError, match=match):
        position.parse_text(text, "q")


def test_parse_distribution_refuses_a_sum_that_overflows():
    with pytest.raises(InputError, match="p: expected entries whose sum is a finite number"):
        position.parse_distribution([1e308, 1e308, 0, 0], "p")


@pytest.mark.parametrize("name", position.PRESETS)
def test_matching_preset_names_the_loaded_preset_and_nothing_else(name):
    p, q = position.preset(name, seed=3)
    assert position.matching_preset(p, q, seed=3) == name
    edited = list(p)
    edited[0] += 0.01
    assert position.matching_preset(edited, q, seed=3) is None
    assert position.matching_preset(p + [0.0], q + [0.0], seed=3) is None  # one more token: your own table


@pytest.mark.parametrize("bug", list(BUGS))
def test_show_me_finds_where_a_bug_is_visible_or_proves_there_is_nowhere(bug):
    where = position.show_me(bug)
    tvs = {}
    for name in position.PRESETS:
        p, q = position.preset(name, position.SHOW_ME_SEED)
        for K in range(1, position.MAX_POSITION_K + 1):
            law = theory.position_law(p, q, bug, K=K)
            tvs[name, K] = None if law is None else theory.total_variation(law, p)
    if where is None:  # no one-position effect: every candidate has TV 0 or no single-position law
        assert all(tv is None or tv <= position.SHOWN_TV for tv in tvs.values())
        assert bug in ("shared_uniform", "no_bonus", "wrong_bonus_row", "bonus_row_before")
    else:
        p, q = position.preset(where.preset, position.SHOW_ME_SEED)
        assert where.tv == pytest.approx(tvs[where.preset, where.K], abs=1e-15) and where.tv > 0.05
        assert where.tv == pytest.approx(max(tv for tv in tvs.values() if tv is not None), abs=1e-12)


def test_unclamped_residual_hides_in_the_reference_example_and_shows_with_one_hot_q():
    """The lesson the page states: TV 0 on the default preset, > 0 where show_me sends you."""
    law = theory.position_law(REF_P, UNIFORM, "unclamped_residual", K=1)
    assert theory.total_variation(law, REF_P) < 1e-12
    assert position.show_me("unclamped_residual").preset == "one-hot q"


def test_wrong_bonus_row_samples_p_when_every_row_has_k_drafts():
    """The exact page says so for this bug (no single-position law): with equal draft counts it is invisible."""
    p, q = np.array([0.1, 0.6, 0.1, 0.2]), np.array([0.4, 0.1, 0.4, 0.1])
    draws = position.sample_position(p, q, 50_000, 3, "wrong_bonus_row", seed=[5, 0])
    test = stats.chi_square(np.bincount(draws.first_tokens, minlength=4), p)  # level 0.001, critical value 16.27
    assert test.passed and test.conclusive, test
    correct = position.sample_position(p, q, 50_000, 3, None, seed=[5, 0])
    np.testing.assert_array_equal(draws.first_tokens, correct.first_tokens)  # same uniforms, same tokens
    # negative control: the same test on resample_from_p, whose law is TV 0.14 from p here, fails
    bad = position.sample_position(p, q, 50_000, 3, "resample_from_p", seed=[5, 0])
    assert not stats.chi_square(np.bincount(bad.first_tokens, minlength=4), p).passed


# --- Why it is exact's typed texts and samples, read and counted without Streamlit -------------------


def test_read_texts_reads_each_typed_text_and_leaves_an_empty_one_alone():
    read = position.read_texts({"p": "1/2, 30%, 0.15, 5e-2", "q": "  "})
    assert list(read.values) == ["p"] and read.values["p"] == pytest.approx([0.5, 0.3, 0.15, 0.05])
    assert list(read.notes) == ["p"] and read.notes["p"].startswith("read 4 values") and read.errors == []
    bad = position.read_texts({"p": "0.5, banana", "q": "1 1"})  # q's sum 2: read as typed, with a note
    assert list(bad.values) == ["q"] and bad.values["q"] == [1.0, 1.0] and "divided" in bad.notes["q"]
    assert len(bad.errors) == 1 and "banana" in str(bad.errors[0]) and list(bad.notes) == ["q"]


def test_samples_count_first_tokens_and_trace_only_a_single_draw():
    p, q = np.array(position.REFERENCE_P), np.full(4, 0.25)
    s = position.Samples(("key",), 4)
    assert s.total == 0 and s.freq is None
    many = position.sample_position(p, q, 1_000, 1, None, [0, 0])
    s.add(many, p, q)
    assert s.total == 1_000 and s.trace is None and s.single is None and s.clicks == 1
    np.testing.assert_array_equal(s.counts, np.bincount(many.first_tokens, minlength=4))
    one = position.sample_position(p, q, 1, 1, None, [0, 1])
    s.add(one, p, q)
    assert s.total == 1_001 and s.single == int(one.first_tokens[0])
    assert str(s.trace) == str(position.trace_table(one, p, q))  # str: the trace holds a NaN p/q
    assert s.freq is not None and s.freq.sum() == pytest.approx(1.0)
    s.reset()
    assert (s.total, s.clicks, s.trace, s.single, s.key) == (0, 0, None, None, ("key",))
