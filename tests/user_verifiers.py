"""Stand-ins for a user's own verifiers, loaded by `prove --verifier tests.user_verifiers:NAME`.

# B rows, K drafts (padded width), V vocabulary

``own_rule`` is an independent NumPy implementation of the rule, written from the contract
(not from specviz.verify), with one switch per step. Each *mutant* below is that rule with
exactly one step wrong, the way a real implementation goes wrong; each *variant* is a
different but correct way to write a step. ``MUTANTS`` and ``VARIANTS`` list them for the
tests, with the row shapes on which each mutant differs from the rule.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from specviz import verify
from specviz.proof.bugs import BUGS

ATOM = 0.05  # coin_atom_at_zero: mass of the coin at exactly 0


class Result(NamedTuple):
    """What a verifier must return (the fields prove reads), and nothing more."""

    tokens: np.ndarray  # (B, K+1) emitted tokens, -1 after num_tokens
    num_tokens: np.ndarray  # (B,)
    num_accepted: np.ndarray  # (B,)


def _draw(w: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse CDF, one token per row: weights (B, V) with positive sums, u (B,) -> (B,)."""
    cdf = np.cumsum(w, axis=1)
    tok = np.count_nonzero(cdf <= (u * cdf[:, -1])[:, None], axis=1)
    last = w.shape[1] - 1 - np.argmax(w[:, ::-1] > 0, axis=1)  # never past the last token with mass
    return np.minimum(tok, last)


def own_rule(
    target_probs: Any,
    draft_probs: Any,
    draft_tokens: Any,
    num_draft: Any,
    *,
    rng: np.random.Generator | None = None,
    uniforms: Any = None,
    coin: str = "fresh",  # fresh | shared | atom_at_zero | one_minus | doubled
    compare: str = "<",  # < | <=
    count: str = "run",  # run | all (keep drafts after a rejection)
    residual: str = "clamped",  # clamped | unclamped | p | keeps_draft (p when draft_probs is None)
    draw_coin: str = "fresh",  # fresh | reused (the rejecting coin) | last_accept (bonus uses u_{j-1})
    bonus: str = "row_j",  # row_j | row_k_minus_1 | q | row_k | short_plus_1 | empty_row_k | none_q_row_before
    reads_padding: bool = False,  # verify all K positions whatever num_draft says
) -> Result:
    P = np.asarray(target_probs, dtype=np.float64)  # (B, K+1, V)
    B, K1, V = P.shape
    K = K1 - 1
    X = np.asarray(draft_tokens, dtype=np.int64).reshape(B, K)
    J = np.asarray(num_draft, dtype=np.int64).reshape(B)
    if reads_padding:
        J = np.full(B, K, dtype=np.int64)
    Q = np.eye(V)[np.clip(X, 0, V - 1)] if draft_probs is None else np.asarray(draft_probs, dtype=np.float64)
    if uniforms is None:
        rng = np.random.default_rng() if rng is None else rng
        ua, us = rng.random((B, K)), rng.random(B)
    else:
        ua, us = np.asarray(uniforms[0], dtype=np.float64), np.asarray(uniforms[1], dtype=np.float64)
    c = {"fresh": ua, "shared": np.repeat(ua[:, :1], K, axis=1), "atom_at_zero": np.maximum(ua - ATOM, 0.0),
         "one_minus": 1.0 - ua, "doubled": (2.0 * ua) % 1.0}[coin]  # fmt: skip
    pos = np.arange(K)
    valid = pos[None, :] < J[:, None]  # (B, K)
    Xs = np.where(valid, X, 0)
    bi = np.arange(B)[:, None]
    px, qx = P[bi, pos[None, :], Xs], Q[bi, pos[None, :], Xs]  # (B, K)
    passed = (c * qx < px) if compare == "<" else (c * qx <= px)
    passed &= valid & (qx > 0)
    first = np.cumprod(passed, axis=1).sum(axis=1)  # (B,) first rejected position, or J
    rejected = first < J
    b = np.arange(B)
    if count == "run":
        n = first
        emitted = np.where(pos[None, :] < n[:, None], X, -1)
    else:  # every draft whose coin passed, in order
        n = passed.sum(axis=1)
        order = np.argsort(np.where(passed, pos[None, :], K + pos[None, :]), axis=1, kind="stable")
        emitted = np.where(pos[None, :] < n[:, None], np.take_along_axis(X, order, axis=1), -1)
    # The row each batch row draws its last token from, and with which uniform.
    at = np.minimum(first, K)
    row = P[b, at].copy()  # (B, V): the bonus row p_j, or p at the rejected position
    bon = ~rejected
    if bonus == "row_k_minus_1" and K:
        row[bon] = P[bon, K - 1]
    elif bonus == "q":
        has = bon & (J > 0)
        row[has] = Q[has, J[has] - 1]
    elif bonus == "row_k":
        row[bon] = P[bon, K]
    elif bonus == "short_plus_1":
        short = bon & (J < K)
        row[short] = P[short, J[short] + 1]
    elif bonus == "empty_row_k":
        empty = bon & (J == 0)
        row[empty] = P[empty, K]
    elif bonus == "none_q_row_before" and draft_probs is None:  # a separate path for deterministic drafters
        has = bon & (J > 0)
        row[has] = P[has, J[has] - 1]
    u = us.copy()
    if draw_coin == "reused":
        u[rejected] = c[rejected, first[rejected]]
    elif draw_coin == "last_accept":
        has = bon & (J > 0)
        u[has] = c[has, J[has] - 1]
    r = np.flatnonzero(rejected)
    qrow = Q[r, first[r]]  # (R, V)
    token = np.empty(B, dtype=np.int64)
    if r.size and residual == "unclamped":
        diff = row[r] - qrow
        mass = np.maximum(diff, 0).sum(axis=1)
        above = np.cumsum(diff, axis=1) > (u[r] * mass)[:, None]
        token[r] = np.where(above.any(axis=1), np.argmax(above, axis=1), V - 1)
    elif r.size:
        if residual == "clamped" or (residual == "keeps_draft" and draft_probs is not None):
            res = np.maximum(row[r] - qrow, 0.0)
            empty = res.sum(axis=1) <= 0  # p == q: unreachable in exact arithmetic; fall back to p
            res[empty] = row[r][empty]
            row[r] = res
        token[r] = _draw(row[r], u[r])
    k = np.flatnonzero(~rejected)
    if k.size:
        token[k] = _draw(row[k], u[k])
    tokens = np.full((B, K + 1), -1, dtype=np.int64)
    tokens[:, :K] = emitted
    tokens[b, n] = token
    return Result(tokens, n + 1, n)


