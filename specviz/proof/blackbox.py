"""Black-box tests at realistic V: a verifier that draws its own randomness (``rng`` only), judged by sampling.

# B rows, K drafts (padded width), V vocabulary, N rows sampled

Without ``uniforms=`` there is no pairing and no sweep: the law has to be sampled. The joint
law of K + 1 tokens at V = 32000 has far too many cells for any N, so each test here is of one
token whose exact law is known, on one realistic context repeated N times (fresh drafts drawn
from q and the verifier's own randomness in every row):

- **first token**: the token at position 0 follows p_0, whatever happened there;
- **token at position i** (0 < i < K): among rows that kept their first i drafts, the token at
  i follows p_i (the output law given the context the kept drafts made, for any lossless rule);
- **bonus**: among rows that keep all K drafts, the last token follows p_K;

and, judged only against a rule the run names (``rule``: ``prove --rule``), otherwise reported
as efficiency (:meth:`BlackBox.efficiency`):

- **acceptance**: the share of rows accepting their first draft is sum min(p_0, q_0) for the
  residual rule, sum p_0 q_0 for sample-and-match (a z-test);
- **replacement at position i** (residual rule): among rows whose first rejection is at i, the
  token follows norm(max(0, p_i - q_i)).

Each chi-square pools the cells expected to hold fewer than 5 samples (:func:`specviz.proof.stats.chi_square`).
Beside each: the TV it detects with probability 0.99 at its N, and the rows that a test of TV
1e-3 would need. A failing test says where the law breaks: which part, at which position.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .handover import DEFAULT_SPEC, CallSpec, Handover, Round, Tables, TableSource, draw_round, outcome, tables_at
from .harness import raised_by_verifier
from .stats import ALPHA, MIN_TV, POWER, chi_square, needed_n

CHUNK_ELEMENTS = 8_000_000  # table entries per call: rows * (2K + 1) * V
COIN_MASS = 0.05  # q-mass of drafts with 0 < p/q < 1 the chosen context has at every position


class Check(NamedTuple):
    part: str  # "first token" | "token at i" | "bonus" | "acceptance" | "replacement at i"
    n: int  # samples the test had
    statistic: float
    critical: float
    tv: float  # observed TV (chi-square tests) or |rate - exact| (acceptance)
    detectable: float  # shift detected with probability POWER at this n
    rows_for_1e3: int  # rows the whole run would need to detect 1e-3 here
    passed: bool
    law: bool = True  # an output law (always judged); False: the residual rule's acceptance or replacement
    impossible: int = 0  # samples of tokens the law gives probability 0 (a support violation, when an output law)

    @property
    def conclusive(self) -> bool:
        return self.detectable <= MIN_TV or not self.passed

    @property
    def verdict(self) -> str:
        return "FAIL" if not self.passed else "pass" if self.conclusive else "inconcl."


class BlackBox(NamedTuple):
    checks: list[Check]
    V: int
    K: int
    rows: int
    seconds: float
    spec: CallSpec
    rule: str | None = None  # the rule acceptance and replacements are judged by; None: efficiency only
    first_kept: float = float("nan")  # share of rows that kept their first draft
    sum_min: float = float("nan")  # sum min(p_0, q_0): the residual rule's exact share
    sum_pq: float = float("nan")  # sum p_0 q_0: sample-and-match's exact share

    @property
    def failed(self) -> list[Check]:
        """The failing checks that judge: output laws, and a rule's checks when the run names the rule."""
        return [c for c in self.checks if not c.passed and (c.law or self.rule is not None)]

    def efficiency(self) -> str:
        """First drafts kept against the two rules' exact shares, in words."""
        return (f"keeps {self.first_kept:.3f} of first drafts where the residual rule keeps sum min(p, q) = "
                f"{self.sum_min:.3f} (sample-and-match: sum p q = {self.sum_pq:.3f})")  # fmt: skip

    def lines(self) -> list[str]:
        out = [f"black-box tests at V = {self.V:,}, K = {self.K}, {self.spec.describe()}:",
               f"  one realistic context, {self.rows:,} rows, {self.seconds:.1f} s; level {ALPHA}, power {POWER}",
               f"  {'part':18s} {'n':>8s} {'stat':>10s} {'crit':>9s} {'TV':>8s} {'detect TV':>9s} "
               f"{'N for 1e-3':>12s} verdict"]  # fmt: skip
        for c in self.checks:
            verdict = c.verdict if c.law or self.rule else f"{c.verdict}, no rule"
            out.append(f"  {c.part:18s} {c.n:8,d} {c.statistic:10.1f} {c.critical:9.1f} {c.tv:8.4f} "
                       f"{c.detectable:9.4f} {c.rows_for_1e3:12,d} {verdict}")  # fmt: skip
        if self.rule is None:
            out.append("  no rule: acceptance and replacements are efficiency, not verdicts (--rule residual|"
                       "sample-match judges them)")  # fmt: skip
        out.append(f"  efficiency: {self.efficiency()}")
        return out


def _rng_for(spec: CallSpec, seed: int) -> Any:
    if spec.backend == "numpy":
        return np.random.default_rng([seed, 3])
    import torch

    return torch.Generator(device=spec.device).manual_seed(seed)


def _chi(part: str, tokens: np.ndarray, law: np.ndarray, share: float, alpha: float) -> Check:
    law = law / law.sum()
    obs = np.bincount(tokens, minlength=law.size).astype(np.float64)
    c = chi_square(obs, law, alpha=alpha)
    need = needed_n(law, tv=1e-3, alpha=alpha)
    return Check(part, c.n, c.statistic, c.critical_value, c.tv, c.detectable_tv,
                 int(math.ceil(need / max(share, 1e-12))), c.passed, True, c.impossible)  # fmt: skip


