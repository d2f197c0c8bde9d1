"""Black-box tests at realistic V: a verifier that draws its own randomness (``rng`` only), judged by sampling.

# B rows, K drafts (padded width), V vocabulary, N rows sampled

Without ``uniforms=`` there is no pairing and no sweep: the law has to be sampled. The joint
law of K + 1 tokens at V = 32000 has far too many cells for any N, so each test here is of one
token whose exact law is known, on one realistic context repeated N times (fresh drafts drawn
from q and the verifier's own randomness in every row):

- **first token**: the token at position 0 follows p_0, whatever happened there;
- **replacement at position i**: among rows whose first rejection is at i, the token follows
  norm(max(0, p_i - q_i));
- **bonus**: among rows that keep all K drafts, the last token follows p_K;
- **acceptance**: the share of rows accepting their first draft is sum min(p_0, q_0) (a z-test).

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
from .stats import ALPHA, MIN_TV, POWER, chi_square, needed_n

CHUNK_ELEMENTS = 8_000_000  # table entries per call: rows * (2K + 1) * V


class Check(NamedTuple):
    part: str  # "first token" | "replacement at i" | "bonus" | "acceptance"
    n: int  # samples the test had
    statistic: float
    critical: float
    tv: float  # observed TV (chi-square tests) or |rate - exact| (acceptance)
    detectable: float  # shift detected with probability POWER at this n
    rows_for_1e3: int  # rows the whole run would need to detect 1e-3 here
    passed: bool

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

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def lines(self) -> list[str]:
        out = [f"black-box tests at V = {self.V:,}, K = {self.K}, {self.spec.describe()}:",
               f"  one realistic context, {self.rows:,} rows, {self.seconds:.1f} s; level {ALPHA}, power {POWER}",
               f"  {'part':18s} {'n':>8s} {'stat':>10s} {'crit':>9s} {'TV':>8s} {'detect TV':>9s} "
               f"{'N for 1e-3':>12s} verdict"]  # fmt: skip
        for c in self.checks:
            out.append(f"  {c.part:18s} {c.n:8,d} {c.statistic:10.1f} {c.critical:9.1f} {c.tv:8.4f} "
                       f"{c.detectable:9.4f} {c.rows_for_1e3:12,d} {c.verdict}")  # fmt: skip
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
                 int(math.ceil(need / max(share, 1e-12))), c.passed)  # fmt: skip


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
    source: TableSource | None = None,
) -> BlackBox:
    """Sample ``verifier`` (called with ``rng=``) on one realistic context ``n`` times; test each token's law.

    The context is the row with K drafts of :func:`specviz.proof.handover.realistic_tables` whose
    first target row keeps the most cells at this ``n`` (the most power for the first-token test);
    ``source`` gives the rows instead (:func:`specviz.proof.handover.tables_at`). Returns :class:`BlackBox`.
    """
    from scipy import stats as sps

    t0 = time.perf_counter()
    t = tables_at(V, source)(K, 16, seed=seed, dtype=spec.dtype)
    full = np.flatnonzero(t.num_draft == K)
    cells = (t.target[full, 0] >= 5.0 / n).sum(axis=1)  # cells the first-token test keeps at this n
    b = int(full[np.argmax(cells)])
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
        tok, num = outcome(verifier(*c.args, rng=rng), chunk, K)
        tokens.append(tok)
        accepted.append(num - 1)
        done += chunk
        if progress is not None and time.perf_counter() - last > 5:
            last = time.perf_counter()
            progress(f"black-box: {done:,} of {n:,} rows, about {(last - t0) / done * (n - done):.0f} s left")
    tok, acc = np.concatenate(tokens)[:n], np.concatenate(accepted)[:n]
    checks = [_chi("first token", tok[:, 0], p[0], 1.0, alpha)]
    a_exact = float(np.minimum(p[0], q[0]).sum() / max(p[0].sum(), 1e-300))
    rate = float((acc >= 1).mean())
    se = math.sqrt(max(a_exact * (1 - a_exact), 1e-12) / n)
    z = abs(rate - a_exact) / se
    crit = float(sps.norm.isf(alpha / 2))
    k = crit + float(sps.norm.isf(1 - POWER))
    checks.append(Check("acceptance", n, z, crit, abs(rate - a_exact), k * se,
                        int(math.ceil((k / 1e-3) ** 2 * a_exact * (1 - a_exact))), z <= crit))  # fmt: skip
    for i in range(K):
        rows = acc == i
        if rows.sum() >= 50:
            res = np.maximum(p[i] - q[i], 0.0)
            law = res if res.sum() > 0 else p[i]
            checks.append(_chi(f"replacement at {i}", tok[rows, i], law, float(rows.mean()), alpha))
    full = acc == K
    if full.sum() >= 50:
        checks.append(_chi("bonus", tok[full, K], p[K], float(full.mean()), alpha))
    return BlackBox(checks, V, K, n, time.perf_counter() - t0, spec)


__all__ = ["BlackBox", "Check", "blackbox_tests"]