def _variant(name: str, doc: str, **wrong: Any) -> Callable[..., Result]:
    fn = functools.partial(own_rule, **wrong)
    fn.__name__ = name  # type: ignore[attr-defined]
    fn.__doc__ = doc
    return fn


class Mutant(NamedTuple):
    name: str
    doc: str
    wrong: dict[str, Any]
    shapes: str  # "all": wrong on full rows too; "ragged": only on rows with fewer than K drafts
    bonus_only: bool  # wrong only in the bonus token: invisible to every L = K scenario without short rows


MUTANTS: list[Mutant] = [
    Mutant("bonus_row_k_minus_1", "Bonus drawn from target row K-1 (the last draft's row), not row num_draft.",
           {"bonus": "row_k_minus_1"}, "all", True),
    Mutant("bonus_from_q", "Bonus drawn from the last draft's q row instead of the target row num_draft.",
           {"bonus": "q"}, "all", True),
    Mutant("bonus_reuses_last_coin", "Bonus drawn with the last accepted coin (not uniform given acceptance).",
           {"draw_coin": "last_accept"}, "all", True),
    Mutant("bonus_row_before_without_q", "With draft_probs=None only, the bonus comes from row num_draft - 1.",
           {"bonus": "none_q_row_before"}, "all", True),
    Mutant("residual_unclamped", "Replacement by inverse CDF over p - q without max(0, .).",
           {"residual": "unclamped"}, "all", False),
    Mutant("residual_from_p", "Replacement drawn from p instead of the residual.", {"residual": "p"}, "all", False),
    Mutant("residual_keeps_draft", "With draft_probs=None the replacement comes from p, draft not removed.",
           {"residual": "keeps_draft"}, "all", False),
    Mutant("coin_reused", "Replacement drawn with the coin that just rejected.", {"draw_coin": "reused"}, "all",
           False),
    Mutant("coin_atom_at_zero", f"Accept iff u*q <= p with a coin that is 0 with probability {ATOM}.",
           {"coin": "atom_at_zero", "compare": "<="}, "all", False),
    Mutant("shared_coin", "One coin for every position of a row.", {"coin": "shared"}, "all", False),
    Mutant("keep_after_rejection", "Every draft whose coin passes is kept.", {"count": "all"}, "all", False),
    Mutant("bonus_last_padded_row", "Bonus from padded row K, whatever num_draft is.", {"bonus": "row_k"},
           "ragged", True),
    Mutant("reads_padding", "Verifies all K padded positions, ignoring num_draft.", {"reads_padding": True},
           "ragged", False),
    Mutant("short_row_bonus_off_by_one", "Rows with fewer than K drafts take their bonus from row num_draft + 1.",
           {"bonus": "short_plus_1"}, "ragged", True),
    Mutant("empty_row_bonus_from_last", "Rows with no draft take their token from padded row K.",
           {"bonus": "empty_row_k"}, "ragged", True),
]  # fmt: skip

