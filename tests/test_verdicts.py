"""Three verdicts, each on its own line with its own exit status (issue 27, points 1 and 4).

*law* (the output distribution), *support* (a token with p = 0 or an id outside [0, V) can come
out: said with the coin, the token's probability and the rate per draw), *policy* (what the call
does with invalid input: a warning unless --strict). Tokens per step are judged only against a
rule the run names (--rule); otherwise they are efficiency. Each kind: a one-line defect fails it
and the engine passes it. The design brief's verifier and sample-and-match, through the CLI, on
small fixtures (N = 20,000 on the reference scenario, no negative controls: seconds each).
"""

from __future__ import annotations

import contextlib
import functools
import io

import numpy as np
import pytest

from specviz import cli, verify
from specviz.proof import theory
from specviz.proof.blackbox import blackbox_tests
from specviz.proof.handover import CallSpec
from specviz.proof.markov import Drafter, MarkovChain
from specviz.proof.probes import run_probes
from specviz.proof.prove import plan, run_case, run_suite
from specviz.proof.verdicts import exit_status, law_verdict, policy_verdict, summary, support_verdict
from tests import brief_verifiers as bv
from tests import user_verifiers as uv

FAST = ["--n", "20000", "--scenarios", "reference", "--bugs", "none"]


def flat(text: str) -> str:
    return " ".join(text.split())


def prove(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["prove", "--quiet", *args])
    return code, out.getvalue()


def verdict_line(out: str, kind: str) -> str:
    """The verdict's own line (its first), unwrapped."""
    text = out.split("\n" + kind + " ")[1]  # the first: the summary line may wrap onto a line of its own
    return flat(kind + " " + text.split("\n")[0])


@pytest.fixture(scope="module")
def engine_probes():
    return run_probes(verify)


# --- one verdict kind each: a one-line defect fails it, the engine passes it --------------------------


def test_law_fails_a_one_step_mistake_and_passes_the_engine(engine_probes):
    # q of row b + 1 read for row b: each row's law depends on its neighbour (a law probe sees it).
    bad = law_verdict(None, run_probes(uv.engine_misaligned_q))
    assert bad.status == "FAIL" and bad.fails and bad.headline.startswith("probe batch_invariance: a row's tokens")
    assert law_verdict(None, engine_probes, headline_ok="every law probe passes").status == "OK"
    good = law_verdict(run_suite(plan(["reference"], []), verify, n=20_000), engine_probes)
    assert good.status == "OK" and not good.fails and good.headline.startswith("1 case passes; detects TV >= 0.03")


def test_support_fails_the_inclusive_coin_naming_coin_rate_and_fix(engine_probes):
    bad = support_verdict(run_probes(uv.engine_leq))  # accept iff u * q <= p
    assert bad.status == "FAIL" and bad.fails
    assert bad.headline.startswith("coin 0.0 accepts draft 3 with p = 0 (2^-53 per draw): tokens [3, ")
    assert "fix: accept iff u * q(x) < p(x), strictly" in bad.details[0]
    assert support_verdict(engine_probes).status == "OK"
    # float32 coins are 0 once in 2^24 draws: the rate follows the dtype the verifier is called in.
    f32 = support_verdict(run_probes(uv.engine_leq, CallSpec("float32", "numpy")))
    assert "(2^-24 per draw)" in f32.headline


def test_policy_warns_where_validation_is_off_and_strict_makes_it_fail(engine_probes):
    unchecked = functools.partial(verify, validate=False)  # the engine with its input checks off
    probes = run_probes(unchecked)
    warn = policy_verdict(probes)
    # Its draws still refuse NaN, inf and negative weights; a row summing to 2 goes through.
    assert warn.status == "warning" and not warn.fails and warn.headline == "no check for rows not summing to 1"
    assert [(p.name, p.verdict) for p in probes if p.warned] == [("unnormalized_row", "warn")]
    assert "returned tokens" in next(p.detail for p in probes if p.warned)
    assert policy_verdict(probes, strict=True).status == "FAIL"
    assert exit_status([policy_verdict(probes)]) == 0 and exit_status([policy_verdict(probes, strict=True)]) == 1
    ok = policy_verdict(engine_probes)
    assert ok.status == "OK" and "NaN, inf, negative entries" in ok.headline
    assert not [p for p in engine_probes if p.failed or p.warned]
    assert {p.kind for p in engine_probes} == {"law", "support", "policy"}


