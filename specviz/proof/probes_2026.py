"""Probes from the verification bugs engines shipped in 2026: one call (or one batch) each.

# B rows, K drafts (padded width), V vocabulary

Each probe hands the verifier rows built to reach one class of defect, with chosen uniforms,
and states the right answer. ``kind`` says what a failure means: *support* (a token the target
rules out, or an id outside [0, V), came out), *law* (the output distribution is off), or
*policy* (what the call did with input it may refuse).

- ``q_above_one`` (support): q(x) one ulp above 1 where p(x) = 1. Then p - q <= 0 everywhere:
  the zero-mass branch that is "unreachable in exact arithmetic" is reached at every coin above
  1/q(x), and a verifier that normalizes the residual without the fallback to p divides 0 by 0.
  Refusing the row (q(x) > 1) is a policy and passes; returning a token with p = 0 fails.
- ``inf_in_q`` (support): +inf and -inf inside q, at the draft (with p(x) = 0) and elsewhere.
  ``u * q < p`` is true at q = -inf, so a verifier that does not check finiteness accepts a
  token the target rules out. Refusing passes.
- ``tile_tail`` (support): V = 129 (one past a 128-wide tile), the last 29 tokens with p = 0,
  rows whose float sum exceeds their running sum's last value (so u * sum can pass the CDF's
  end), coins up to just below 1. Every id must be in [0, V) with p > 0: an inverse CDF that
  clamps the count to V - 1 emits a zero-mass token, one that does not clamps nothing and
  emits V.
- ``padded_vocab`` (support): 24 real tokens in a width of 32 (p = q = 0 in the padding), rows
  where p - q <= 0 everywhere (q(x) a few ulps above p(x)): the zero-mass fallback must draw
  from p, never from the padding (a uniform fallback over the width does).
- ``far_tail`` (law): 16 tokens of p = 2^-28 (2^-24 in all) after a head of 2^-1 .. 2^-24.
  A float32 exponential race (E = -log u with u a float32 uniform) never draws E below 2^-24,
  so these tokens never win; a float32 running sum swallows them. Sampling their rate
  directly needs ~10^9 token-draws, so the probe importance-samples: the sample uniform (or,
  for a race, one tail column's uniform) is drawn from the slab [0, 2^-20) for half the rows
  and [1 - 2^-20, 1) for the other half, where a correct sampler puts the whole tail; the
  tail's rate is 2^-20 (times 16 columns for a race) times the fraction that hit it, which
  must be 2^-24 within 5 standard errors.
- ``q_other_logits`` (law): the draft was sampled from q; a verifier that reads another q
  (rounded to bfloat16, the next position's row, other logits) accepts at another rate. Each
  of positions 0, 1, 2 gets 8192 coins on a stratified grid, earlier positions accepted
  surely (p > q); the accepted fraction must be p/q within 2/8192 (either coin convention,
  u or 1 - u, gives that fraction).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..verifiers.verify import PAD_TOKEN
from .handover import CallSpec, Tables, _round_to
from .probes import Probe, _call, _tables

BELOW_ONE = 1.0 - 2.0**-53  # floored to the coin dtype's grid where the draws are intercepted
SLAB = 2.0**-20  # the far-tail probe's end slabs
TAIL_P, TAIL_N = 2.0**-28, 16  # 16 tail tokens of 2^-28: 2^-24 in all


def _probe(name: str, verdict: str, detail: str, kind: str) -> Probe:
    return Probe(name, verdict, detail)._replace(kind=kind)


def _next_up(x: float, dtype: str, steps: int = 1) -> float:
    """The ``steps``-th value of ``dtype`` above ``x`` (bfloat16: 7 explicit mantissa bits)."""
    if dtype == "bfloat16":
        e = np.floor(np.log2(x))
        return float(x + steps * 2.0 ** (e - 7))
    v = np.asarray(x, dtype=dtype)
    for _ in range(steps):
        v = np.nextafter(v, np.asarray(2.0, dtype=dtype))
    return float(v)


def _call_full(verifier: Callable[..., Any], spec: CallSpec, t: Tables, x: np.ndarray, ua: np.ndarray,
               us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """:func:`~specviz.proof.probes._call` with one more row that drafts all K (row 0's tables), dropped
    from the answer: a flat-layout verifier returns K + 1 columns only when some row has K drafts."""
    K = x.shape[1]
    full = np.argmax(t.draft[0], axis=-1)[None]  # (1, K) a token q can draw at each position
    big = _tables(np.concatenate([t.target, t.target[:1]]), np.concatenate([t.draft, t.draft[:1]]),
                  np.concatenate([t.num_draft, [K]]))  # fmt: skip
    tokens, num = _call(verifier, spec, big, np.concatenate([x, full]), np.concatenate([ua, np.full((1, K), 0.5)]),
                        np.concatenate([us, [0.5]]))  # fmt: skip
    return tokens[:-1], num[:-1]


def _coin(u: float) -> str:
    return "1 - 2^-53" if u == BELOW_ONE else f"{u:g}"


def _support_check(tokens: np.ndarray, num: np.ndarray, P: np.ndarray, labels: list[str]) -> list[str]:
    """Rows whose emitted tokens include an id outside [0, V) or one with p = 0 at its position,
    each said with its row's ``labels`` entry (the coins it was given)."""
    B, K1, V = P.shape
    bad = []
    for b in range(B):
        for i in range(int(num[b])):
            tok = int(tokens[b, i])
            if not 0 <= tok < V:
                bad.append(f"id {tok} outside [0, {V}) at {labels[b]}")
            elif P[b, min(i, K1 - 1), tok] == 0:
                bad.append(f"token {tok} with p = 0 at {labels[b]}")
    return list(dict.fromkeys(bad))


def _refused(name: str, e: BaseException, what: str) -> Probe:
    return _probe(name, "ok", f"{what}: refused ({type(e).__name__}: {str(e)[:80]})", "policy")


def q_above_one(verifier: Callable[..., Any], spec: CallSpec) -> Probe:
    V, x = 11, 5
    p = np.zeros(V)
    p[x] = 1.0
    q = p.copy()
    q[x] = _next_up(1.0, spec.dtype)
    bonus = np.zeros(V)
    bonus[[0, 1]] = 0.5
    coins = [0.0, 0.5, BELOW_ONE]
    rows = [(c, s) for c in coins for s in (0.0, 0.5, BELOW_ONE)]
    n = len(rows)
    P = np.stack([np.stack([p, bonus])] * n)
    t = _tables(P, np.stack([q[None]] * n), np.ones(n))
    what = f"q(x) = {float(q[x])!r} > p(x) = 1"
    labels = [f"coin {_coin(c)}, sample {_coin(u)}" for c, u in rows]
    try:
        tokens, num = _call(verifier, spec, t, np.full((n, 1), x), np.array([[c] for c, _ in rows]),
                            np.array([s for _, s in rows]))  # fmt: skip
    except (Exception, SystemExit) as e:  # noqa: BLE001 - refusing q > 1 is a policy
        return _refused("q_above_one", e, what)
    bad = _support_check(tokens, num, P, labels)
    if bad:
        return _probe("q_above_one", "FAIL", f"{what}: p - q <= 0 everywhere after a rejection at a coin above "
                      f"1/q(x): " + "; ".join(bad[:3]) + " (the zero-mass residual must fall back to p)",
                      "support")  # fmt: skip
    return _probe("q_above_one", "ok", f"{what}: token {x} at every coin (the zero-mass fallback to p)", "support")


def inf_in_q(verifier: Callable[..., Any], spec: CallSpec) -> Probe:
    V, x = 11, 3
    p = np.zeros(V)
    p[[0, 1, V - 1]] = [0.5, 0.25, 0.25]  # p(3) = 0
    rows_q, labels = [], []
    for where, value in ((x, np.inf), (x, -np.inf), (7, np.inf), (7, -np.inf)):
        q = np.zeros(V)
        q[[0, 1, x]] = [0.25, 0.25, 0.5]
        q[where] = value
        rows_q += [q] * 3
        labels += [f"q({where}) = {value}, coin {_coin(c)}" for c in (0.0, 0.5, BELOW_ONE)]
    coins = np.array([[0.0], [0.5], [BELOW_ONE]] * 4)
    n = len(rows_q)
    P = np.stack([np.stack([p, p])] * n)
    t = _tables(P, np.stack(rows_q)[:, None], np.ones(n))
    try:
        tokens, num = _call(verifier, spec, t, np.full((n, 1), x), coins, np.full(n, 0.5))
    except (Exception, SystemExit) as e:  # noqa: BLE001
        return _refused("inf_in_q", e, "q with +-inf")
    bad = _support_check(tokens, num, P, labels)
    if bad:  # invalid input: what the call does with it is a policy, however bad the answer
        return _probe("inf_in_q", "FAIL", "q with +-inf, a draft with p(x) = 0: " + "; ".join(bad[:3])
                      + " (u * q < p holds at q = -inf: check that q is finite)", "policy")  # fmt: skip
    return _probe("inf_in_q", "info", "q with +-inf: returned only tokens with p > 0 (not refused)", "policy")


def _tile_rows(rng: np.random.Generator, V: int, live: int, n: int, dtype: str) -> np.ndarray:
    """(n, V) rows with mass on [0, live), zero after, whose sum exceeds their cumsum's end in ``dtype``."""
    out: list[np.ndarray] = []
    arith = np.float32 if dtype != "float64" else np.float64  # half precision is summed in float32
    for _ in range(4000):  # rows where u * sum passes the running sum's end, in the dtype and in float64
        w = rng.random(live) ** 3
        row = np.zeros(V)
        row[:live] = w / w.sum()
        row = _round_to(row, dtype)
        r = row.astype(arith)
        past = bool(r.sum() > np.cumsum(r)[-1])
        if (past and row.sum() > np.cumsum(row)[-1]) or (past and len(out) < n // 2):
            out.append(row)
        if len(out) == n:
            break
    while len(out) < n:  # none found (a coarse dtype): plain rows, the zero tail still stands
        out.append(row)
    return np.stack(out)


def tile_tail(verifier: Callable[..., Any], spec: CallSpec) -> Probe:
    V, live = 129, 100
    rng = np.random.default_rng(2026)
    rows = _tile_rows(rng, V, live, 8, spec.dtype)
    samples = (0.0, 0.5, BELOW_ONE)
    n = len(rows) * len(samples)
    P = np.repeat(np.stack([rows, rows], axis=1), len(samples), axis=0)  # (n, 2, V)
    Q = np.repeat(np.roll(rows, 1, axis=1)[:, None], len(samples), axis=0)  # (n, 1, V)
    num_draft = np.tile([0, 1, 1], len(rows))  # bonus rows and replacement rows
    x = np.where(num_draft[:, None] > 0, np.argmax(Q[:, 0] - P[:, 0], axis=1)[:, None], PAD_TOKEN)
    t = _tables(P, Q, num_draft)
    try:
        tokens, num = _call(verifier, spec, t, x, np.full((n, 1), BELOW_ONE), np.tile(samples, len(rows)))
    except (Exception, SystemExit) as e:  # noqa: BLE001
        return _probe("tile_tail", "FAIL", f"V = {V} with a zero tail raised {type(e).__name__}: {e}", "support")
    labels = [f"{'bonus' if j == 0 else 'replacement'} with sample {_coin(u)}"
              for j, u in zip(num_draft, np.tile(samples, len(rows)), strict=True)]  # fmt: skip
    bad = _support_check(tokens, num, P, labels)
    if bad:
        return _probe("tile_tail", "FAIL", f"V = {V} (one past a 128 tile), p = 0 on the last {V - live}: "
                      + "; ".join(bad[:3]) + " (an inverse CDF must stop at the last token with mass)",
                      "support")  # fmt: skip
    return _probe("tile_tail", "ok", f"V = {V} with p = 0 on the last {V - live}: every id < V with p > 0",
                  "support")  # fmt: skip


def padded_vocab(verifier: Callable[..., Any], spec: CallSpec) -> Probe:
    real, width = 24, 32
    rng = np.random.default_rng(7)
    rows_p, rows_q, xs = [], [], []
    for _ in range(4):
        w = np.zeros(width)
        w[1:real] = rng.random(real - 1) + 0.05  # p(0) = 0 and the padding 0
        p = w / w.sum()
        p = _round_to(p, spec.dtype)
        x = int(rng.integers(1, real))
        q = p.copy()
        q[x] = _next_up(p[x], spec.dtype, 4)  # p - q <= 0 everywhere: the zero-mass branch
        rows_p.append(p)
        rows_q.append(q)
        xs.append(x)
    samples = (0.0, 0.5, BELOW_ONE)
    k = len(samples)
    P = np.repeat(np.stack([np.stack([p, p]) for p in rows_p]), k, axis=0)
    Q = np.repeat(np.stack(rows_q)[:, None], k, axis=0)
    drafts = np.repeat(np.array(xs), k)[:, None]
    n = len(drafts)
    t = _tables(P, Q, np.ones(n))
    try:
        tokens, num = _call(verifier, spec, t, drafts, np.full((n, 1), BELOW_ONE), np.tile(samples, 4))
    except (Exception, SystemExit) as e:  # noqa: BLE001
        return _refused("padded_vocab", e, f"{real} tokens padded to {width}, q(x) 4 ulps above p(x)")
    bad = _support_check(tokens, num, P, [f"sample {_coin(u)}" for u in np.tile(samples, 4)])
    if bad:
        return _probe("padded_vocab", "FAIL", f"{real} tokens padded to {width}, residual mass 0 after a rejection: "
                      + "; ".join(bad[:3]) + " (the zero-mass fallback must draw from p)", "support")  # fmt: skip
    return _probe("padded_vocab", "ok", f"{real} tokens padded to {width}: the zero-mass fallback drew from p, "
                  "never the padding", "support")  # fmt: skip


def far_tail(verifier: Callable[..., Any], spec: CallSpec, seed: int = 0) -> Probe:
    if spec.dtype == "float16":
        return _probe("far_tail", "skipped", "float16 cannot hold p = 2^-28", "law")
    head = 2.0 ** -np.arange(1, 25)  # 2^-1 .. 2^-24
    p = np.concatenate([head, np.full(TAIL_N, TAIL_P)])  # sums to 1 exactly
    V = p.size
    tail = np.arange(V - TAIL_N, V)
    race: Callable[[], set[str]] = getattr(verifier, "roles", set)  # a Supplied says which draws it saw
    rng = np.random.default_rng(seed + 2026)
    hits, rows = [0, 0], [0, 0]
    per_end, calls, rnd, is_race = 8192, 1, 0, False
    while rnd < calls:
        B = 2 * per_end
        us = np.minimum(np.concatenate([rng.random(per_end) * SLAB, 1.0 - rng.random(per_end) * SLAB]), BELOW_ONE)
        focus = rng.choice(tail, size=B)
        if hasattr(verifier, "focus"):
            verifier.focus = focus
        t = _tables(np.broadcast_to(p, (B, 2, V)).copy(), np.broadcast_to(p, (B, 1, V)).copy(), np.zeros(B))
        try:
            tokens, num = _call_full(verifier, spec, t, np.full((B, 1), PAD_TOKEN), np.full((B, 1), 0.5), us)
        except (Exception, SystemExit) as e:  # noqa: BLE001
            return _probe("far_tail", "FAIL", f"raised {type(e).__name__}: {e}", "law")
        finally:
            if hasattr(verifier, "focus"):
                verifier.focus = None
        is_race = "vocab" in race()
        calls = 4 if is_race else 1  # a race's fraction is 16x smaller: four times the rows
        won = (tokens[:, 0] == focus) if is_race else np.isin(tokens[:, 0], tail)
        for end in (0, 1):
            hits[end] += int(won[end * per_end : (end + 1) * per_end].sum())
            rows[end] += per_end
        rnd += 1
    w = SLAB * (TAIL_N if is_race else 1)
    rate = w * sum(h / r for h, r in zip(hits, rows, strict=True))
    f0 = TAIL_N * TAIL_P / w  # the fraction at the tail's end under a correct sampler
    sd = w * np.sqrt(f0 * (1 - f0) / rows[0])
    z = (rate - TAIL_N * TAIL_P) / sd
    how = ("a race over the vocabulary, one tail column's uniform from the slabs" if is_race
           else "the sample uniform from the slabs")  # fmt: skip
    detail = (f"16 tokens of p = 2^-28 (2^-24 in all) come out at {rate / 2.0**-24:.3g} x their rate "
              f"(z = {z:+.1f}; {how}; {sum(rows):,} rows)")  # fmt: skip
    if abs(z) > 5:
        return _probe("far_tail", "FAIL", detail + ": a float32 exponential race never draws E below 2^-24, a "
                      "float32 running sum drops them", "law")  # fmt: skip
    return _probe("far_tail", "ok", detail, "law")


def q_other_logits(verifier: Callable[..., Any], spec: CallSpec, J: int = 8192) -> Probe:
    V = 11
    sure_p, sure_q = np.zeros(V), np.zeros(V)
    sure_p[[2, 6]] = [0.625, 0.375]  # p(2) > q(2): accepted by any coin, either convention
    sure_q[[2, 6]] = [0.3125, 0.6875]
    tests = [(0.30078125 * 0.6, 0.30078125 + 0.0013), (0.7 * 0.4471, 0.4471), (0.35 * 0.6031, 0.6031)]
    grid = (np.arange(J) + 0.5) / J
    bad, said = [], []
    for i, (px, qx) in enumerate(tests):
        pi, qi = np.zeros(V), np.zeros(V)
        pi[[4, 8]] = [px, 1 - px]
        qi[[4, 9]] = [qx, 1 - qx]
        pi, qi = _round_to(pi, spec.dtype), _round_to(qi, spec.dtype)
        ratio = pi[4] / qi[4]
        P = np.stack([sure_p] * i + [pi] + [sure_p] * (4 - i - 1))  # (K+1 = 4, V)
        Q = np.stack([sure_q] * i + [qi] + [sure_q] * (3 - i - 1))  # (K = 3, V)
        x = np.array([2] * i + [4] + [PAD_TOKEN] * (3 - i - 1))
        coins = np.full((J, 3), 0.5)
        coins[:, i] = grid
        t = _tables(np.broadcast_to(P, (J, 4, V)).copy(), np.broadcast_to(Q, (J, 3, V)).copy(), np.full(J, i + 1))
        try:
            tokens, num = _call_full(verifier, spec, t, np.broadcast_to(x, (J, 3)).copy(), coins, np.full(J, 0.5))
        except (Exception, SystemExit) as e:  # noqa: BLE001
            return _probe("q_other_logits", "FAIL", f"raised {type(e).__name__}: {e}", "law")
        frac = float((num >= i + 2).mean())
        said.append(f"position {i}: {frac:.5f} for p/q = {ratio:.5f}")
        if abs(frac - ratio) > 2.0 / J:
            bad.append(said[-1])
    if bad:
        return _probe("q_other_logits", "FAIL", "accepted at another rate than p/q of the q handed in: "
                      + "; ".join(bad) + f" (+- {2 / J:.1e}): it reads another q", "law")  # fmt: skip
    return _probe("q_other_logits", "ok", "acceptance at p/q of the q handed in, positions 0-2 (+- "
                  f"{2 / J:.1e}, {3 * J:,} rows)", "law")  # fmt: skip


PROBES_2026: tuple[Callable[..., Probe], ...] = (q_above_one, inf_in_q, tile_tail, padded_vocab, far_tail,
                                                  q_other_logits)  # fmt: skip


def run_2026(verifier: Callable[..., Any], spec: CallSpec, seed: int = 0) -> list[Probe]:
    """Every probe above on ``verifier``: one that takes ``uniforms=``, or a
    :class:`~specviz.proof.intercept.Supplied`."""
    out = []
    for fn in PROBES_2026:
        try:
            out.append(fn(verifier, spec, seed) if fn is far_tail else fn(verifier, spec))
        except (Exception, SystemExit) as e:  # noqa: BLE001
            out.append(_probe(fn.__name__, "FAIL", f"raised {type(e).__name__}: {e}", "law"))
    return out


__all__ = ["run_2026", "PROBES_2026", "q_above_one", "inf_in_q", "tile_tail", "padded_vocab", "far_tail",
           "q_other_logits"]  # fmt: skip
