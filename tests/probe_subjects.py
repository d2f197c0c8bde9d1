"""Verifiers with one-line defects, for the probes' tests (tests/test_intercept.py, tests/test_probes_2026.py).

# B rows, K drafts, V vocabulary

``toy(defect)``: the chain rule in plain NumPy with explicit uniforms; each ``defect`` changes
one line of it. ``torch_own(...)``: the same rule drawing its own randomness from torch
(``torch.rand`` coins; the replacement by ``torch.multinomial`` or an exponential race), the
way shipped engines write it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from specviz import verify


class Out(NamedTuple):
    tokens: Any
    num_tokens: Any
    num_accepted: Any


def _q(draft_probs: Any, x: np.ndarray, V: int) -> np.ndarray:
    """The draft rows; a deterministic drafter (None): one-hot on each draft."""
    if draft_probs is not None:
        return _np(draft_probs).astype(np.float64)
    B, K = x.shape
    Q = np.zeros((B, K, V))
    b, i = np.nonzero(x >= 0)
    Q[b, i, x[b, i]] = 1.0
    return Q


def _np(a: Any) -> np.ndarray:
    if isinstance(a, torch.Tensor):  # NumPy has no bfloat16: half-precision tables are read in float32
        a = a.detach().cpu()
        return (a.float() if a.dtype in (torch.bfloat16, torch.float16) else a).numpy()
    return np.asarray(a)


def _bf16(a: np.ndarray) -> np.ndarray:
    return torch.from_numpy(np.ascontiguousarray(a)).to(torch.bfloat16).double().numpy()


def toy(defect: str | None = None) -> Any:
    """The rule with explicit uniforms; ``defect`` one of: no_finite_check, bf16_q, no_fallback,
    uniform_fallback, clamp_count, f32_cumsum."""

    def verifier(target_probs: Any, draft_probs: Any, draft_tokens: Any, num_draft: Any, *, uniforms: Any) -> Out:
        x, nd = _np(draft_tokens).astype(np.int64), _np(num_draft).astype(np.int64)
        P = _np(target_probs).astype(np.float64)
        Q = _q(draft_probs, x, P.shape[-1])
        ua, us = (_np(u).astype(np.float64) for u in uniforms)
        B, K = x.shape
        V = P.shape[-1]
        if defect != "no_finite_check" and not (np.isfinite(P).all() and np.isfinite(Q).all()):
            raise ValueError("target_probs/draft_probs: expected finite probabilities")
        rows = np.arange(B)
        xs = np.maximum(x, 0)
        px = np.take_along_axis(P[:, :K], xs[..., None], -1)[..., 0]  # (B, K)
        qx = np.take_along_axis(Q, xs[..., None], -1)[..., 0]
        if defect == "bf16_q":
            qx = _bf16(qx)  # q from other logits: the native-dtype row, not the one the draft came from
        with np.errstate(invalid="ignore"):  # 0 * inf: a NaN coin test, false
            ok = (ua * qx < px) & (np.arange(K)[None] < nd[:, None])
        n = np.cumprod(ok, axis=1).sum(1)  # (B,) accepted
        pj = P[rows, n]  # (B, V)
        rej = n < nd
        qj = np.where(rej[:, None], Q[rows, np.minimum(n, K - 1)], 0.0)
        r = np.maximum(pj - qj, 0.0)
        m = r.sum(-1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            if defect == "no_fallback":
                d = np.where(rej[:, None], r / m, pj)
            elif defect == "uniform_fallback":
                d = np.where(rej[:, None] & (m > 0), r, np.where(rej[:, None], 1.0 / V, pj))
            else:
                d = np.where(rej[:, None] & (m > 0), r, pj)
        c = np.cumsum(d.astype(np.float32) if defect == "f32_cumsum" else d, axis=-1)  # (B, V)
        if defect == "clamp_count":
            tok = np.minimum((c < us[:, None] * d.sum(-1, keepdims=True)).sum(-1), V - 1)
        else:
            tok = np.array([min(int(np.searchsorted(c[b], us[b] * c[b, -1], side="right")), V - 1)
                            for b in range(B)], dtype=np.int64)  # fmt: skip
        out = np.full((B, K + 1), -1, dtype=np.int64)
        keep = np.arange(K + 1)[None] < n[:, None]
        out[:, :K][keep[:, :K]] = x[keep[:, :K]]
        out[rows, n] = tok
        return Out(out, n + 1, n)

    verifier.__name__ = f"toy_{defect or 'correct'}"
    return verifier


def torch_own(leq: bool = False, sampler: str = "multinomial", coins: str = "float32") -> Any:
    """The rule drawing from torch: coins ``torch.rand`` in ``coins`` (accept with ``<=`` when ``leq``);
    the replacement by ``multinomial``, an exponential race (``race``: ``exponential_`` in float64)
    or a float32 race on -log(rand) (``race_f32``, which never draws E below 2^-24)."""

    def verifier(target_probs: Any, draft_probs: Any, draft_tokens: Any, num_draft: Any, *, rng: Any = None) -> Out:
        x, nd = torch.as_tensor(_np(draft_tokens)).long(), torch.as_tensor(_np(num_draft)).long()
        P = torch.as_tensor(_np(target_probs)).double()
        Q = torch.as_tensor(_q(draft_probs, x.numpy(), P.shape[-1]))
        B, K = x.shape
        u = torch.rand(B, K, dtype=getattr(torch, coins)).double()
        xs = x.clamp(min=0)
        px = P[:, :K].gather(2, xs[..., None])[..., 0]
        qx = Q.gather(2, xs[..., None])[..., 0]
        ok = (u * qx <= px) if leq else (u * qx < px)
        ok &= torch.arange(K)[None] < nd[:, None]
        n = ok.long().cumprod(1).sum(1)
        rows = torch.arange(B)
        pj = P[rows, n]
        rej = n < nd
        qj = torch.where(rej[:, None], Q[rows, n.clamp(max=max(K - 1, 0))], torch.zeros_like(pj))
        r = (pj - qj).clamp(min=0)
        d = torch.where(rej[:, None] & (r.sum(-1, keepdim=True) > 0), r, pj)
        if sampler == "race":
            tok = (d / torch.empty_like(d).exponential_()).argmax(-1)
        elif sampler == "race_f32":
            d32 = d.float()
            tok = (d32 / -torch.log(torch.rand_like(d32))).argmax(-1)
        else:
            tok = torch.multinomial(d, 1)[:, 0]
        out = torch.full((B, K + 1), -1, dtype=torch.int64)
        keep = torch.arange(K + 1)[None] < n[:, None]
        out[:, :K][keep[:, :K]] = x[keep[:, :K]]
        out[rows, n] = tok
        return Out(out, n + 1, n)

    verifier.__name__ = f"torch_{'leq' if leq else 'lt'}_{sampler}" + ("" if coins == "float32" else f"_{coins}")
    return verifier


# As `prove --verifier tests.probe_subjects:NAME` takes them (issue 27's cases).
torch_leq, torch_lt = torch_own(leq=True), torch_own()
torch_bf16_coins = torch_own(leq=True, coins="bfloat16")  # a coin of 0 about 2^-9 of the time; ratios over-accepted


def ignores_uniforms(target_probs: Any, draft_probs: Any, draft_tokens: Any, num_draft: Any, **kwargs: Any) -> Any:
    """Takes uniforms= behind **kwargs and drops them: the engine on a fresh generator."""
    return verify(target_probs, draft_probs, draft_tokens, num_draft, rng=np.random.default_rng())
