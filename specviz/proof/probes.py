"""Fault probes: single calls at the points where shipped verifiers break, whatever their law.

# B rows, K drafts (padded width), V vocabulary

A sampling test judges a law; some faults do not change the law, or change it on a set of
uniforms too small to sample. Each probe here is one call with chosen inputs and explicit
uniforms, and a stated right answer. Each has a *kind*, the verdict it feeds
(:mod:`specviz.proof.verdicts`): ``law`` (the output distribution on valid input), ``support``
(a token the target rules out, or an id outside [0, V), can come out: measure zero in law, so
no sampled test sees it, but it happens at a stated rate per draw) and ``policy`` (what the
call does with invalid input: a warning, "warn", not a failure, unless ``prove --strict``):

- ``zero_coin`` (support): a draft the target rules out (p(x) = 0, q(x) > 0) under coins 0, 2^-53,
  1/2 and 1 - 2^-53. Accepting it under any coin emits a token the target cannot produce; a
  coin of exactly 0 is what catches ``u * q <= p`` (SGLang #35771, and Hugging Face's
  ``_speculative_sampling``): a float32 coin is 0 once in 2^24 draws.
- ``boundary_draw`` (support): the bonus draw and the replacement draw at coins 0, 2^-53 and
  1 - 2^-53 from rows whose first and last tokens have p = 0. An inverse CDF that counts
  ``cumsum < u * total`` returns token 0 at a coin of exactly 0 even though p(0) = 0.
- ``coin_at_ratio`` (law, informative): coins at u = p/q exactly, and just below. The contract's coin accepts
  iff u * q(x) < p(x): below accepts, at rejects. Another valid convention (1 - u, say)
  differs on these points, so this probe only informs; the sweep over the uniforms
  (:mod:`specviz.proof.sweep`) judges such a verifier's law.
- ``nan_row``, ``inf_row``, ``nan_residual``, ``negative_row``, ``unnormalized_row``,
  ``draft_id_out_of_range`` (policy): a row the call must read holds NaN, infinity, a negative
  entry or sums to 2 (the bonus row, or the draft row of the residual after a certain
  rejection), or a draft id is V. The contract raises; returning anything is reported with
  what came back.
- ``no_drafts`` (law): rows with num_draft = 0 emit one token, from target row 0 (a wrong token
  at a boundary coin alone is left to ``boundary_draw``); ``empty_batch``:
  B = 0 returns empty results (or refuses with a ValueError); ``last_token``: a draft of
  token V - 1 is accepted and a bonus of V - 1 emitted.
- ``batch_invariance`` (law): a row's tokens depend only on its own inputs and uniforms: the batch
  permuted, split in two and each row alone give the same tokens row for row.
- ``padded_vs_flat`` (law): where the verifier has both layouts, the same tokens in both.

Each probe calls the verifier in the asked dtype, backend and device (:class:`~specviz.proof.handover.CallSpec`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..verifiers.verify import PAD_TOKEN
from .handover import CallSpec, Handover, Round, Tables, draw_round, outcome, realistic_tables

V_PROBE = 11  # an odd small vocabulary; token V - 1 = 10 is a real column
NUMPY64 = CallSpec("float64", "numpy")  # prove's own form, the default without --vocab
COINS = (0.0, 2.0**-53, 0.5, 1.0 - 2.0**-53)
KINDS = ("law", "support", "policy")  # the verdicts a probe feeds (specviz.proof.verdicts)

# How often a coin drawn in each dtype is exactly 0 (or its largest value): the rate per draw of a support
# fault seen at that coin. float64: NumPy's Generator.random and torch.rand draw 53 bits; float32: 24 bits.
# Half precision, measured: torch.rand(10_000_000, dtype=...) x 20 with torch.Generator().manual_seed(0)
# gave 390,429 zeros in 2e8 (bfloat16, 1.95e-3, about 2^-9) and 48,684 (float16, 2.43e-4, about 2^-12).
COIN_RATE = {"float64": (2.0**-53, "2^-53"), "float32": (2.0**-24, "2^-24"), "bfloat16": (1.95e-3, "1.95e-3"),
             "float16": (2.43e-4, "2.43e-4")}  # fmt: skip


class Probe(NamedTuple):
    name: str
    verdict: str  # "ok" | "FAIL" | "warn" (policy) | "info" | "skipped"
    detail: str
    kind: str = "law"  # "law" | "support" | "policy": the verdict it feeds

    @property
    def failed(self) -> bool:
        """A law or support failure (a policy finding is a warning: :attr:`warned`)."""
        return self.verdict == "FAIL" and self.kind != "policy"

    @property
    def warned(self) -> bool:
        """Invalid input the call accepted: a policy probe's "warn", or its "FAIL" (probes_2026 says FAIL)."""
        return self.verdict == "warn" or (self.verdict == "FAIL" and self.kind == "policy")