VARIANTS: dict[str, dict[str, Any]] = {
    "own_correct": {},  # the independent implementation, every step right
    "correct_leq": {"compare": "<="},  # u*q <= p: differs from < only when u*q == p, probability 0
    "correct_one_minus_u": {"coin": "one_minus"},  # 1 - u is uniform on (0, 1]
    "correct_doubled_u": {"coin": "doubled"},  # (2u) mod 1 is uniform on [0, 1)
}

for _m in MUTANTS:
    globals()[_m.name] = _variant(_m.name, _m.doc, **_m.wrong)
for _name, _kw in VARIANTS.items():
    globals()[_name] = _variant(_name, "A correct variant of the rule.", **_kw)


def correct(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None):
    return verify(target_probs, draft_probs, draft_tokens, num_draft, rng=rng, uniforms=uniforms)


def broken(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None):
    """Resamples from p after a rejection: the classic mistake."""
    return BUGS["resample_from_p"].verifier(
        target_probs, draft_probs, draft_tokens, num_draft, rng=rng, uniforms=uniforms
    )


def crashes(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None):
    return _inner_helper(target_probs)


def _inner_helper(target_probs):
    raise RuntimeError("out of cheese")


def wrong_shape(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None):
    res = verify(target_probs, draft_probs, draft_tokens, num_draft, rng=rng, uniforms=uniforms)
    return res._replace(tokens=np.asarray(res.tokens)[:, :1])


# --- Engine-style variants for the realistic tests of issue 18 (prove --vocab): the engine with one
# thing done the way a serving stack does it. Called by tests/test_ship.py and tests/test_probes.py.

_COIN_CAP = 1.0 - 2.0**-53  # 1 - u is in (0, 1]; the engine takes coins in [0, 1)


def _to_bfloat16(q):
    """q rounded to bfloat16 and back to its own dtype (NumPy or torch)."""
    import torch

    if isinstance(q, torch.Tensor):
        return q.to(torch.bfloat16).to(q.dtype)
    return torch.from_numpy(np.array(q, copy=True)).to(torch.bfloat16).double().numpy().astype(q.dtype)


def engine_leq(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None, validate=True):
    """Accept iff u * q <= p (SGLang #35771): a coin of exactly 0 accepts a draft with p(x) = 0."""
    from specviz.proof.engine_bugs import FAULTS

    return FAULTS["inclusive_coin"].verifier(target_probs, draft_probs, draft_tokens, num_draft, rng=rng,
                                             uniforms=uniforms, validate=validate)  # fmt: skip


def engine_bf16_q(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None, validate=True):
    """q rounded to bfloat16 before the ratio and the residual (the DeepSpec #31 class); the rounded
    rows no longer sum to 1, so the check is off, as in an engine's hot path."""
    q = None if draft_probs is None else _to_bfloat16(draft_probs)
    return verify(target_probs, q, draft_tokens, num_draft, rng=rng, uniforms=uniforms, validate=False)


def engine_one_minus_u(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None,
                       validate=True):  # fmt: skip
    """Correct, with another coin convention: accept iff (1 - u) * q < p (1 - u is uniform too)."""
    if uniforms is not None:
        ua, us = uniforms
        flip = 1 - ua
        uniforms = (flip - (flip >= 1) * (1 - _COIN_CAP), us)
    return verify(target_probs, draft_probs, draft_tokens, num_draft, rng=rng, uniforms=uniforms, validate=validate)


def engine_misaligned_q(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None,
                        validate=True):  # fmt: skip
    """Row b is verified against the draft rows of row b + 1 (an off-by-one in a gather)."""
    q = draft_probs if draft_probs is None or len(draft_probs) < 2 else draft_probs[[*range(1, len(draft_probs)), 0]]
    return verify(target_probs, q, draft_tokens, num_draft, rng=rng, uniforms=uniforms, validate=False)


# --- Functions in engines' conventions, for specviz.proof.adapters (issue 18), built on the engine.