def test_the_summary_joins_the_three():
    probes = run_probes(bv.brief_explicit)
    line = summary([law_verdict(None, headline_ok="TV <= 1e-4 certified at V = 32000"), support_verdict(probes),
                    policy_verdict(probes)])  # fmt: skip
    assert line == ("law OK (TV <= 1e-4 certified at V = 32000) · support FAIL: coin 0.0 of the bonus draw emits "
                    "token 0 with p = 0 (2^-53 per draw) · policy: no check for NaN, inf, negative entries, rows "
                    "not summing to 1 (warning)")  # fmt: skip


# --- the design brief's verifier, fed explicit uniforms, at V = 4 ------------------------------------------


def test_brief_verifier_law_ok_support_fail_at_coin_zero_policy_warnings_exit_1():
    code, out = prove("--verifier", "tests.brief_verifiers:brief_explicit", *FAST)
    assert code == cli.EXIT_FAIL, out
    assert verdict_line(out, "law").startswith("law OK: 1 case passes")
    assert verdict_line(out, "support") == ("support FAIL: coin 0.0 of the bonus draw emits token 0 with p = 0 "
                                            "(2^-53 per draw)")  # fmt: skip
    assert "fix: count cumsum <= u * total in the inverse CDF" in flat(out)
    assert verdict_line(out, "policy").startswith("policy warning: no check for NaN, inf")
    assert "NOT OK" not in out  # no probe failure is one undifferentiated NOT OK any more


def test_brief_verifier_with_the_fix_exits_0_and_strict_counts_its_policy():
    code, out = prove("--verifier", "tests.brief_verifiers:brief_fixed", *FAST)
    assert code == cli.EXIT_OK, out
    assert "support OK" in out and "policy warning: no check for NaN" in flat(out)
    code, out = prove("--verifier", "tests.brief_verifiers:brief_fixed", "--strict", *FAST)
    assert code == cli.EXIT_FAIL and "policy FAIL: no check for NaN" in flat(out), out


def test_boundary_draw_probe_names_the_draw_and_the_fixed_inverse_cdf_passes():
    (bad,) = [p for p in run_probes(bv.brief_explicit) if p.name == "boundary_draw"]
    assert bad.kind == "support" and bad.failed
    assert "coin 0.0 of the replacement draw emits token 0 with p = 0" in bad.detail
    (good,) = [p for p in run_probes(bv.brief_fixed) if p.name == "boundary_draw"]
    assert good.verdict == "ok"


# --- the law is the law: tokens per step against a rule only when one is named ---------------------------


def test_sample_match_passes_the_law_with_its_efficiency_stated():
    code, out = prove("--verifier", "tests.brief_verifiers:sample_match_rng_only", *FAST)
    assert code == cli.EXIT_OK, out
    assert verdict_line(out, "law").startswith("law OK")
    assert "efficiency (no --rule, so not a verdict)" in flat(out)
    assert "Off the residual rule's figure in reference" in flat(out)
    # It draws from rng: interception hands it the probes' coins, and it emits no token with p = 0.
    assert "support OK" in flat(out) and "the verifier draws its own randomness" in flat(out)


def test_sample_match_under_the_residual_rule_fails_tokens_per_step_saying_the_law_holds():
    code, out = prove("--verifier", "tests.brief_verifiers:sample_match_rng_only", "--rule", "residual", *FAST)
    assert code == cli.EXIT_FAIL, out
    law = verdict_line(out, "law")
    assert law.startswith("law FAIL: tokens per step") and "by the residual rule" in law
    assert "the output law holds" in flat(out)
    # Held to its own rule it passes; the engine held to sample-and-match's figure fails.
    code, out = prove("--verifier", "tests.brief_verifiers:sample_match_rng_only", "--rule", "sample-match", *FAST)
    assert code == cli.EXIT_OK, out
    res = run_case("reference", verify, n=20_000, rule="sample-match")
    assert res.verdict == "FAIL" and res.joint.passed and res.tokens_failed