def blackbox_tests(
    verifier: Callable[..., Any],
    *,
    V: int,
    K: int = 2,
    spec: CallSpec = DEFAULT_SPEC,
    n: int = 20_000,
    seed: int = 0,
    alpha: float = ALPHA,
    progress: Callable[[str], None] | None = None,
    seconds: float | None = None,
    rule: str | None = None,
    source: TableSource | None = None,
) -> BlackBox:
    """Sample ``verifier`` (called with ``rng=``) on one realistic context ``n`` times; test each token's law.

    ``seconds`` (``prove --budget``): stop drawing once this much CPU time has passed, and test the
    rows drawn by then (the lines say how many; each test's detectable TV is at that count).
    Anything the verifier raises comes out as :class:`~specviz.proof.harness.VerifierRaised`.

    The context is the row with K drafts of :func:`specviz.proof.handover.realistic_tables` whose
    first target row keeps the most cells at this ``n`` (the most power for the first-token test),
    among those where coins matter at every position (drafts with 0 < p/q < 1 carry at least
    :data:`COIN_MASS` of q; if no row has that, the best row regardless).
    ``rule`` ("residual" or "sample-match"): judge acceptance (and, for the residual rule, the
    replacements) against it; None: those are efficiency, not verdicts. ``source`` gives the rows
    instead (:func:`specviz.proof.handover.tables_at`). Returns :class:`BlackBox`.
    """
    from scipy import stats as sps

    t0, c0 = time.perf_counter(), time.process_time()
    t = tables_at(V, source)(K, 16, seed=seed, dtype=spec.dtype)
    full = np.flatnonzero(t.num_draft == K)
    cells = (t.target[full, 0] >= 5.0 / n).sum(axis=1)  # cells the first-token test keeps at this n
    # Coins must matter at every position: drafts with 0 < p/q < 1 carry at least COIN_MASS of q there
    # (where they carry none, every draft is accepted or rejected whatever the coin, and a wrong coin hides).
    P, Q = t.target[full, :K], t.draft[full]  # (F, K, V)
    matters = np.where((Q > P) & (P > 0), Q, 0.0).sum(axis=-1)  # (F, K) q-mass of drafts whose coin decides
    ok = (matters >= COIN_MASS).all(axis=1)  # (F,)
    b = int(full[np.argmax(np.where(ok, cells, -1))])
    p, q = t.target[b], t.draft[b]  # (K+1, V), (K, V)
    chunk = max(1, min(n, CHUNK_ELEMENTS // ((2 * K + 1) * V)))
    P = np.broadcast_to(p, (chunk, K + 1, V))
    Q = np.broadcast_to(q, (chunk, K, V))
    one = Tables(P, Q, np.full(chunk, K, dtype=np.int64), np.broadcast_to(np.cumsum(q, axis=-1), Q.shape))
    hand = Handover(one, spec)
    rng, draft_rng = _rng_for(spec, seed), np.random.default_rng([seed, 4])
    tokens, accepted, done, last = [], [], 0, t0
    while done < n:
        r = draw_round(draft_rng, one)
        c = hand.call(Round(r.draft_tokens, r.accept, r.sample))
        with raised_by_verifier("the black-box tests"):
            res = verifier(*c.args, rng=rng)
        tok, num = outcome(res, chunk, K)
        tokens.append(tok)
        accepted.append(num - 1)
        done += chunk
        if progress is not None and time.perf_counter() - last > 5:
            last = time.perf_counter()
            progress(f"black-box: {done:,} of {n:,} rows, about {(last - t0) / done * (n - done):.0f} s left")
        if seconds is not None and time.process_time() - c0 > seconds and done < n:  # CPU, as prove --budget
            n = done  # the budget is spent: test what was drawn
    tok, acc = np.concatenate(tokens)[:n], np.concatenate(accepted)[:n]
    checks = [_chi("first token", tok[:, 0], p[0], 1.0, alpha)]
    sum_min = float(np.minimum(p[0], q[0]).sum() / max(p[0].sum(), 1e-300))
    sum_pq = float((p[0] * q[0]).sum() / max(p[0].sum() * q[0].sum(), 1e-300))
    a_exact = sum_pq if rule == "sample-match" else sum_min
    rate = float((acc >= 1).mean())
    se = math.sqrt(max(a_exact * (1 - a_exact), 1e-12) / n)
    z = abs(rate - a_exact) / se
    crit = float(sps.norm.isf(alpha / 2))
    k = crit + float(sps.norm.isf(1 - POWER))
    checks.append(Check("acceptance", n, z, crit, abs(rate - a_exact), k * se,
                        int(math.ceil((k / 1e-3) ** 2 * a_exact * (1 - a_exact))), z <= crit, False))  # fmt: skip
    for i in range(1, K):  # the output law at i, given the i kept drafts as context
        rows = acc >= i
        if rows.sum() >= 50:
            checks.append(_chi(f"token at {i}", tok[rows, i], p[i], float(rows.mean()), alpha))
    full = acc == K
    if full.sum() >= 50:
        checks.append(_chi("bonus", tok[full, K], p[K], float(full.mean()), alpha))
    for i in range(K) if rule in (None, "residual") else ():
        rows = acc == i
        if rows.sum() >= 50:
            res = np.maximum(p[i] - q[i], 0.0)
            law = res if res.sum() > 0 else p[i]
            checks.append(_chi(f"replacement at {i}", tok[rows, i], law, float(rows.mean()), alpha)._replace(law=False))
    return BlackBox(checks, V, K, n, time.perf_counter() - t0, spec, rule, rate, sum_min, sum_pq)


__all__ = ["BlackBox", "Check", "blackbox_tests"]
