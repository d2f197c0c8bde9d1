"""``python -m specviz prove --kind chain|block|tree``: each kind's verifier against its own controls.

Small N (20,000 sequences, level 0.001, one or two scenarios): enough power at TV 0.05 on the
reference scenario, so every verdict below is conclusive; the exact court decides beside it.
"""

from __future__ import annotations

import pytest

from specviz import cli
from specviz.proof import controls, prove

pytestmark = pytest.mark.heavy  # prove runs through the CLI: left out of the quick subset

# --timeout 0: the exact court on the L = 3 tree takes tens of seconds of CPU, and on a loaded machine its
# 60 s wall-clock limit turned a row into "refused" (seen with 2 of 3 rows caught under load 15).
FAST = ["--n", "20000", "--quiet", "--scenarios", "reference", "--timeout", "0"]


def flat(text: str) -> str:
    """The output with its wrapping undone (the CLI wraps prose at 100 columns): one space between words."""
    return " ".join(text.split())


def test_block_kind_passes_verify_block_and_catches_its_controls(capsys):
    rc = cli.main(["prove", "--kind", "block", "--verifier", "specviz.verifiers.block:verify_block", *FAST])
    out = capsys.readouterr().out
    assert rc == cli.EXIT_OK, out
    n = len(controls.kind_controls("block"))
    assert n == 3 and f"{n} of {n} bugs run on these scenarios were caught" in flat(out)
    assert "Exact court (block)" in out
    court_rows = [line for line in out.splitlines() if line.startswith("reference ") and "caught" in line]
    assert len(court_rows) >= 2 * n  # each control caught by the sampled tests and by the court


def test_block_kind_fails_the_lossy_last_threshold_with_an_explanation(capsys):
    rc = cli.main(["prove", "--kind", "block", "--verifier", "specviz.verifiers.block:verify_block_lossy", *FAST])
    out = capsys.readouterr().out
    assert rc == cli.EXIT_FAIL
    assert "FAIL reference / specviz.verifiers.block:verify_block_lossy:" in out
    assert "nearest known bugs by TV to the observed law: block_lossy_last" in flat(out)  # its own law is nearest
    assert "is lossy by the exact court on reference: TV 0.0768" in flat(out)


def test_chain_verifier_as_block_fails_on_tokens_per_step(capsys):
    # The chain is lossless but keeps fewer drafts: held to block's exact tokens it fails, law passing.
    rc = cli.main(
        ["prove", "--kind", "block", "--verifier", "specviz.verifiers.verify:verify", "--bugs", "none", *FAST]
    )
    out = capsys.readouterr().out
    assert rc == cli.EXIT_FAIL and "the law passes and only tokens per step fail" in flat(out)


def test_tree_kind_runs_trees_through_the_court(capsys):
    rc = cli.main(["prove", "--kind", "tree", *FAST])
    out = capsys.readouterr().out
    assert rc == cli.EXIT_OK, out
    assert "tree [-1, 0, 0] sample L=2" in out and "tree_resample_from_p" in out
    rows = [line for line in out.splitlines() if line.startswith("tree [")]
    assert sum(line.endswith(" pass") for line in rows) == len(prove.TREE_PROBLEMS)
    assert sum(line.endswith(" caught") for line in rows) == len(prove.TREE_PROBLEMS)


def test_tree_kind_fails_a_tree_mistake_given_as_the_verifier(capsys):
    rc = cli.main(["prove", "--kind", "tree", "--verifier", "specviz.proof.controls:_tree_resample_from_p",
                   "--bugs", "none", *FAST])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == cli.EXIT_FAIL and "is lossy by the exact court on tree [-1, 0, 0] sample L=2" in flat(out)


@pytest.mark.parametrize("kind", ["bogus", "Block", ""])
def test_bad_kind_exits_2_naming_kind(kind, capsys):
    assert cli.main(["prove", "--kind", kind]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "--kind" in err and "chain, block, tree" in err


def test_bugs_of_another_kind_are_refused(capsys):
    assert cli.main(["prove", "--kind", "block", "--bugs", "shared_uniform", *FAST]) == cli.EXIT_USAGE
    assert "bugs: expected names from: block_lossy_last" in capsys.readouterr().err


def test_tree_kind_takes_a_verify_signature_tree_verifier_too(capsys):
    rc = cli.main(
        ["prove", "--kind", "tree", "--verifier", "specviz.verifiers.tree:verify_tree_chain", "--bugs", "none", *FAST]
    )
    out = capsys.readouterr().out
    assert rc == cli.EXIT_OK, out
    row = next(line for line in out.splitlines() if line.startswith("reference ") and "verify_tree_chain" in line)
    assert row.endswith(" pass")  # judged by court.judge on the scenario: a chain-shaped tree


def test_json_carries_the_kind_and_the_courts_rows(capsys):
    import json

    rc = cli.main(["prove", "--kind", "block", "--json", "--bugs", "block_residual_from_p", *FAST])
    data = json.loads(capsys.readouterr().out)
    assert rc == cli.EXIT_OK and data["kind"] == "block" and data["verifier"] == "verify_block"
    by = {e["verifier"]: e for e in data["exact"]}
    assert by["verify_block"]["verdict"] == "pass" and by["verify_block"]["tv"] < 1e-12
    assert by["block_residual_from_p"]["verdict"] == "caught" and by["block_residual_from_p"]["tv"] > 0.2