def vllm_style(draft_token_ids, cu_num_draft_tokens, draft_probs, target_probs, bonus_token_ids, *, uniforms):
    """vLLM's convention: flat drafts, cu_num_draft_tokens (B,) inclusive int32, target rows of the drafts
    only (N, V), the bonus sampled outside (B, 1), output (B, K+1) int32 with -1 placeholders."""
    import torch

    from specviz import verify_flat

    counts = torch.diff(cu_num_draft_tokens.long(), prepend=torch.zeros(1, dtype=torch.long))  # (B,)
    B, V = counts.shape[0], target_probs.shape[-1]
    rows, at = [], 0
    for b in range(B):  # each row's draft targets, then a one-hot row on its bonus token
        k = int(counts[b])
        rows += [target_probs[at : at + k], torch.nn.functional.one_hot(bonus_token_ids[b].long(), V).to(
            target_probs.dtype)]  # fmt: skip
        at += k
    target = torch.cat(rows) if rows else target_probs[:0]
    indptr = torch.cat([torch.zeros(1, dtype=torch.long), cu_num_draft_tokens.long()])
    res = verify_flat(target, draft_probs, draft_token_ids.long(), indptr, uniforms=uniforms, validate=False)
    return res.tokens.to(torch.int32)


def vllm_style_bonus_dropped(draft_token_ids, cu_num_draft_tokens, draft_probs, target_probs, bonus_token_ids, *,
                             uniforms):  # fmt: skip
    """Forgets the bonus token sampled outside: a row whose drafts all survive ends with -1."""
    import torch

    out = vllm_style(draft_token_ids, cu_num_draft_tokens, draft_probs, target_probs, bonus_token_ids,
                     uniforms=uniforms)  # fmt: skip
    counts = torch.diff(cu_num_draft_tokens.long(), prepend=torch.zeros(1, dtype=torch.long))
    n = (out != -1).sum(-1)
    full = n == counts + 1
    out[full, counts[full]] = -1
    return out


def flashinfer_style(draft_probs, draft_token_ids, uniform_samples, target_probs):
    """FlashInfer's chain_speculative_sampling convention: coins uniform_samples[:, :K], the replacement or
    bonus drawn with column min(first rejection + 1, K); returns (tokens, accepted, emitted)."""
    import torch

    B, K = draft_token_ids.shape
    x = draft_token_ids.long()
    coins = uniform_samples[:, :K].double()
    full = torch.full((B,), K, dtype=torch.long)
    first = verify(target_probs, draft_probs, x, full, uniforms=(coins, uniform_samples[:, K].double()),
                   validate=False).num_accepted  # fmt: skip
    col = torch.clamp(first + 1, max=K)
    res = verify(target_probs, draft_probs, x, full, uniforms=(coins, uniform_samples[torch.arange(B), col].double()),
                 validate=False)  # fmt: skip
    px = target_probs[:, :K].gather(-1, x[..., None])[..., 0].double()
    qx = draft_probs.gather(-1, x[..., None])[..., 0].double()
    accepted = ((coins * qx < px) & (qx > 0)).sum(-1)  # every passing coin, after a rejection too
    return res.tokens.to(torch.int32), accepted, res.num_accepted


# --- Misbehaving verifiers for prove's harness (issue 21, point 3; tests/test_harness.py): each is
# the correct rule plus one thing a careless verifier does to the program that runs it.


def exits_zero(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None):
    """Calls exit(0) (a SystemExit) from inside the verifier: a CI gate must not read it as a pass."""
    raise SystemExit(0)


def sleeps(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None):
    """Hangs in a sleep."""
    import time

    time.sleep(3600)


def busy_loop(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None):
    """Hangs in a busy loop (Python bytecode, never a blocking call)."""
    n = 0
    while n >= 0:
        n += 1


def float_tokens(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None):
    """The correct tokens plus 0.5, as floats: truncated back, they would pass."""
    res = verify(target_probs, draft_probs, draft_tokens, num_draft, rng=rng, uniforms=uniforms)
    return res._replace(tokens=np.asarray(res.tokens) + 0.5)


def prints(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None):
    """Correct, but chatty: prints from Python and writes below it, to file descriptor 1."""
    import os

    print("debug: verifying", np.shape(draft_tokens))
    os.write(1, b"debug from fd 1\n")
    return verify(target_probs, draft_probs, draft_tokens, num_draft, rng=rng, uniforms=uniforms)


def renormalizes_in_place(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None):
    """Renormalizes q in place before verifying: it writes into the caller's buffer."""
    if draft_probs is not None:
        with np.errstate(invalid="ignore", divide="ignore"):
            draft_probs /= draft_probs.sum(axis=-1, keepdims=True)
    return verify(target_probs, draft_probs, draft_tokens, num_draft, rng=rng, uniforms=uniforms, validate=False)


