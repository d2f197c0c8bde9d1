"""The interview walkthrough: questions, computed answers, and the formulas behind them.

# K drafts, V vocabulary

Each :class:`Question` has a prompt, a way to answer (a choice or a number), the answer as
computed by specviz (never typed in), and a reveal that states the derivation. Numbers in the
reveals are formatted from the same computations, so the text cannot drift from the math.

The formulas (a = acceptance rate, K drafts, c = drafter cost relative to one target pass):

- acceptance rate: a = sum_x min(p(x), q(x)) = 1 - TV(p, q);
- the output law at one position: min(p, q) + (1 - a) * residual = p, with residual
  (p - q)+ / (1 - a); resampling from p instead gives min(p, q) + (1 - a) p, which is not p
  unless a = 1 or p = q;
- tokens per target pass: sum_{i=0..K} a^i = (1 - a^(K+1)) / (1 - a); accepted drafts alone:
  a (1 - a^K) / (1 - a) (the off-by-one trap: one fewer than the tokens per pass);
- wall-time speedup over plain decoding: (1 - a^(K+1)) / ((1 - a)(K c + 1)); at K = 1 it is
  (1 + a) / (1 + c), above 1 iff a > c;
- verification cost: a forward pass over T tokens of a model with N parameters reads about
  2N bytes of weights (16-bit) and does about 2NT floating-point operations, so it takes
  max(2N / bandwidth, 2NT / peak): flat in T while T is below the ridge point
  peak / bandwidth (FLOP per byte). Verifying K + 1 positions for each of B rows costs about
  one decode step while B (K + 1) stays below the ridge; past it the pass becomes
  compute-bound and grows with B (K + 1).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..errors import InputError
from ..proof import theory
from ..verifiers import lossy
from . import interview_topics as topics
from . import speed
from .links import plain

REFERENCE_P = theory.REFERENCE_P  # the textbook example, one definition for the whole project
UNIFORM_Q = theory.REFERENCE_Q
SPEEDUP_EXAMPLE = (0.7, 3, 0.1)  # acceptance a, drafts K, drafter cost c of the speedup question
TYPICAL_EXAMPLE = (lossy.TYPICAL_EPSILON, lossy.TYPICAL_DELTA)  # Medusa's defaults, as on the Verifiers page
# A published accelerator's dense 16-bit peak and memory bandwidth (NVIDIA H100 SXM datasheet:
# 989 TFLOP/s dense BF16, 3.35 TB/s HBM3), used only as a worked example of a ridge point.
EXAMPLE_PEAK_FLOPS = 989e12
EXAMPLE_BANDWIDTH = 3.35e12
KV_EXAMPLE = (60, 8, 2, 16)  # context L, drafts K, accepted j, page size of the KV-cache question
TREE_EXAMPLE = (2, 3)  # candidates per node k, depth of the tree question
RAGGED_EXAMPLE = (2, 4)  # num_draft[b], padded width K of the ragged question
FIRST_REJECTION_CHOICES = (
    "it was drafted after the rejected token: its p and q belong to a context the output does not contain",
    "to save compute: counting it would be just as exact",
    "its coin was already used by draft 2",
    "it is not thrown away: every passing draft counts",
)
TREE_CHOICES = ("p again", "the residual (p − q)₊ normalized", "q", "uniform over the tokens not yet tried")
SETTINGS_CHOICES = (
    "p after the request's temperature and top-p; q exactly as the drafter sampled (temperature 1)",
    "both as raw softmax, before any setting",
    "both after the request's settings",
    "p raw; q after the request's settings",
)
RAGGED_CHOICES = (
    "row num_draft[b], its own next position",
    "row K, the last padded row",
    "row num_draft[b] + 1",
    "the drafter's last row",
)


# --- the formulas ------------------------------------------------------------------------------


def accepted_drafts(acceptance: float, K: int) -> float:
    """Expected accepted drafts per verification: sum_{i=1..K} a^i = a (1 - a^K) / (1 - a)."""
    return theory.expected_tokens(acceptance, K) - 1.0


def speedup(acceptance: float, K: int, draft_cost: float) -> float:
    """(1 - a^(K+1)) / ((1 - a)(K c + 1)): tokens per pass over the cost of a pass plus K drafts."""
    return speed.speedup(theory.expected_tokens(acceptance, K), K, draft_cost)


def best_K(acceptance: float, draft_cost: float, K_max: int = 16) -> int:
    """The K in 1..K_max with the largest :func:`speedup` (the smallest on ties)."""
    if int(K_max) < 1:
        raise InputError("K_max", "at least 1", str(K_max))
    return speed.speedup_table(acceptance, range(1, int(K_max) + 1), draft_cost).best_K


class Roofline(NamedTuple):
    tokens: np.ndarray  # (M,) tokens in one forward pass
    seconds: np.ndarray  # (M,) max(memory time, compute time)
    memory_seconds: float  # 2N / bandwidth
    ridge_tokens: float  # peak / bandwidth: below it the pass is memory-bound


def roofline(params: float, tokens: Sequence[int], *, bandwidth: float = EXAMPLE_BANDWIDTH,
             peak_flops: float = EXAMPLE_PEAK_FLOPS) -> Roofline:  # fmt: skip
    """Time of one forward pass over each token count, for a model of ``params`` parameters."""
    if params <= 0 or bandwidth <= 0 or peak_flops <= 0:
        raise InputError("params", "positive params, bandwidth and peak_flops", f"{params}, {bandwidth}, {peak_flops}")
    t = np.asarray(list(tokens), dtype=np.float64)
    mem = 2.0 * params / bandwidth
    return Roofline(t, np.maximum(mem, 2.0 * params * t / peak_flops), mem, peak_flops / bandwidth)


def verify_cost(batch: int, K: int, *, bandwidth: float = EXAMPLE_BANDWIDTH,
                peak_flops: float = EXAMPLE_PEAK_FLOPS) -> float:  # fmt: skip
    """Cost of verifying K + 1 positions for ``batch`` rows, in decode steps of the same batch.

    The parameter count cancels: max(1, B (K+1) / ridge) / max(1, B / ridge).
    """
    if int(batch) < 1 or int(K) < 0:
        raise InputError("batch", "at least 1 row and K >= 0", f"{batch}, {K}")
    ridge = peak_flops / bandwidth
    return max(1.0, batch * (K + 1) / ridge) / max(1.0, batch / ridge)


def typical_acceptance_law(target_probs: Sequence[float] | np.ndarray, draft_probs: Sequence[float] | np.ndarray,
                           epsilon: float, delta: float) -> np.ndarray:  # fmt: skip
    """Exact first-token law (V,) of typical acceptance with the fallback drawn from p, a lossy rule.

    Medusa's threshold, with :func:`specviz.verifiers.lossy.verify_typical`'s ``fallback="target"``;
    Medusa's own code takes the target's argmax there (``fallback="argmax"``, the Verifiers page's rule).

    The draft x ~ q is accepted iff p(x) > min(epsilon, delta exp(-H(p))); otherwise the token
    is sampled from p. Law: q(x) [x accepted] + (1 - q(accepted set)) p(x).
    """
    p = theory.as_dist(target_probs, "target_probs")
    q = theory.as_dist(draft_probs, "draft_probs")
    h = -float(np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)))
    ok = p > min(epsilon, delta * np.exp(-h))
    return q * ok + (1.0 - float(q[ok].sum())) * p


def shared_coin_two_token_law(target_probs: Sequence[float] | np.ndarray,
                              draft_probs: Sequence[float] | np.ndarray) -> np.ndarray:  # fmt: skip
    """Exact law (V, V) of the first two tokens when one coin is used for both positions of a
    context-free row with K = 2 drafts (the ``shared_uniform`` mistake), drafts i.i.d. from q.

    With one coin u: x1 accepted iff u < r1 = min(1, p(x1)/q(x1)); then x2 iff u < r2. Given
    x1 accepted, u is uniform on [0, r1), so x2 is accepted with probability min(r1, r2)/r1,
    not r2. After a rejection the replacement is from the residual (fresh uniform) and the
    next token comes from a new round, whose first token follows p.
    """
    p = theory.as_dist(target_probs, "target_probs")
    q = theory.as_dist(draft_probs, "draft_probs")
    d = theory.decompose(p, q)
    r = d.accept_prob  # (V,) min(1, p/q)
    V = p.size
    law = np.zeros((V, V))
    res = d.residual
    for x1 in range(V):
        if q[x1] == 0:
            continue
        # x1 rejected: token 1 from the residual, token 2 from a fresh round (law p).
        law += q[x1] * (1 - r[x1]) * np.outer(res, p)
        for x2 in range(V):
            if q[x2] == 0:
                continue
            both = min(r[x1], r[x2])  # P(u < r1 and u < r2)
            law[x1, x2] += q[x1] * q[x2] * both
            law[x1] += q[x1] * q[x2] * (r[x1] - both) * res  # x2 rejected: residual
    return law


# --- the questions -----------------------------------------------------------------------------


class Question(NamedTuple):
    key: str
    title: str
    prompt: str
    kind: str  # "choice" or "number"
    choices: tuple[str, ...]  # for "choice"
    answer: str | float  # the right choice, or the number
    tolerance: float  # accepted |answer - typed| for numbers
    reveal: str  # the derivation, with computed numbers


def _fmt(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}f}"


def questions() -> list[Question]:
    """The walkthrough, in order. Every answer is computed here."""
    p, q = np.array(REFERENCE_P), np.array(UNIFORM_Q)
    d = theory.decompose(p, q)
    a = d.acceptance_rate
    tok3 = theory.expected_tokens(a, 3)
    acc3 = accepted_drafts(a, 3)
    wrong = d.accepted + d.total_variation * p  # resample from p
    tv_wrong = theory.total_variation(wrong, p)
    sa, sK, sc = SPEEDUP_EXAMPLE
    s = speedup(sa, sK, sc)
    bk = best_K(0.8, 0.05)
    bk_table = speed.speedup_table(0.8, range(1, 17), 0.05)
    ridge = EXAMPLE_PEAK_FLOPS / EXAMPLE_BANDWIDTH
    b_small, b_big, k_roof = 8, 256, 4
    cost_small, cost_big = verify_cost(b_small, k_roof), verify_cost(b_big, k_roof)
    eps, delta = TYPICAL_EXAMPLE
    typ = typical_acceptance_law(p, q, eps, delta)
    shared = shared_coin_two_token_law(p, q)
    exact2 = np.outer(p, p)
    tv_shared = theory.total_variation(shared, exact2)
    greedy_argmax = int(np.argmax(p))  # the lowest id among ties, as verify_greedy takes it
    greedy_other = int(np.argsort(-p, kind="stable")[1])
    return [
        Question(
            "acceptance", "Acceptance rate",
            f"Target p = [{', '.join(f'{x:g}' for x in REFERENCE_P)}], draft q uniform over {len(UNIFORM_Q)} tokens. "
            "A draft x is accepted with "
            "probability min(1, p(x)/q(x)). What is the probability that the draft is accepted?",
            "number", (), a, 0.005,
            f"a = Σₓ q(x) · min(1, p(x)/q(x)) = Σₓ min(p(x), q(x)) = {_fmt(a)}. It is also 1 − TV(p, q): "
            f"TV = {_fmt(theory.total_variation(p, q))}.",
        ),
        Question(
            "residual", "The residual",
            "After a rejection, which distribution must the replacement token come from for the output to be p?",
            "choice", ("p itself", "(p − q)₊ normalized", "q", "uniform"), "(p − q)₊ normalized", 0.0,
            "Accepted mass is min(p, q); the missing mass is p − min(p, q) = (p − q)₊, which sums to 1 − a. "
            "Drawing the replacement from (p − q)₊ / (1 − a) adds exactly it back. Drawing from p instead gives "
            f"min(p, q) + (1 − a) · p = {np.round(wrong, 3).tolist()} here, not p: TV {_fmt(tv_wrong)}.",
        ),
        Question(
            "tokens", "Tokens per target pass",
            f"With the acceptance rate above (a = {_fmt(a, 2)}, the same at every position) and K = 3 drafts, how "
            "many tokens does one verification emit on average (accepted drafts plus the replacement or bonus)?",
            "number", (), tok3, 0.01,
            f"Draft i is reached and accepted with probability aⁱ, and one more token always comes out: "
            f"Σᵢ₌₀ᴷ aⁱ = (1 − aᴷ⁺¹) / (1 − a) = {_fmt(tok3)}. The off-by-one trap: accepted drafts "
            f"alone are a (1 − aᴷ) / (1 − a) = {_fmt(acc3)}.",
        ),
        Question(
            "speedup", "Wall-time speedup",
            f"Acceptance {sa:g}, K = {sK} drafts, and each drafter step costs c = {sc:g} of a target pass. What is the "
            "speedup over plain decoding (target time per token)?",
            "number", (), s, 0.01,
            f"(1 − aᴷ⁺¹) / ((1 − a)(K·c + 1)) = {_fmt(theory.expected_tokens(sa, sK))} / {sK * sc + 1:g} = {_fmt(s)}. "
            "At K = 1 the speedup is (1 + a) / (1 + c): there is one iff a > c.",
        ),
        Question(
            "best_k", "The best K",
            "Acceptance 0.8, drafter cost c = 0.05. Which K (1 to 16) maximizes the speedup?",
            "number", (), float(bk), 0.0,
            f"Tokens per pass saturate at 1 / (1 − a) = {_fmt(1 / (1 - 0.8), 1)} while the cost K·c grows linearly; "
            f"the speedup peaks at K = {bk} (×{_fmt(float(bk_table.speedup.max()))}).",
        ),
        Question(
            "roofline", "Why verifying K + 1 tokens is almost free",
            f"An accelerator with a ridge point of {ridge:.0f} FLOP per byte (e.g. {EXAMPLE_PEAK_FLOPS / 1e12:.0f} "
            f"TFLOP/s over {EXAMPLE_BANDWIDTH / 1e12:.2f} TB/s). Verifying K = {k_roof} drafts for a batch of "
            f"{b_big} rows costs how many plain decode steps of that batch?",
            "number", (), cost_big, 0.1,
            f"A pass over T tokens takes max(2N / bandwidth, 2N·T / peak): memory-bound and flat while T is below "
            f"{ridge:.0f}. With B = {b_small}, B·(K+1) = {b_small * (k_roof + 1)} tokens: {_fmt(cost_small, 2)} decode "
            f"steps, almost free. With B = {b_big}, B·(K+1) = {b_big * (k_roof + 1)} tokens is past the ridge: "
            f"{_fmt(cost_big, 2)} decode steps.",
        ),
        Question(
            "bonus", "The bonus token",
            "Every one of the K drafts is accepted. What happens next?",
            "choice", ("stop: K tokens", "one more token from p at position K", "one more from q", "resample all"),
            "one more token from p at position K", 0.0,
            "The target pass already computed p at position K (after the last draft), so one more token comes "
            "from it for free. In a ragged batch that is the row's own position num_draft[b], not the padded "
            "last row. After a rejection at position i, the KV cache entries of the rejected draft and of every "
            "position after it are discarded; the replacement token's entry is computed by the next pass.",
        ),
        Question(
            "greedy", "Greedy verification",
            "The request asks for temperature 0 (greedy decoding). When is a draft x accepted?",
            "choice", ("iff x is the target's argmax", "with probability p(x)", "with probability min(1, p(x)/q(x))",
                       "always"),
            "iff x is the target's argmax", 0.0,
            f"At temperature 0 the processed target is one-hot on its argmax, so min(1, p(x)/q(x)) is 1 for the "
            f"argmax and 0 for any other draft, whatever q is; after a rejection (p − q)₊ is that same one-hot row, "
            f"so the replacement is the argmax, and the bonus is the argmax at position K. Here the argmax of p is "
            f"token {greedy_argmax}: a draft of token {greedy_other} is rejected with every coin and replaced by token "
            f"{greedy_argmax}. The output is plain greedy decoding, token for token (specviz.verify_greedy).",
        ),
        Question(
            "sample_match", "Is sample-and-match lossless?",
            "Rule: draw y from p at each position, accept while y equals the draft, emit y at the first mismatch.",
            "choice", ("lossless", "lossy"), "lossless", 0.0,
            f"Lossless: every emitted token is a fresh draw from p. But it accepts a draft with probability "
            f"Σₓ p(x) q(x) = {_fmt(float(p @ q))} here against Σₓ min(p(x), q(x)) = {_fmt(a)}: lossless is not "
            "the same as efficient.",
        ),
        Question(
            "shared_coin", "Is one coin for every position lossless?",
            "Rule: the correct verifier, but one uniform u per row is compared with min(1, p/q) at every position.",
            "choice", ("lossless", "lossy"), "lossy", 0.0,
            f"Lossy: the first token is right, but given acceptance u is small, so the second draft is accepted "
            f"too often. Exact law of the first two tokens here: TV {_fmt(tv_shared, 4)} from p ⊗ p.",
        ),
        Question(
            "typical", "Is typical acceptance lossless?",
            f"Typical acceptance with Medusa's threshold: accept draft x iff p(x) > min({eps:g}, {delta:g} · "
            "exp(−H(p))); a rejected draft is replaced by a sample from p here (Medusa's own code takes the target's "
            "argmax there, as on the Verifiers page: lossy too).",
            "choice", ("lossless", "lossy"), "lossy", 0.0,
            f"Lossy: accepted tokens are not thinned to min(p, q), and the fallback is p, not the residual. "
            f"Exact first-token law here: {np.round(typ, 3).tolist()}, TV {_fmt(theory.total_variation(typ, p))} "
            "from p.",
        ),
    ] + list(_topic_questions())  # fmt: skip


def _tv_text(tv: float) -> str:
    return "< 1e-12" if tv < 1e-12 else _fmt(tv)


@functools.lru_cache(maxsize=1)
def _topic_questions() -> tuple[Question, ...]:
    """The later topics (interview_topics computes every number); cached: the catalogue's laws take a while."""
    p, q = np.array(REFERENCE_P), np.array(UNIFORM_Q)
    a = theory.acceptance_rate(p, q)
    tv1, tv3 = topics.count_after_rejection_tv(1), topics.count_after_rejection_tv(3)
    L, Kv, jv, page = KV_EXAMPLE
    kv = topics.kv_rollback(L, Kv, jv, page)
    k, depth = TREE_EXAMPLE
    sh = topics.tree_shapes(k, depth)
    a1 = 1 - (1 - sh.node_acceptance) / (1 - a)  # the second candidate's acceptance, against the residual
    toy = topics.block_toy()
    st = topics.settings_facts()
    un = topics.unclamped()
    nd, Kr = RAGGED_EXAMPLE
    rb = topics.ragged_bonus(nd, Kr)
    return (
        Question(
            "first_rejection", "Why stop at the first rejection",
            "Draft 2 is rejected, but draft 3's coin would pass its own test. Why is draft 3 thrown away?",
            "choice", FIRST_REJECTION_CHOICES, FIRST_REJECTION_CHOICES[0], 0.0,
            "Draft 3 and its p and q were computed with draft 2 in the context; once draft 2 is replaced, that "
            "context is not in the output. Counting passing drafts anyway is the count_after_rejection mistake: its "
            "first token follows (1 − (1 − a)ᴷ) · min(p, q) / a + (1 − a)ᴷ · residual, at TV "
            f"{_fmt(tv3)} from p in the textbook example with K = 3 (TV {_tv_text(tv1)} at K = 1, where no draft "
            "comes after the first).",
        ),
        Question(
            "kv_rollback", "KV-cache rollback",
            f"The context holds L = {L} tokens (its last one, emitted by the previous round, is in no cache yet). "
            f"K = {Kv} drafts, the first {jv} accepted; the target's KV cache has pages of {page} positions. After "
            "the round, how many of the target's pages can be freed?",
            "number", (), float(kv.pages_freed), 0.0,
            f"The verification pass fed the last context token and the {Kv} drafts: the target holds "
            f"{kv.target_written} positions ({kv.pages_held} pages). It keeps the context and the {jv} accepted "
            f"drafts, {kv.target_kept} positions ({kv.pages_kept} pages), and drops the rejected draft and every "
            f"draft after it ({kv.target_dropped} positions): {kv.pages_freed} page freed. The replacement token has "
            "no KV anywhere yet: it was drawn from p at the last kept position, and the next pass feeds it first. "
            f"The drafter fed {kv.drafter_written} positions (never its last draft) and keeps {kv.drafter_kept}. "
            "When all K drafts survive, the bonus token comes from p at position K; its KV, like the "
            "replacement's, comes from the next pass, and the drafter then feeds 2 tokens: its last draft and the "
            "bonus.",
        ),
        Question(
            "trees", "Trees: the recursive residual",
            f"A node has k = {k} candidates drawn i.i.d. from q. The first is rejected. What is the second tested "
            "against?",
            "choice", TREE_CHOICES, TREE_CHOICES[1], 0.0,
            "The residual r₁ = (p − q)₊ / (1 − a): the rejected candidate left exactly that mass missing, so "
            f"testing the next one against r₁ (and the next against r₂, built from r₁ the same way) keeps the node's "
            f"law p. The second is accepted with a₁ = Σₓ min(r₁(x), q(x)) = {_fmt(a1)}, so the node accepts with "
            f"A = 1 − (1 − a)(1 − a₁) = {_fmt(sh.node_acceptance)} against a = {_fmt(a)}. Shapes at depth {depth}: "
            f"{k} chains from the root branch only there, A · (1 + a + a²) = {_fmt(sh.chains)} drafts kept per step; "
            f"the full {k}-ary tree branches at every node, A + A² + A³ = {_fmt(sh.kary)}; one chain "
            f"{_fmt(sh.chain)}.",
        ),
        Question(
            "block", "Block against token verification",
            f"Sun et al.'s toy: p = (1/3, 2/3), q = (2/3, 1/3), K = {toy.K}. Token-by-token verification keeps "
            f"{_fmt(toy.token, 4)} drafts per step. How many does block verification keep?",
            "number", (), toy.block, 0.005,
            f"{_fmt(toy.block, 4)} = 11/9 against 10/9. Block verification judges the drafts as a block: from the "
            "weights wᵢ of every prefix it sets a threshold per draft, keeps the longest prefix whose coin passes, "
            "and draws the extra token from the residual of w·p against q there, so a draft token verification "
            "would reject can still be kept when the drafts before it had mass to spare. Its output "
            "is still exactly p (the court's exact law of the toy: TV 0), and in expectation it never keeps fewer "
            "drafts than token verification.",
        ),
        Question(
            "settings", "p and q under temperature, top-k and top-p",
            f"The request asks temperature {topics.SETTINGS_REQUEST.temperature:g} and top-p "
            f"{topics.SETTINGS_REQUEST.top_p:g}; the drafter samples at temperature 1 with no top-p. "
            "Which p and q must the rule be given?",
            "choice", SETTINGS_CHOICES, SETTINGS_CHOICES[0], 0.0,
            "Lossless means the output follows plain decoding with the request's settings, so p is the target "
            "after temperature, top-k and top-p; q is the law each draft really came from, the drafter's own "
            "settings included. They need not match. Top-k or top-p on the target zero some tokens of p: a draft "
            "there is always rejected. Getting it wrong: the raw target gives TV "
            f"{_fmt(st.target_unprocessed_tv)} from the processed p (this request on the textbook p, as in the "
            "widget below); the drafter's raw q "
            f"instead of the one it sampled from gives TV {_fmt(st.q_unprocessed_tv)} "
            f"(p = {topics.SETTINGS_P.tolist()}, q = {topics.SETTINGS_Q.tolist()}).",
        ),
        Question(
            "unclamped", "The unclamped residual",
            "The residual written as p − q without max(0, ·), then sampled by a running sum against u times its "
            "positive mass. Lossless?",
            "choice", ("lossless", "lossy"), "lossy", 0.0,
            "Lossy, though not in every example: the negative entries of p − q pull the running sum back down, so "
            "tokens after a negative entry come out too rarely or never, and the mass the sum never reaches goes to "
            "the last token. In the textbook example the negative entries come last and the first token is still p "
            f"(TV {_tv_text(un.textbook_tv)}); "
            f"on the '{un.preset}' preset with K = {un.K} it is TV {_fmt(un.tv)} from p. One friendly example does "
            "not prove a rule.",
        ),
        Question(
            "ragged", "Ragged batching",
            f"A batch is padded to K = {Kr} drafts; row b has num_draft[b] = {nd} and both are accepted. Which "
            "target row does its bonus token come from?",
            "choice", RAGGED_CHOICES, RAGGED_CHOICES[0], 0.0,
            f"Row {nd}: the target's output after the row's own last draft. Rows past num_draft[b] follow padding, "
            f"not text. On a target whose row t is one-hot on token t, specviz.verify emits token {rb.rule} as the "
            f"bonus; the wrong_bonus_row mistake emits token {rb.mistake}. Draft tokens past num_draft[b] are never "
            "read, and outputs are padded with −1 to K + 1 tokens.",
        ),
    )  # fmt: skip


def check(question: Question, answer: str | float | None) -> bool:
    """True when ``answer`` is right (numbers within the question's tolerance)."""
    if answer is None:
        return False
    if question.kind == "choice":
        return answer == question.answer
    try:
        return abs(float(answer) - float(question.answer)) <= question.tolerance
    except (TypeError, ValueError):
        return False


def cheat_sheet(results: dict[str, bool] | None = None) -> str:
    """One page of Markdown: the rule, the formulas with worked numbers, the classic mistakes."""
    from ..proof.bugs import BUGS

    qs = questions()
    lines = [
        "# Speculative sampling: cheat sheet",
        "",
        "## The rule",
        "- Accept draft x iff u * q(x) < p(x) (probability min(1, p(x)/q(x))), fresh u per position.",
        "- Stop at the first rejection; replace from (p − q)₊ normalized (p if that has no mass).",
        "- All K accepted: one bonus token from p at position K (the row's own, in a ragged batch).",
        "- p is the target after the request's temperature/top-k/top-p; q is exactly the law each draft came from.",
        "",
        "## Formulas (worked on p = [0.5, 0.3, 0.15, 0.05], q uniform)",
    ]
    for q in qs:
        stop = "" if q.title.endswith(("?", ".", "!")) else "."  # "lossless?" takes no full stop after it
        lines.append(f"- **{q.title}{stop}** {q.reveal}")
    lines += ["", "## Classic mistakes"]
    for b in BUGS.values():
        lines.append(f"- **{b.name}**: {b.title}. Caught by {b.caught_by}.")
    if results:
        right = sum(results.get(q.key, False) for q in qs)
        lines += ["", f"## Your answers: {right} of {len(qs)} right"]
        lines += [f"- {'right' if results.get(q.key) else 'review'}: {q.title}" for q in qs]
    return "\n".join(lines) + "\n"


# --- progress in a link ------------------------------------------------------------------------


def encode_answers(answers: dict[str, str | float]) -> str:
    """Committed answers as a compact text: one comma-separated entry per question, in order;
    a choice as its index, a number as its shortest exact text, an unanswered question empty.

    ``{"acceptance": 0.7, "residual": "(p − q)₊ normalized"}`` -> ``"0.7,1"``.
    """
    qs = questions()
    entries = []
    for q in qs:
        a = answers.get(q.key)
        if a is None:
            entries.append("")
        elif q.kind == "choice":
            entries.append(str(q.choices.index(a)) if a in q.choices else "")
        else:
            entries.append(repr(float(a)))  # the shortest text that reads back as the same float
    return ",".join(entries).rstrip(",")


def decode_answers(text: str) -> dict[str, str | float]:
    """The inverse of :func:`encode_answers`; a malformed entry raises :class:`InputError`."""
    qs = questions()
    items = str(text).split(",") if text else []
    if len(items) > len(qs):
        raise InputError("answers", f"at most {len(qs)} comma-separated entries", str(len(items)))
    out: dict[str, str | float] = {}
    for q, item in zip(qs, items, strict=False):
        if not item:
            continue
        try:
            if q.kind == "choice":
                i = int(item)
                if not 0 <= i < len(q.choices):
                    raise ValueError(item)
                out[q.key] = q.choices[i]
            else:
                v = float(item)
                if not np.isfinite(v):
                    raise ValueError(item)
                out[q.key] = v
        except ValueError:
            raise InputError("answers", f"entry {q.key!r}: a choice index or a finite number", repr(item)) from None
    return out


def results(answers: dict[str, str | float]) -> dict[str, bool]:
    """Right or wrong for each committed answer (unanswered questions are left out)."""
    return {q.key: check(q, answers[q.key]) for q in questions() if q.key in answers}


def feedback(question: Question, given: str | float) -> tuple[bool, str]:
    """(right?, the Markdown sentence under the question): the answer given, and the right one where it differs.

    ``given`` came from the visitor (a link can carry anything): it is escaped (:func:`links.plain`).
    """
    right = check(question, given)
    shown = plain(given if isinstance(given, str) else f"{given:g}")
    if right:
        return True, f"Right: {shown}."
    correct = plain(question.answer if isinstance(question.answer, str) else f"{question.answer:.4g}")
    tol = f" (within ±{question.tolerance:g})" if question.kind == "number" and question.tolerance else ""
    return False, f"Not quite: you said {shown}; the answer is {correct}{tol}."


def summary_marks(right: dict[str, bool]) -> list[tuple[str, str]]:
    """(title, mark) of every question in order: right, wrong, or not answered (``right``: :func:`results`)."""
    return [
        (q.title, "✅ right" if right.get(q.key) else "❌ wrong" if q.key in right else "— not answered")
        for q in questions()
    ]