def test_a_tokens_only_mistake_is_judged_only_under_a_rule():
    from specviz.proof.bugs import BUGS

    fn = BUGS["no_bonus"].verifier  # keeps the law, drops the bonus: fewer tokens per step
    assert run_case("textbook", fn, n=20_000).verdict == "pass"
    assert run_case("textbook", fn, n=20_000, rule="residual").verdict == "FAIL"
    assert run_case("textbook", bug=BUGS["no_bonus"], n=20_000).verdict == "caught"  # controls: their rule


def test_bad_rule_exits_2(capsys):
    assert cli.main(["prove", "--quiet", "--rule", "greedy"]) == cli.EXIT_USAGE
    assert cli.main(["prove", "--quiet", "--rule", "residual", "--kind", "block"]) == cli.EXIT_USAGE
    assert "--rule: expected no rule with --kind block or tree" in capsys.readouterr().err


def test_sample_match_expected_tokens_closed_form():
    p, q = np.array(theory.REFERENCE_P), np.array(theory.REFERENCE_Q)
    chain = lambda row: MarkovChain(np.tile(row, (len(row) + 1, 1)))  # noqa: E731 - the same row after every token
    for rule, a in (("residual", np.minimum(p, q).sum()), ("sample-match", (p * q).sum())):
        table = theory.chain_expected_tokens(chain(p), Drafter(chain(q), "sample"), 3, rule=rule)
        assert table[0, 3] == pytest.approx(theory.expected_tokens(a, 3), abs=1e-12)
    with pytest.raises(ValueError, match="rule"):
        theory.chain_expected_tokens(chain(p), Drafter(chain(q), "sample"), 3, rule="greedy")


# --- black-box: output laws always, acceptance and replacements under a rule -----------------------------


@pytest.mark.parametrize("rule", [None, "residual", "sample-match"])
def test_blackbox_holds_sample_match_to_output_laws_and_a_named_rule(rule):
    spec = CallSpec("float64", "numpy")
    box = blackbox_tests(bv.sample_match_rng_only, V=20, K=2, spec=spec, n=20_000, rule=rule)
    first = box.checks[0]
    assert first.part == "first token" and first.passed and first.conclusive
    failed = {c.part for c in box.failed}
    if rule is None:
        assert not failed and "keeps 0.04" in box.efficiency() and "sum min(p, q) = 0.499" in box.efficiency()
    elif rule == "residual":
        assert {"acceptance", "replacement at 0"} <= failed
    else:
        assert not failed
        engine = blackbox_tests(verify, V=20, K=2, spec=spec, n=20_000, rule=rule)
        assert [c.part for c in engine.failed] == ["acceptance"]  # negative control for the rule's check


def test_the_docs_show_what_prove_prints():
    # docs/proof.md's "Three verdicts" block is the tail of this very run, line for line.
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "proof.md").read_text()
    block = doc.split("## Three verdicts")[1].split("```\n")[1]
    code, out = prove("--verifier", "tests.brief_verifiers:brief_explicit", *FAST)
    assert code == cli.EXIT_FAIL and out.endswith(block) and block.startswith("law OK: 1 case passes")


def test_sampled_tokens_with_p_zero_are_a_support_failure_of_an_rng_only_verifier():
    from specviz.proof.blackbox import blackbox_tests
    from specviz.proof.ship import prove_shipped

    spec = CallSpec("float64", "numpy")
    # Coins floored to multiples of 2^-8 (a bfloat16-like coin): exactly 0 once in 256 draws, where the
    # brief's inverse CDF emits token 0 though p(0) = 0. Sampling sees it: tokens with p = 0 come out.
    box = blackbox_tests(bv.brief_coarse_rng, V=20, K=2, spec=spec, n=20_000)
    assert any(c.law and c.impossible for c in box.checks), box.lines()
    fixed = blackbox_tests(bv.brief_coarse_fixed_rng, V=20, K=2, spec=spec, n=20_000)
    assert not any(c.impossible for c in fixed.checks), fixed.lines()  # the negative control
    # And interception hands it a coin of exactly 0 at once: the support verdict fails at the probe.
    bad = prove_shipped(bv.brief_coarse_rng, V=20, K=2, spec=spec, blackbox_rows=20_000).verdicts()[1]
    assert bad.status == "FAIL" and "with p = 0" in bad.headline, bad
