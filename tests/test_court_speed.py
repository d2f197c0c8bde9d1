"""The court's fast paths give the plain search's numbers to the bit.

Four shortcuts make the Verifiers page's own-p-and-q click answer within its budget
(specviz.proof.boxes and specviz.proof.court): a bisection probes several halvings per verifier call,
rows with the same inputs are searched once, the tree court reuses one context's cells after
every context with the same rows, and a problem's breakpoints are listed once for every
rule. Each test runs the fast path and the plain one (the shortcut switched off) and compares every
number the court returns, bit for bit, together with the work the budget counts (boxes probed,
verifier rows charged), so ``max_evals`` refuses exactly where it did.
"""

from __future__ import annotations

import numpy as np
import pytest

from specviz import InputError
from specviz.proof import boxes, court
from specviz.proof.exact import verifier_law
from specviz.proof.markov import Drafter
from specviz.verifiers.tree import multi_draft_parents, verify_tree

PQ3 = ((0.5, 0.3, 0.15, 0.05), (0.25, 0.25, 0.25, 0.25), 3)  # the page's default pair at K = 3
RULES = ("chain", "block", "sample-and-match", "block, lossy last threshold", "ratio threshold (p/q >= 1/2)")


def exact_numbers(rule, pb, **kw):
    """Every number of the rule's exact law, or the court's refusal (a result too)."""
    if kw:  # a budget asked for: the refusal must surface
        res = verifier_law(court.RULES[rule], pb.target, pb.drafter, L=pb.L, num_draft=pb.num_draft, K=pb.K, **kw)
        return res.evaluations
    try:
        res = verifier_law(court.RULES[rule], pb.target, pb.drafter, L=pb.L, num_draft=pb.num_draft, K=pb.K)
    except InputError as e:
        return str(e)
    return (res.law.tobytes(), res.unresolved, res.expected_tokens.tobytes(), res.boxes, res.evaluations, res.audited)


def plain(monkeypatch):
    monkeypatch.setattr(boxes, "BISECT_LEVELS", 1)  # one halving per call: the search as it was
    monkeypatch.setattr(boxes, "_shared", lambda *a: None)  # every row searched on its own
    monkeypatch.setattr(court, "BISECT_LEVELS", 1)
    boxes._BPS_CACHE.clear()


@pytest.mark.parametrize("problem", ["pq3", "toy", "reference", "ragged"])
def test_box_search_fast_path_is_the_plain_search_to_the_bit(problem, monkeypatch):
    pb = court.pair_problem(*PQ3) if problem == "pq3" else court.problem(court.toy_problem() if problem == "toy"
                                                                           else problem)  # fmt: skip
    fast = {r: exact_numbers(r, pb) for r in RULES}
    plain(monkeypatch)
    slow = {r: exact_numbers(r, pb) for r in RULES}
    assert fast == slow


def test_twin_rows_are_searched_once():
    # Negative control of the comparison above: the shortcut must actually run (fewer verifier rows
    # evaluated than charged), or the test compares the plain search with itself.
    pb = court.pair_problem(*PQ3)
    calls = []
    real = court.RULES["chain"]

    def counting(*args, **kw):
        calls.append(args[0].shape[0])
        return real(*args, **kw)

    res = verifier_law(counting, pb.target, pb.drafter, L=pb.L, num_draft=pb.num_draft, K=pb.K)
    assert sum(calls) < res.evaluations


def test_refusal_at_the_same_budget(monkeypatch):
    pb = court.pair_problem(*PQ3)
    need = exact_numbers("block", pb)[4]  # rows the search charges
    exact_numbers("block", pb, max_evals=need)  # within budget: answers
    with pytest.raises(InputError, match="max_evals"):
        exact_numbers("block", pb, max_evals=need - 1)
    plain(monkeypatch)
    assert exact_numbers("block", pb)[4] == need
    with pytest.raises(InputError, match="max_evals"):
        exact_numbers("block", pb, max_evals=need - 1)


def test_missed_piece_falls_back_to_the_plain_search(monkeypatch):
    # A coin rescaled as 7u mod 1: its pieces are narrower than the line search's points, so the first
    # audit finds misses and the shared search hands over to the plain one (same result either way).
    real = court.RULES["chain"]

    def rescaled(tp, dp, dt, nd, *, uniforms, **kw):
        from specviz.verifiers.verify import Uniforms

        return real(tp, dp, dt, nd, uniforms=Uniforms(np.mod(7.0 * uniforms.accept, 1.0), uniforms.sample), **kw)

    pb = court.pair_problem((0.6, 0.4), (0.3, 0.7), 2)

    def numbers():
        try:
            res = verifier_law(rescaled, pb.target, pb.drafter, L=pb.L, num_draft=pb.num_draft, K=pb.K)
        except InputError as e:
            return str(e)
        return (res.law.tobytes(), res.unresolved, res.boxes, res.evaluations, res.audited)

    fast = numbers()
    plain(monkeypatch)
    assert numbers() == fast


def test_tree_court_fast_paths_are_the_plain_ones_to_the_bit(monkeypatch):
    # Fast: several halvings per call, and one context's cells reused after every context with the same rows
    # (only for verify_tree itself). Plain: one halving per call, and a wrapper, so nothing is reused.
    cases = [(court.pair_problem(*PQ3), multi_draft_parents(2, 3), "argmax"),
             (court.toy_problem(), multi_draft_parents(2, 2), "sample")]  # fmt: skip

    def numbers(verifier):
        out = []
        for pb, par, mode in cases:
            j = court.judge_tree(pb.target, Drafter(pb.drafter.chain, mode), par, L=pb.L, verifier=verifier)
            out.append((j.law.tobytes(), j.tv_from_target, j.expected_tokens_per_step, j.lossless))
        return out

    fast = numbers(None)
    plain(monkeypatch)
    assert numbers(lambda *a, **kw: verify_tree(*a, **kw)) == fast
