"""Every fault probe, on every verifier: explicit uniforms, ignored uniforms, or its own randomness.

# B rows, K drafts (padded width), V vocabulary

:func:`run_all` decides how the verifier is called, then runs the probes of
:mod:`specviz.proof.probes` and :mod:`specviz.proof.probes_2026`:

- it names ``uniforms`` and reads them (the same uniforms under two generator states give the
  same tokens): the probes call it with their chosen uniforms, as before;
- it names ``uniforms`` (or takes ``**kwargs``) but draws its own randomness: a line says so,
  and it is treated as the next case (today's probes would otherwise judge its own draws);
- it takes no ``uniforms``: each call runs inside :func:`specviz.proof.intercept.supplying`,
  which hands the chosen uniforms to the draws it makes (:class:`~specviz.proof.intercept.Supplied`).
  A probe during which a draw could not be matched to the coins or the sample (or a random
  source moved that interception does not cover) is "skipped" with the reason, unless its right
  answer does not depend on the draws (a NaN row must be refused whatever the coins).

Every result carries a ``kind``: what a failure of it means (law, support or policy).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from . import probes as fault
from .handover import CallSpec, Handover, draw_round, realistic_tables
from .intercept import ZERO_RATE, Supplied, ignores_uniforms, takes_uniforms
from .probes import NUMPY64, Probe
from .probes_2026 import PROBES_2026, far_tail, run_2026

KIND = {"zero_coin": "support", "boundary_draw": "support", "last_token": "support", "coin_at_ratio": "law",
        "no_drafts": "law", "batch_invariance": "law", "padded_vs_flat": "law", "nan_row": "policy",
        "inf_row": "policy", "nan_residual": "policy", "empty_batch": "policy", "all": "policy"}  # fmt: skip
DRAW_FREE = ("nan_row", "inf_row", "nan_residual", "empty_batch")  # right answers that do not depend on the draws


def _kinded(p: Probe) -> Probe:
    return p._replace(kind=KIND[p.name]) if p.name in KIND and p.kind == "law" else p


def calling_mode(verifier: Callable[..., Any], spec: CallSpec, seed: int = 0) -> tuple[str, str]:
    """("uniforms" | "ignores" | "own", why) for ``verifier`` called as ``spec`` says."""
    import inspect

    try:
        params = inspect.signature(verifier).parameters.values()
        varkw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    except (TypeError, ValueError):
        varkw = True
    if not takes_uniforms(verifier) and not varkw:
        return "own", "it takes no uniforms="
    t = realistic_tables(64, 3, 12, seed=seed + 1, dtype=spec.dtype)
    r = draw_round(np.random.default_rng(seed + 1), t)
    try:
        why = ignores_uniforms(verifier, Handover(t, spec).call(r), 12, 3)
    except TypeError as e:
        if "uniforms" in str(e):
            return "own", f"it takes no uniforms= ({e})"
        return "uniforms", ""
    except (Exception, SystemExit):  # noqa: BLE001 - the probes report it where it matters
        return "uniforms", ""
    return ("ignores", why) if why else ("uniforms", "")


def _one(fn: Callable[..., Any], target: Callable[..., Any], spec: CallSpec, *args: Any) -> list[Probe]:
    try:
        out = fn(target, spec, *args)
    except (Exception, SystemExit) as e:  # noqa: BLE001
        out = Probe(fn.__name__, "FAIL", f"raised {type(e).__name__}: {e}")
    return [_kinded(p) for p in (out if isinstance(out, list) else [out])]


def _rate_note(p: Probe, w: Supplied) -> Probe:
    """A support failure under interception, its rate per draw said for the coin dtype the verifier drew."""
    dtypes = sorted({d.dtype for d in w.draws if d.role == "coins"})
    if p.verdict != "FAIL" or p.name != "zero_coin" or not dtypes:
        return p
    rates = " or ".join(f"{ZERO_RATE.get(d, '?')} per {d} coin" for d in dtypes)
    detail = re.sub(r"\([^()]* per draw\)", f"({rates})", p.detail, count=1)  # the table's dtype named it
    return p._replace(detail=detail if detail != p.detail else f"{p.detail}; a coin of exactly 0 comes {rates}")


def _gate(probes: list[Probe]) -> list[Probe]:
    """q_other_logits measures acceptance against p/q: a rule's rate, the verifier's only if it keeps the
    contract's coin (coin_at_ratio ok). Another rule or coin convention gets an "info" line instead."""
    by = {p.name: p for p in probes}
    ratio, q = by.get("coin_at_ratio"), by.get("q_other_logits")
    if ratio is None or q is None or ratio.verdict == "ok" or q.verdict != "FAIL":
        return probes
    info = q._replace(verdict="info", detail="acceptance is not p/q's here, as coin_at_ratio found (another rule or "
                      f"coin convention), so p/q is not its rate to keep; the law tests judge it ({q.detail[:160]})")
    return [info if p is q else p for p in probes]


