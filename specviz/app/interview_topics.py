"""The facts behind the interview's later questions, each computed from the package's own rules.

# B rows, K drafts, V vocabulary, L context length

- why stop at the first rejection: a draft after a rejected one was drafted in a context that
  the output does not contain; counting it anyway is the ``count_after_rejection`` mistake, whose
  first token follows (1 - (1 - a)^K) min(p, q) / a + (1 - a)^K residual instead of p;
- KV-cache rollback (:func:`kv_rollback`): what the target and the drafter keep after j of K
  drafts are accepted, and how many pages a paged cache frees;
- trees: k chains from the root against a full k-ary tree, both built on the recursive
  residual (after a rejected candidate the node's target becomes (r - q)+ normalized);
- block against token verification on Sun et al.'s toy (10/9 against 11/9 drafts kept);
- what p and q are under temperature, top-k and top-p (the engine mistakes that get it wrong);
- the unclamped residual, where it shows;
- ragged batching: the bonus row of a row with fewer drafts than the padded width.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..errors import InputError
from ..proof import block_trace, court, theory
from ..proof.bugs import BUGS
from ..verifiers import tree
from ..verifiers.processing import Settings, process_logits
from ..verifiers.verify import Uniforms, verify
from .position import show_me

TEXTBOOK_P = np.array(theory.REFERENCE_P)
TEXTBOOK_Q = np.array(theory.REFERENCE_Q)
# The example of the q_unprocessed mistake: a drafter whose temperature changes q (a uniform q would not).
SETTINGS_P, SETTINGS_Q = np.array([0.1, 0.5, 0.4]), np.array([0.3, 0.2, 0.5])


def count_after_rejection_tv(K: int, target_probs=TEXTBOOK_P, draft_probs=TEXTBOOK_Q) -> float:
    """TV from p of the first token when drafts after a rejection still count (exact, theory.position_law)."""
    law = theory.position_law(target_probs, draft_probs, "count_after_rejection", K=int(K))
    return theory.total_variation(law, target_probs)


class Rollback(NamedTuple):
    """One round's effect on the KV caches (positions counted from 0)."""

    target_written: int  # positions the target's cache holds after the verification pass: L + K
    target_kept: int  # L + j: the context and the accepted drafts
    target_dropped: int  # K - j: the rejected draft and every draft after it
    drafter_written: int  # L + K - 1: the drafter fed the new token and its first K - 1 drafts
    drafter_kept: int  # min(L + j, L + K - 1)
    next_target_feed: int  # tokens the next pass feeds before its new drafts: the emitted one (1)
    next_drafter_feed: int  # 1 after a rejection; 2 when all K were accepted (the last draft and the bonus)
    pages_held: int  # ceil(target_written / page)
    pages_kept: int  # ceil(target_kept / page)
    pages_freed: int


def kv_rollback(context: int, K: int, accepted: int, page: int) -> Rollback:
    """The caches after a round with ``context`` tokens before it (the last of them, emitted by the
    previous round, not yet in either cache), K drafts of which the first ``accepted`` survive.

    The verification pass feeds that last token and the K drafts: K + 1 positions whose outputs
    are p_0 .. p_K, so the target's cache ends at L + K. The token this round emits (replacement
    or bonus) has no KV anywhere: it is drawn from p_j, which the pass computed at position
    L + j - 1, and it is the first token the next pass feeds. The drafter fed the last context
    token and x_0 .. x_{K-2} (it sampled x_{K-1} but never fed it).
    """
    L, K, j, P = int(context), int(K), int(accepted), int(page)
    if L < 1 or K < 1 or not 0 <= j <= K or P < 1:
        raise InputError("accepted", "context >= 1, K >= 1, 0 <= accepted <= K, page >= 1",
                         f"context {L}, K {K}, accepted {j}, page {P}")  # fmt: skip
    held, kept = math.ceil((L + K) / P), math.ceil((L + j) / P)
    return Rollback(L + K, L + j, K - j, L + K - 1, min(L + j, L + K - 1), 1, 2 if j == K else 1, held, kept,
                    held - kept)  # fmt: skip


class Shapes(NamedTuple):
    node_acceptance: float  # A_k: one of k i.i.d. candidates accepted, by the recursive residual
    chains: float  # expected accepted drafts of k chains of K from the root
    kary: float  # expected accepted drafts of the full k-ary tree of depth K
    chain: float  # k = 1: a (1 - a^K) / (1 - a)