def coin_rate(dtype: str) -> str:
    """The rate per draw of a coin of exactly 0 in ``dtype``, in words ("2^-53 per draw")."""
    return COIN_RATE.get(dtype, COIN_RATE["float32"])[1] + " per draw"


def _tables(P: np.ndarray, Q: np.ndarray, num_draft: Sequence[int] | np.ndarray) -> Tables:
    return Tables(P, Q, np.asarray(num_draft, dtype=np.int64), np.cumsum(Q, axis=-1))


def _call(verifier: Callable[..., Any], spec: CallSpec, t: Tables, x: np.ndarray, ua: np.ndarray,
          us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(tokens (B, K+1), num_tokens (B,)) of one call in the spec's form."""
    c = Handover(t, spec).call(Round(np.asarray(x, dtype=np.int64), np.asarray(ua, float), np.asarray(us, float)))
    return outcome(verifier(*c.args, uniforms=c.uniforms), x.shape[0], x.shape[1])


def _row(values: dict[int, float], V: int = V_PROBE) -> np.ndarray:
    r = np.zeros(V)
    for k, v in values.items():
        r[k] = v
    return r


def zero_coin(verifier: Callable[..., Any], spec: CallSpec) -> Probe:
    V = V_PROBE
    p = _row({0: 0.5, 1: 0.25, V - 1: 0.25})  # p(3) = 0
    q = _row({3: 0.5, 0: 0.25, 1: 0.25})  # q(3) = 1/2: the drafter proposes 3
    n = len(COINS)
    t = _tables(np.stack([np.stack([p, p])] * n), np.stack([q[None]] * n), np.ones(n))
    tokens, num = _call(verifier, spec, t, np.full((n, 1), 3), np.array(COINS)[:, None], np.full(n, 0.5))
    bad = [(c, tokens[i, : num[i]].tolist()) for i, c in enumerate(COINS)
           if 3 in tokens[i, : num[i]].tolist() or num[i] != 1]  # fmt: skip
    if bad:
        c, got = bad[0]
        rate = coin_rate(spec.dtype) if c in (0.0, COINS[-1]) else "whenever it is drafted: not a boundary"
        return Probe("zero_coin", "FAIL", f"coin {_coin(c)} accepts draft 3 with p = 0 ({rate}): tokens {got}; "
                     + (f"also at coins {', '.join(_coin(b[0]) for b in bad[1:])}; " if len(bad) > 1 else "")
                     + "fix: accept iff u * q(x) < p(x), strictly", "support")  # fmt: skip
    return Probe("zero_coin", "ok", "a draft with p(x) = 0 rejected under coins 0, 2^-53, 1/2 and 1 - 2^-53",
                 "support")


def _coin(c: float) -> str:
    """A boundary coin as a reader writes it: 0.0, 2^-53, 1 - 2^-53."""
    return {0.0: "0.0", 2.0**-53: "2^-53", 1.0 - 2.0**-53: "1 - 2^-53"}.get(c, f"{c:.3g}")


def boundary_draw(verifier: Callable[..., Any], spec: CallSpec) -> Probe:
    """The bonus and the replacement draw at the boundary coins, from rows with p = 0 at both ends."""
    V = V_PROBE
    p = _row({2: 0.25, 5: 0.5, V - 3: 0.25})  # p = 0 at tokens 0, 1 and V - 2, V - 1
    q = _row({0: 0.5, 5: 0.5})  # draft 0 has p(0) = 0: rejected, the residual is p without token 5's q-share
    coins = np.array([0.0, 2.0**-53, 1.0 - 2.0**-53])
    n = len(coins)
    bonus = _tables(np.stack([np.stack([p, p])] * n), np.stack([q[None]] * n), np.zeros(n))
    resid = _tables(np.stack([np.stack([p, p])] * n), np.stack([q[None]] * n), np.ones(n))
    found = []
    draws = (("bonus draw", bonus, np.full((n, 1), PAD_TOKEN)), ("replacement draw", resid, np.zeros((n, 1))))
    for what, t, x in draws:
        tokens, num = _call(verifier, spec, t, x.astype(np.int64), np.full((n, 1), 0.5), coins)
        # Support is what the target rules out: p = 0 (a token the residual lacks but p has is the law's
        # business, and lossless rules other than the residual's, sample-and-match, emit it rightly).
        for i, c in enumerate(coins):
            tok = int(tokens[i, int(num[i]) - 1]) if 1 <= num[i] <= 2 else None
            if tok is None or not 0 <= tok < V:
                found.append(f"coin {_coin(float(c))} of the {what} emits id {tok} outside [0, {V})")
            elif p[tok] == 0:
                found.append(f"coin {_coin(float(c))} of the {what} emits token {tok} with p = 0")
    if found:
        return Probe("boundary_draw", "FAIL", f"{found[0]} ({coin_rate(spec.dtype)})"
                     + (f"; also: {'; '.join(found[1:])}" if len(found) > 1 else "")
                     + "; fix: count cumsum <= u * total in the inverse CDF (a coin of 0 then skips tokens with p = 0)",
                     "support")  # fmt: skip
    return Probe("boundary_draw", "ok", "bonus and replacement draws at coins 0, 2^-53 and 1 - 2^-53 emit only "
                 "tokens with p > 0", "support")  # fmt: skip


def coin_at_ratio(verifier: Callable[..., Any], spec: CallSpec) -> Probe:
    p = _row({0: 0.25, 1: 0.5, 2: 0.25})
    q = _row({0: 0.5, 1: 0.25, 2: 0.25})  # p(0) / q(0) = 1/2 exactly
    r = 0.5
    coins = np.array([np.nextafter(r, 0.0), r])
    t = _tables(np.stack([np.stack([p, p])] * 2), np.stack([q[None]] * 2), np.ones(2))
    tokens, num = _call(verifier, spec, t, np.zeros((2, 1), dtype=np.int64), coins[:, None], np.full(2, 0.5))
    below, at = bool(num[0] == 2), bool(num[1] == 2)
    if below and not at:
        return Probe("coin_at_ratio", "ok", "u just below p/q accepts, u = p/q rejects: the contract's u * q < p")
    return Probe("coin_at_ratio", "info", f"u just below p/q {'accepts' if below else 'rejects'}, u = p/q "
                 f"{'accepts' if at else 'rejects'}: another coin convention (judge its law by the sweep)")  # fmt: skip


def _must_raise(name: str, verifier: Callable[..., Any], spec: CallSpec, t: Tables, x: np.ndarray,
                ua: np.ndarray, what: str) -> Probe:  # fmt: skip
    try:
        tokens, num = _call(verifier, spec, t, x, ua, np.full(x.shape[0], 0.5))
    except (Exception, SystemExit) as e:  # noqa: BLE001 - any refusal is right; the probe reports which
        return Probe(name, "ok", f"{what}: raised {type(e).__name__}", "policy")
    return Probe(name, "warn", f"{what}: returned tokens {tokens[0, : max(int(num[0]), 1)].tolist()} "
                 "instead of raising", "policy")  # fmt: skip


def bad_rows(verifier: Callable[..., Any], spec: CallSpec) -> list[Probe]:
    V = V_PROBE
    p = _row({0: 0.5, 1: 0.25, V - 1: 0.25})
    q = _row({3: 0.5, 0: 0.25, 1: 0.25})
    out = []
    for name, value in (("nan_row", np.nan), ("inf_row", np.inf)):
        bad = p.copy()
        bad[1] = value
        t = _tables(np.stack([bad, p])[None], q[None, None], [0])  # num_draft 0: the bonus reads row 0 in full
        out.append(_must_raise(name, verifier, spec, t, np.full((1, 1), PAD_TOKEN), np.full((1, 1), 0.5),
                               f"a target row with {value} drawn as the bonus"))  # fmt: skip
    qbad = q.copy()
    qbad[5] = np.nan
    t = _tables(np.stack([p, p])[None], qbad[None, None], [1])  # draft 3 has p = 0: rejected, the residual reads q
    out.append(_must_raise("nan_residual", verifier, spec, t, np.full((1, 1), 3), np.full((1, 1), 0.5),
                           "a draft row with NaN read by the residual"))  # fmt: skip
    neg = p.copy()
    neg[2] = -0.25  # the row still sums to 1
    neg[0] += 0.25
    t = _tables(np.stack([neg, p])[None], q[None, None], [0])
    out.append(_must_raise("negative_row", verifier, spec, t, np.full((1, 1), PAD_TOKEN), np.full((1, 1), 0.5),
                           "a target row with a negative entry drawn as the bonus"))  # fmt: skip
    t = _tables(np.stack([2 * p, p])[None], q[None, None], [0])
    out.append(_must_raise("unnormalized_row", verifier, spec, t, np.full((1, 1), PAD_TOKEN), np.full((1, 1), 0.5),
                           "a target row summing to 2 drawn as the bonus"))  # fmt: skip
    t = _tables(np.stack([p, p])[None], q[None, None], [1])
    out.append(_must_raise("draft_id_out_of_range", verifier, spec, t, np.full((1, 1), V), np.full((1, 1), 0.5),
                           f"a draft id V = {V}"))  # fmt: skip
    return out


def edges(verifier: Callable[..., Any], spec: CallSpec) -> list[Probe]:
    V = V_PROBE
    out = []
    one = _row({V - 1: 1.0})
    p = _row({0: 0.5, V - 1: 0.5})
    # num_draft = 0 in a padded width of 2: one token, from target row 0 (one-hot on V - 1).
    t = _tables(np.stack([np.stack([one, p, p])] * 3), np.stack([np.stack([p, p])] * 3), [0, 0, 0])
    try:
        tokens, num = _call(verifier, spec, t, np.full((3, 2), PAD_TOKEN), np.full((3, 2), 0.5),
                            np.array([0.0, 0.5, 1.0 - 2.0**-53]))  # fmt: skip
        # The row at coin 1/2 judges the law; a wrong token at a boundary coin alone is boundary_draw's finding.
        good = (num == 1).all() and tokens[1, 0] == V - 1 and (tokens[:, 1:] == PAD_TOKEN).all()
        edge = "" if (tokens[:, 0] == V - 1).all() else " (a wrong token at a boundary coin: see boundary_draw)"
        out.append(Probe("no_drafts", "ok" if good else "FAIL",
                         f"num_draft = 0: tokens {tokens.tolist()} (each row: [{V - 1}, -1, -1] from row 0){edge}"))
    except (Exception, SystemExit) as e:  # noqa: BLE001
        out.append(Probe("no_drafts", "FAIL", f"num_draft = 0 raised {type(e).__name__}: {e}"))
    # Token V - 1 drafted and accepted (p = q, coin 0), then a bonus of V - 1 from a one-hot row.
    t = _tables(np.stack([p, one])[None], p[None, None], [1])
    try:
        tokens, num = _call(verifier, spec, t, np.full((1, 1), V - 1), np.full((1, 1), 0.5), np.array([0.5]))
        good = tokens[0].tolist() == [V - 1, V - 1]
        out.append(Probe("last_token", "ok" if good else "FAIL", f"draft V - 1 with p = q: tokens "
                         f"{tokens[0].tolist()} (want [{V - 1}, {V - 1}])"))  # fmt: skip
    except (Exception, SystemExit) as e:  # noqa: BLE001
        out.append(Probe("last_token", "FAIL", f"a draft of token V - 1 raised {type(e).__name__}: {e}"))
    t = _tables(np.zeros((0, 3, V)), np.zeros((0, 2, V)), np.zeros(0))
    try:
        tokens, num = _call(verifier, spec, t, np.zeros((0, 2), dtype=np.int64), np.zeros((0, 2)), np.zeros(0))
        out.append(Probe("empty_batch", "ok", f"B = 0: tokens of shape {tokens.shape}"))
    except ValueError as e:
        out.append(Probe("empty_batch", "ok", f"B = 0 refused: {type(e).__name__}"))
    except (Exception, SystemExit) as e:  # noqa: BLE001
        out.append(Probe("empty_batch", "FAIL", f"B = 0 crashed: {type(e).__name__}: {e}"))
    return out


def batch_invariance(verifier: Callable[..., Any], spec: CallSpec, seed: int = 0, V: int = 1000) -> Probe:
    t = realistic_tables(V, 3, 12, seed=seed, dtype=spec.dtype)
    rng = np.random.default_rng(seed)
    r = draw_round(rng, t)
    whole, _ = _call(verifier, spec, t, r.draft_tokens, r.accept, r.sample)

    def part(idx: np.ndarray) -> np.ndarray:
        sub = Tables(t.target[idx], t.draft[idx], t.num_draft[idx], t.cdf[idx])
        return _call(verifier, spec, sub, r.draft_tokens[idx], r.accept[idx], r.sample[idx])[0]

    perm = rng.permutation(12)
    checks = {"permuted": (perm, part(perm)), "first half": (np.arange(6), part(np.arange(6))),
              "second half": (np.arange(6, 12), part(np.arange(6, 12))),
              "row 5 alone": (np.array([5]), part(np.array([5])))}  # fmt: skip
    bad = [f"{k}: rows {idx[(got != whole[idx]).any(axis=1)].tolist()}" for k, (idx, got) in checks.items()
           if (got != whole[idx]).any()]  # fmt: skip
    if bad:
        return Probe("batch_invariance", "FAIL", "a row's tokens depend on the rest of the batch: " + "; ".join(bad))
    return Probe("batch_invariance", "ok", "the same tokens per row permuted, split in two and alone (B = 12)")


def padded_vs_flat(padded: Callable[..., Any], flat: Callable[..., Any], spec: CallSpec, seed: int = 0) -> Probe:
    t = realistic_tables(1000, 4, 16, seed=seed, dtype=spec.dtype)
    r = draw_round(np.random.default_rng(seed), t)
    a = _call(padded, CallSpec(spec.dtype, spec.backend, spec.device, "padded"), t, r.draft_tokens, r.accept,
              r.sample)[0]  # fmt: skip
    b = _call(flat, CallSpec(spec.dtype, spec.backend, spec.device, "flat"), t, r.draft_tokens, r.accept,
              r.sample)[0]  # fmt: skip
    rows = np.flatnonzero((a != b).any(axis=1))
    if rows.size:
        return Probe("padded_vs_flat", "FAIL", f"rows {rows.tolist()} differ between the layouts")
    return Probe("padded_vs_flat", "ok", "the same tokens padded and flat (B = 16, V = 1000, ragged)")


def run_probes(verifier: Callable[..., Any], spec: CallSpec = NUMPY64, *,
               flat: Callable[..., Any] | None = None, seed: int = 0) -> list[Probe]:  # fmt: skip
    """Every probe on ``verifier`` (called as ``spec`` says; ``flat``: its flat-layout twin, if any).

    A verifier that takes no ``uniforms=`` cannot be probed: one "skipped" probe says so.
    """
    try:
        _call(verifier, spec, *_smoke())
    except TypeError as e:
        if "uniforms" in str(e):
            return [Probe("all", "skipped", f"the verifier takes no uniforms= ({e})")]
    except (Exception, SystemExit):  # noqa: BLE001 - the probes below report it where it matters
        pass
    out = [(zero_coin, "support"), (boundary_draw, "support"), (coin_at_ratio, "law")]
    probes: list[Probe] = []
    for fn, kind in out:
        try:
            probes.append(fn(verifier, spec))
        except (Exception, SystemExit) as e:  # noqa: BLE001
            probes.append(Probe(fn.__name__, "FAIL", f"raised {type(e).__name__}: {e}", kind))
    probes += bad_rows(verifier, spec) + edges(verifier, spec)
    try:
        probes.append(batch_invariance(verifier, spec, seed))
    except (Exception, SystemExit) as e:  # noqa: BLE001
        probes.append(Probe("batch_invariance", "FAIL", f"raised {type(e).__name__}: {e}"))
    if flat is not None:
        probes.append(padded_vs_flat(verifier if spec.layout == "padded" else flat, flat, spec, seed))
    return probes


def _smoke() -> tuple:
    p = _row({0: 0.5, 1: 0.5})
    return (_tables(np.stack([p, p])[None], p[None, None], [1]), np.zeros((1, 1), dtype=np.int64),
            np.full((1, 1), 0.5), np.array([0.5]))  # fmt: skip


def probe_lines(probes: list[Probe], width: int = 96) -> list[str]:
    """One line per probe (verdict, kind, name, finding), wrapped at ``width`` columns (room for an
    indent under 100)."""
    import textwrap

    lines = []
    for p in probes:
        lines += textwrap.wrap(f"{p.verdict:4s} {p.kind:7s} {p.name:21s} {p.detail}", width,
                               subsequent_indent=" " * 35)  # fmt: skip
    return lines


def probe_records(probes: list[Probe]) -> list[dict[str, str]]:
    """The probes as JSON-ready records (``prove --json`` and ``prove --vocab --json``)."""
    return [{"name": p.name, "kind": p.kind, "verdict": p.verdict, "detail": p.detail} for p in probes]


__all__ = ["COIN_RATE", "KINDS", "Probe", "coin_rate", "run_probes", "probe_lines", "probe_records"]