def _intercepted(verifier: Callable[..., Any], spec: CallSpec, seed: int) -> list[Probe]:
    w = Supplied(verifier)
    out: list[Probe] = []
    runs: list[tuple[Callable[..., Any], tuple]] = [(fault.zero_coin, ()), (fault.boundary_draw, ()),
                                                    (fault.coin_at_ratio, ()),
                                                    (fault.bad_rows, ()), (fault.edges, ()),
                                                    (fault.batch_invariance, (seed,))]  # fmt: skip
    runs += [(fn, (seed,) if fn is far_tail else ()) for fn in PROBES_2026]
    seen: list[str] = []
    for fn, args in runs:
        w.reset()
        got = _one(fn, w, spec, *args)
        if w.draws:
            seen.append(w.seen())
        for p in got:
            if w.problems and p.name not in DRAW_FREE and p.verdict != "skipped":
                why = "; ".join(dict.fromkeys(w.problems))
                p = p._replace(verdict="skipped", detail=f"interception could not apply ({why[:160]}); it "
                               f"returned: {p.detail[:120]}")  # fmt: skip
            out.append(_rate_note(p, w))
    draws = seen[0] if seen else "no draws seen"
    head = Probe("interception", "info", f"the verifier draws its own randomness; the probes supplied its draws "
                 f"({draws})", "policy")  # fmt: skip
    return [head, *out]


def run_all(verifier: Callable[..., Any], spec: CallSpec = NUMPY64, *, flat: Callable[..., Any] | None = None,
            seed: int = 0) -> list[Probe]:  # fmt: skip
    """Every probe on ``verifier`` however it draws (see the module docstring), each with its kind."""
    mode, why = calling_mode(verifier, spec, seed)
    if mode == "uniforms":
        return _gate([_kinded(p) for p in fault.run_probes(verifier, spec, flat=flat, seed=seed)] + run_2026(
            verifier, spec, seed))  # fmt: skip
    out = _gate(_intercepted(verifier, spec, seed))
    if mode == "ignores":
        out.insert(0, Probe("uniforms", "info", f"{why}; treated as drawing its own randomness", "policy"))
    return out


def matched_supply(verifier: Callable[..., Any], spec: CallSpec, seed: int = 0) -> Supplied | None:
    """``verifier`` behind :class:`Supplied` when the paired test and the sweep can run on it, else None.

    It qualifies when, on one realistic call (B = 12, K = 3, V = 64, ragged), every draw it made
    was matched (the coins as one draw of B*K or N values, the replacement/bonus as one of B
    values: a uniform, or ``multinomial`` read as an inverse CDF in index order, the
    reference's convention) and no random source moved behind interception's back. A race over
    the vocabulary, scalar draws row by row, or a private generator do not qualify.
    """
    w = Supplied(verifier)
    t = realistic_tables(64, 3, 12, seed=seed + 1, dtype=spec.dtype)
    call = Handover(t, spec).call(draw_round(np.random.default_rng(seed + 1), t))
    try:
        w(*call.args, uniforms=call.uniforms)
    except (Exception, SystemExit):  # noqa: BLE001 - the black-box tests report it
        return None
    if w.problems or w.roles() != {"coins", "sample"}:
        return None
    w.reset()
    return w


def draws_own(probes: list[Probe]) -> bool:
    """Whether :func:`run_all` found the verifier drawing its own randomness (no paired test on its uniforms)."""
    return any(p.name == "interception" for p in probes)


__all__ = ["run_all", "calling_mode", "draws_own", "matched_supply", "KIND"]