def tree_shapes(k: int, K: int, target_probs=TEXTBOOK_P, draft_probs=TEXTBOOK_Q) -> Shapes:
    """k chains from the root branch once (A_k at the root, then one chain: a per level); a full
    k-ary tree branches at every node (A_k at every level)."""
    p, q = np.asarray(target_probs, dtype=np.float64), np.asarray(draft_probs, dtype=np.float64)
    A = tree.node_acceptance(p, q, int(k))
    a = theory.acceptance_rate(p, q)
    return Shapes(A, A * sum(a**d for d in range(int(K))), tree.kary_expected_accepted(p, q, int(k), int(K)),
                  theory.expected_tokens(a, int(K)) - 1)  # fmt: skip


class BlockToy(NamedTuple):
    token: float  # drafts kept per step by token (chain) verification: 10/9
    block: float  # by block verification: 11/9
    K: int


def block_toy() -> BlockToy:
    """Sun et al.'s toy: p = (1/3, 2/3), q = (2/3, 1/3), K = 2; exact, from the court's problem."""
    prob = court.toy_problem()
    chain = theory.chain_expected_tokens(prob.target, prob.drafter, prob.K)[0, prob.K] - 1
    block = block_trace.block_expected_tokens(prob.target, prob.drafter, prob.K)[0, prob.K] - 1
    return BlockToy(float(chain), float(block), int(prob.K))


SETTINGS_REQUEST = Settings(temperature=0.7, top_p=0.9)  # the settings question's request; its widget starts here


class RequestTarget(NamedTuple):
    processed: np.ndarray  # (V,) the textbook p after the request's temperature and top-p
    tv: float  # TV(raw p, processed p): what the rule run on the raw target gets wrong (its law is the raw p)


def request_target(temperature: float, top_p: float) -> RequestTarget:
    """The textbook target under a request's temperature and top-p; the question's text and widget both read it."""
    p = np.asarray(process_logits(np.log(TEXTBOOK_P), Settings(temperature=temperature, top_p=top_p)))
    return RequestTarget(p, theory.total_variation(TEXTBOOK_P, p))


class SettingsFacts(NamedTuple):
    target_unprocessed_tv: float  # the rule run on the raw target, the question's request: TV from the processed p
    q_unprocessed_tv: float  # the rule told the drafter's raw q: TV from p


def settings_facts() -> SettingsFacts:
    tu = request_target(SETTINGS_REQUEST.temperature, SETTINGS_REQUEST.top_p)
    qu = theory.position_law(SETTINGS_P, SETTINGS_Q, "q_unprocessed")
    return SettingsFacts(tu.tv, theory.total_variation(qu, SETTINGS_P))


class Unclamped(NamedTuple):
    preset: str
    K: int
    tv: float  # TV(first-token law, p) where the unclamped draw shows most
    textbook_tv: float  # in the textbook example: the negative entries come last there, so it is 0


def unclamped() -> Unclamped:
    where = show_me("unclamped_residual")
    if where is None:  # the catalogue promises a one-position effect; say so loudly if that changes
        raise InputError("unclamped_residual", "a preset where it changes the first token", "none")
    law = theory.position_law(TEXTBOOK_P, TEXTBOOK_Q, "unclamped_residual")
    return Unclamped(where.preset, where.K, where.tv, theory.total_variation(law, TEXTBOOK_P))


class RaggedBonus(NamedTuple):
    rule: int  # the bonus token the rule emits: the target row at num_draft, here token num_draft
    mistake: int  # what wrong_bonus_row emits: the last padded row, token K


def ragged_bonus(num_draft: int, K: int) -> RaggedBonus:
    """One row with ``num_draft`` of K drafts, all accepted, over a target whose row t is one-hot on
    token t: the bonus token names the row it came from."""
    j, K = int(num_draft), int(K)
    if not 0 <= j <= K or K < 1:
        raise InputError("num_draft", f"0 <= num_draft <= K = {K}", str(j))
    V = K + 1
    target = np.eye(V)[None, :, :]  # (1, K+1, V): row t is one-hot on token t
    draft = np.eye(V)[None, :K, :]  # (1, K, V): draft t is token t with q = p, always accepted
    tokens = np.where(np.arange(K) < j, np.arange(K), -1)[None, :]
    u = Uniforms(np.full((1, K), 0.5), np.full(1, 0.5))
    out = [int(np.asarray(fn(target, draft, tokens, np.array([j]), uniforms=u).tokens)[0, j])
           for fn in (verify, BUGS["wrong_bonus_row"].verifier)]  # fmt: skip
    return RaggedBonus(*out)