def hf_ensemble_half(candidate_input_ids, candidate_logits, candidate_length, new_logits,
                     assistant_ensemble_weight=None):  # fmt: skip
    """Hugging Face's own _speculative_sampling with assistant_ensemble_weight = 0.5 (a lossy mixture of p
    and q): ``prove --verifier hf:tests.user_verifiers:hf_ensemble_half``. Needs transformers."""
    from transformers.generation.utils import _speculative_sampling

    return _speculative_sampling(candidate_input_ids, candidate_logits, candidate_length, new_logits,
                                 assistant_ensemble_weight=0.5)  # fmt: skip


# --- Engine-style variants for the diagnosis by family (issue 18, point 4; tests/test_families.py): each
# is the engine with one thing wrong at a setting no catalogue entry has.

DRAFTER_T = 0.6  # engine_unprocessed_q: the drafter's temperature it forgets
ENSEMBLE_W = 0.5  # engine_ensemble: Hugging Face's assistant_ensemble_weight


def _f64(a):
    """A table (NumPy or a CPU torch tensor) as a float64 NumPy array."""
    return np.asarray(a.detach().cpu().numpy() if hasattr(a, "detach") else a, dtype=np.float64)


def engine_unprocessed_q(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None,
                         validate=True):  # fmt: skip
    """Drafts came from q = softmax(l / 0.6), but the verifier reads the drafter's raw softmax(l), which is
    proportional to q^0.6: the drafter's temperature forgotten."""
    q = draft_probs
    if q is not None:
        raw = _f64(q) ** DRAFTER_T  # (B, K, V); 0 stays 0
        q = raw / np.maximum(raw.sum(axis=-1, keepdims=True), 1e-300)
    return verify(target_probs, q, draft_tokens, num_draft, rng=rng, uniforms=uniforms, validate=False)


def engine_ensemble(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None, validate=True):
    """Hugging Face's static ensemble at weight 0.5: the coin is compared with v / q = 1 - w + w p / q, i.e.
    the drafted positions' target is v = w p + (1 - w) q; the bonus row keeps p."""
    P = _f64(target_probs).copy()  # (B, K+1, V), a private copy
    B, K1, V = P.shape
    x = _f64(draft_tokens).astype(np.int64).reshape(B, K1 - 1)
    Q = np.eye(V)[np.clip(x, 0, V - 1)] if draft_probs is None else _f64(draft_probs)
    drafted = np.arange(K1 - 1)[None, :] < _f64(num_draft).reshape(B, 1)  # (B, K)
    v = ENSEMBLE_W * P[:, :-1] + (1 - ENSEMBLE_W) * Q
    P[:, :-1] = np.where(drafted[..., None], v, P[:, :-1])
    return verify(P, draft_probs, draft_tokens, num_draft, rng=rng, uniforms=uniforms, validate=False)


def engine_residual_unnormalized(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None,
                                 validate=True):  # fmt: skip
    """(p - q)^+ handed to a sampler that assumes normalized probabilities (1 - a never divided out): the
    uniform is compared with the raw running sums, and whatever lies past them falls on the last token
    with weight."""
    P = _f64(target_probs)  # (B, K+1, V)
    B, K1, V = P.shape
    if uniforms is None:
        rng = np.random.default_rng() if rng is None else rng
        uniforms = (rng.random((B, K1 - 1)), rng.random(B))
    res = verify(target_probs, draft_probs, draft_tokens, num_draft, uniforms=uniforms, validate=False)
    tokens, n = _f64(res.tokens).astype(np.int64), _f64(res.num_accepted).astype(np.int64)
    x = _f64(draft_tokens).astype(np.int64).reshape(B, K1 - 1)
    Q = np.eye(V)[np.clip(x, 0, V - 1)] if draft_probs is None else _f64(draft_probs)
    us = _f64(uniforms[1])
    for b in np.flatnonzero(n < _f64(num_draft).reshape(B)):  # rejected rows: redo the replacement
        i = int(n[b])
        w = np.maximum(P[b, i] - Q[b, i], 0.0)
        if draft_probs is None:
            w = P[b, i].copy()
            w[x[b, i]] = 0.0
        if w.sum() <= 0:
            continue  # p == q: the engine's fallback to p stands
        last = int(np.flatnonzero(w > 0)[-1])
        tokens[b, i] = min(int(np.count_nonzero(np.cumsum(w) <= us[b])), last)
    return res._replace(tokens=tokens)
