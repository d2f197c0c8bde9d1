"""Fault probes: single calls at the points where shipped verifiers break, whatever their law.

# B rows, K drafts (padded width), V vocabulary

A sampling test judges a law; some faults do not change the law, or change it on a set of
uniforms too small to sample. Each probe here is one call with chosen inputs and explicit
uniforms, and a stated right answer:

- ``zero_coin``: a draft the target rules out (p(x) = 0, q(x) > 0) under coins 0, 2^-53,
  1/2 and 1 - 2^-53. Accepting it under any coin emits a token the target cannot produce; a
  coin of exactly 0 is what catches ``u * q <= p`` (SGLang #35771, and Hugging Face's
  ``_speculative_sampling``): a float32 coin is 0 once in 2^24 draws.
- ``coin_at_ratio``: coins at u = p/q exactly, and just below. The contract's coin accepts
  iff u * q(x) < p(x): below accepts, at rejects. Another valid convention (1 - u, say)
  differs on these points, so this probe only informs; the sweep over the uniforms
  (:mod:`specviz.proof.sweep`) judges such a verifier's law.
- ``nan_row``, ``inf_row``, ``nan_residual``: a row the call must read holds NaN or infinity
  (the bonus row, or the draft row of the residual after a certain rejection). The call must
  raise; returning anything (a token V, a -1, a token of a NaN row) fails.
- ``no_drafts``: rows with num_draft = 0 emit one token, from target row 0; ``empty_batch``:
  B = 0 returns empty results (or refuses with a ValueError); ``last_token``: a draft of
  token V - 1 is accepted and a bonus of V - 1 emitted.
- ``batch_invariance``: a row's tokens depend only on its own inputs and uniforms: the batch
  permuted, split in two and each row alone give the same tokens row for row.
- ``padded_vs_flat``: where the verifier has both layouts, the same tokens in both.

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


class Probe(NamedTuple):
    name: str
    verdict: str  # "ok" | "FAIL" | "info" | "skipped"
    detail: str
    kind: str = "law"  # "law" | "support" | "policy": what a failure means

    @property
    def failed(self) -> bool:
        return self.verdict == "FAIL"


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
    bad = [f"coin {c:.3g}: tokens {tokens[i, : num[i]].tolist()}" for i, c in enumerate(COINS)
           if 3 in tokens[i, : num[i]].tolist() or num[i] != 1]  # fmt: skip
    if bad:
        return Probe("zero_coin", "FAIL", "a draft with p(x) = 0 was accepted or emitted: " + "; ".join(bad)
                     + " (u * q <= p accepts it at u = 0)")  # fmt: skip
    return Probe("zero_coin", "ok", "a draft with p(x) = 0 rejected under coins 0, 2^-53, 1/2 and 1 - 2^-53")


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
        return Probe(name, "ok", f"{what}: raised {type(e).__name__}")
    return Probe(name, "FAIL", f"{what}: returned tokens {tokens[0, : max(int(num[0]), 1)].tolist()} "
                 "instead of raising")  # fmt: skip


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
        good = (num == 1).all() and (tokens[:, 0] == V - 1).all() and (tokens[:, 1:] == PAD_TOKEN).all()
        out.append(Probe("no_drafts", "ok" if good else "FAIL",
                         f"num_draft = 0: tokens {tokens.tolist()} (each row: [{V - 1}, -1, -1] from row 0)"))
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
    out = [zero_coin, coin_at_ratio]
    probes: list[Probe] = []
    for fn in out:
        try:
            probes.append(fn(verifier, spec))
        except (Exception, SystemExit) as e:  # noqa: BLE001
            probes.append(Probe(fn.__name__, "FAIL", f"raised {type(e).__name__}: {e}"))
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
    """One line per probe, wrapped at ``width`` columns (room for an indent under 100)."""
    import textwrap

    lines = []
    for p in probes:
        lines += textwrap.wrap(f"{p.verdict:7s} {p.name:17s} {p.detail}", width, subsequent_indent=" " * 26)
    return lines


def probe_records(probes: list[Probe]) -> list[dict[str, str]]:
    """The probes as JSON-ready records (``prove --json`` and ``prove --vocab --json``)."""
    return [{"name": p.name, "verdict": p.verdict, "detail": p.detail, "kind": p.kind} for p in probes]


__all__ = ["Probe", "run_probes", "probe_lines", "probe_records"]
