"""Each kind of verifier's negative controls: its classic mistakes, each the rule with one step swapped.

# B rows, K drafts, V vocabulary, N tree nodes

"chain": the catalogue :data:`specviz.proof.bugs.BUGS`. "block": block verification's mistakes
(:mod:`specviz.proof.block_trace`) and the lossy last threshold. "tree": tree verification's
mistakes, with :func:`specviz.verifiers.tree.verify_tree`'s signature. The registry
(:mod:`specviz.proof.registry`) names each kind's controls through :func:`kind_controls`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..errors import InputError
from ..verifiers import reference
from .bugs import BUGS, Bug

KINDS = ("chain", "block", "tree")


def _named(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    out = functools.partial(fn)
    out.__name__ = name  # type: ignore[attr-defined]
    return out


def reset_to_target(r: Any, q: Any, y: Any, M: Any, p: Any) -> Any:
    """tree_resample_from_p: after a rejection r becomes the node's target row p, not (r - M q)+."""
    return p.copy()


# Tree verification whose r is reset to the node's target row after a rejection (a mistake):
# the tree reference with its residual step swapped (verify_tree's signature).
_tree_resample_from_p = reference.with_step(reference.verify_tree, "tree_resample_from_p", residual=reset_to_target)


@functools.cache
def kind_controls(kind: str) -> dict[str, Bug]:
    """The negative controls of a kind of verifier: its own classic mistakes, each the rule with
    one step swapped. "chain": :data:`specviz.proof.bugs.BUGS`. "block": :func:`specviz.verifiers.block.verify_block`
    mistakes (:mod:`specviz.proof.block_trace`). "tree": :func:`specviz.verifiers.tree.verify_tree` mistakes, with
    verify_tree's signature (the suite runs them as chain-shaped trees, the court on real trees)."""
    if kind == "chain":
        return BUGS
    if kind == "block":
        from ..verifiers.block import verify_block_lossy
        from .block_trace import Mistake, verify_block_variant

        def variant(m: Mistake) -> Callable[..., Any]:
            short = {"residual_from_p": "block_residual_from_p", "h_without_one_minus_w": "block_h_no_1_minus_w"}
            return _named(functools.partial(verify_block_variant, mistake=m), short[m])

        bugs = [
            Bug("block_lossy_last", "Last threshold min(1, prod p/q) instead of w_j", _named(
                verify_block_lossy, "block_lossy_last"), None, None,
                "The last draft is kept with the uncapped product ratio min(1, P(x^j) / Q(x^j)) instead of w_j, "
                "which caps the running ratio at 1 after every draft. Step (1) of the proof in "
                "specviz.verifiers.block needs "
                "Pr[tau >= j | x^j] = w_j exactly; the product is at least w_j, so full blocks are kept too often "
                "(TV 1/9 on the paper's toy example, 4/3 drafts per step against 11/9).",
                "the exact court and the joint chi-square on random chains", True, False),
            Bug("block_residual_from_p", "Token after a stop drawn from p_tau", variant("residual_from_p"), None, None,
                "After stopping at tau < j the extra token is drawn from p_tau instead of the residual "
                "(w_tau p_tau - q_tau)+ normalized: the tokens acceptance already produces come out again.",
                "the exact court and every chi-square test", True, False),
            Bug("block_h_no_1_minus_w", "Thresholds without the 1 - w_i term", variant("h_without_one_minus_w"),
                None, None,
                "h_i = m_i / m_i instead of m_i / (m_i + 1 - w_i): the chance that the block fails after x^i is "
                "left out, every threshold before the last is 1 and the block keeps at least j - 1 drafts "
                "whatever the target says.",
                "the exact court, every chi-square test and tokens per step", True, False),
        ]  # fmt: skip
        return {b.name: b for b in bugs}
    if kind == "tree":
        bugs = [
            Bug("tree_resample_from_p", "Reset r to p after a rejection", _named(_tree_resample_from_p,
                "tree_resample_from_p"), None, None,
                "After a rejected candidate r is reset to the node's target row instead of the residual "
                "(r - q)+ normalized: the next candidate, or the final draw, is judged against a law that still "
                "counts the mass the rejected candidate could have taken.",
                "the exact court on trees and every chi-square test", True, False),
        ]  # fmt: skip
        return {b.name: b for b in bugs}
    raise InputError("kind", "one of " + ", ".join(KINDS), repr(kind))

