"""Exactness on the real model: the law of the first one and two emitted tokens after a fixed prompt.

# U tokens in any support met (a few hundred of V = 49,152), n samples, C cells tested

On :data:`PROMPT` with the target at :data:`SETTINGS` (temperature 1, top-k 20: a support the
test resolves, with a tail) and the page's real drafter at the same settings:

- **rows** (:func:`real_rows`): the processed target row p_0 and the drafter's q_0 after the prompt,
  then p(. | prompt + x) and q(. | prompt + x) for every x that can come first (the support of
  p_0 or of q_0). Every token outside the union U of these rows' supports has p = q = 0 in each of
  them, so the rows are kept on U: the verifier's law over them is unchanged.
- **sampled** (:func:`sample_two`): n independent runs of specviz's verifier (or a mistake from
  :data:`specviz.proof.bugs.BUGS`) on those rows, with K = :data:`K` drafts drawn by inverse CDF
  from q: round one verifies x_1 ~ q_0 and x_2 ~ q(. | x_1); when it emits one token t, a second
  round after t (one draft: its first token is all that is judged) gives the second token. The
  target row after two drafts only draws a third token, never judged, so p(. | x_1) stands in for
  it and is not computed (it would cost a forward per pair).
- **exact** (:func:`two_token_law`): the law of the first two tokens that those rounds give, by
  enumeration over the first draft: under the rule it is p_0(x) p(y | x) (tested to 1e-12 against
  the target's own law), and under resample_from_p, no_bonus and shared_uniform it is what the
  mistake makes of the same rows. Per position the rule's first token is
  min(p_0, q_0) + (1 - a) residual (:func:`specviz.proof.theory.decompose`).
- **tests**: a chi-square over the top tokens (or pairs) of the target's law plus one tail bin
  (:func:`specviz.proof.stats.chi_square`, level :data:`specviz.proof.stats.ALPHA`), with the
  shift it detects at 99 % power and its power against the mistake's exact law on the same cells.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from scipy import stats as sps

from ..errors import InputError
from ..proof import stats, theory
from ..verifiers.processing import Settings, process_logits
from ..verifiers.verify import Uniforms, verify
from . import figures, model_drafters, plotly_json

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ..models import SmolLM2

PROMPT = "The best way to learn"
SETTINGS = Settings(temperature=1.0, top_k=20)  # target and drafter: twenty tokens carry each row
K = 2  # drafts in the first round: acceptance and residual at two positions, and the shared coin's effect
MISTAKES = ("resample_from_p", "no_bonus", "shared_uniform")  # the page's switch
TOP_CELLS = (10, 15)  # cells tested before the tail bin: first token, first two tokens
MAX_N = 20_000  # samples per check: the rows cost seconds, the samples a fraction of one
CHUNK = 4_000  # samples verified per call (chunk x (K + 1) x U float64 stays a few tens of MB)


CAPTION = (
    f"On the fixed prompt {PROMPT!r}, with the target and the drafter chosen above at temperature 1 and top-k 20: "
    f"N independent runs of specviz's verifier (K = {K} drafts, then a second round when the first emits one token) "
    "on the model's own rows, against the target's law of the first token and of the first two. Each test is a "
    f"χ² over the top tokens (pairs) and one tail bin at α = {stats.ALPHA:g}. A mistake switched on shows its exact "
    "TV on the same rows, and fails the sampled test where the test has power."
)


class Rows(NamedTuple):
    vocab: np.ndarray  # (U,) token ids, sorted
    p0: np.ndarray  # (U,) the target after the prompt
    q0: np.ndarray | None  # (U,) the drafter after the prompt (None: it proposes nothing there)
    first: np.ndarray  # (F,) indices into vocab of the tokens that can come first
    P1: np.ndarray  # (U, U) row j: p(. | prompt + vocab[j]) for j in first, zeros elsewhere
    Q1: np.ndarray  # (U, U) q(. | prompt + vocab[j]); a row of zeros where the drafter proposes nothing
    drafter: str  # the drafter's name
    a: float  # sum min(p0, q0)


def _q_row(drafter: Any, ids: list[int], V: int) -> np.ndarray | None:
    d = drafter.propose(ids, 1, np.random.default_rng(0))  # its q row; the token drawn is not used
    return np.asarray(d.probs[0], dtype=np.float64) if len(d.tokens) else None


@functools.lru_cache(maxsize=8)  # a few seconds of forwards each; a few hundred kB kept
def real_rows(model: SmolLM2, kind: str, layers: int = 27, prompt: str = PROMPT,
              settings: Settings = SETTINGS) -> Rows:  # fmt: skip
    """The rows after ``prompt`` and after each token that can come first (see the module docstring); cached."""
    from .. import models

    ids = model.encode(prompt)
    if not ids:
        raise InputError("prompt", "at least one token", "an empty prompt")
    V = model.llama.config.vocab_size
    drafter = model_drafters.drafter(kind, model, settings, layers=layers)
    session = models.Session(model.llama)

    def p_row(seq: list[int]) -> np.ndarray:
        return process_logits(session.logits(seq)[0].numpy(), settings)  # (V,): one position past the cached prompt

    p0, q0 = p_row(ids), _q_row(drafter, ids, V)
    first = np.flatnonzero((p0 > 0) | (q0 > 0)) if q0 is not None else np.flatnonzero(p0 > 0)
    p_after = {int(x): p_row([*ids, int(x)]) for x in first}
    q_after = {int(x): _q_row(drafter, [*ids, int(x)], V) for x in first}
    support = (p0 > 0) | (q0 > 0 if q0 is not None else False)
    for row in [*p_after.values(), *(q for q in q_after.values() if q is not None)]:
        support |= row > 0
    vocab = np.flatnonzero(support)
    where = {int(t): j for j, t in enumerate(vocab)}
    U = vocab.size
    P1, Q1 = np.zeros((U, U)), np.zeros((U, U))
    for x in first:
        P1[where[int(x)]] = p_after[int(x)][vocab]
        if (qx := q_after[int(x)]) is not None:
            Q1[where[int(x)]] = qx[vocab]
    q = None if q0 is None else q0[vocab]
    a = float(np.minimum(p0[vocab], q).sum()) if q is not None else 0.0
    return Rows(vocab, p0[vocab], q, np.array([where[int(x)] for x in first]), P1, Q1, drafter.name, a)


def target_law(rows: Rows) -> np.ndarray:
    """(U, U) the target's own law of the first two tokens: p_0(x) p(y | x)."""
    return rows.p0[:, None] * rows.P1


def _first_law(p: np.ndarray, q: np.ndarray | None, bug: str | None) -> np.ndarray:
    """The first emitted token of a round with at least one draft (or none: the bonus from p)."""
    if q is None or q.sum() == 0:
        return p
    return np.asarray(theory.position_law(p, q, bug))


def two_token_law(rows: Rows, bug: str | None = None) -> np.ndarray:
    """(U, U) exact law of the first two tokens that :func:`sample_two`'s rounds give, under the rule or ``bug``."""
    if bug is not None and bug not in MISTAKES:
        raise InputError("bug", f"None or one of {', '.join(MISTAKES)}", repr(bug))
    U = rows.vocab.size
    out = np.zeros((U, U))
    if rows.q0 is None:  # no draft: the first token is the bonus from p_0, a second round gives the next
        for x in rows.first:
            out[x] = rows.p0[x] * _first_law(rows.P1[x], rows.Q1[x], bug)
        return out
    p0, q0 = rows.p0, rows.q0
    A0 = np.where(q0 > 0, np.minimum(1.0, p0 / np.where(q0 > 0, q0, 1.0)), 0.0)  # (U,) min(1, p/q)
    d0 = theory.decompose(p0, q0)
    R0 = p0 if bug == "resample_from_p" else d0.residual
    for x in np.flatnonzero(q0 * A0 > 0):  # x_1 = x drafted and accepted
        p1, q1 = rows.P1[x], rows.Q1[x]
        if q1.sum() == 0:  # no second draft: the bonus from p(. | x) (no_bonus: a new round, whose first token is p)
            second = p1
        else:
            A1 = np.where(q1 > 0, np.minimum(1.0, p1 / np.where(q1 > 0, q1, 1.0)), 0.0)
            acc = np.minimum(A1, A0[x]) / A0[x] if bug == "shared_uniform" else A1  # u < min(1, r0) given
            d1 = theory.decompose(p1, q1)
            R1 = p1 if bug == "resample_from_p" else d1.residual
            second = q1 * acc + float((q1 * (1 - acc)).sum()) * R1
        out[x] += q0[x] * A0[x] * second
    reject = 1.0 - float((q0 * A0).sum())
    for x in np.flatnonzero(R0 > 0):  # x_1 rejected, x replaces it; a second round after x
        out[x] += reject * R0[x] * _first_law(rows.P1[x], rows.Q1[x], bug)
    return out


def _draw(Q: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse CDF per row: Q (n, U), u (n,) -> (n,) indices (the drafters' own rule, drafters.sample)."""
    cdf = np.cumsum(Q, axis=1)
    return np.minimum((cdf <= (u * cdf[:, -1])[:, None]).sum(1), Q.shape[1] - 1)


def sample_two(rows: Rows, n: int, seed: int, verifier: Callable[..., Any] = verify) -> np.ndarray:
    """(n, 2) indices into ``rows.vocab``: the first two tokens of n independent runs (module docstring)."""
    if not 1 <= int(n) <= 10 * MAX_N:
        raise InputError("n", f"1 to {10 * MAX_N:,} samples", str(n))
    rng = np.random.default_rng([int(seed), 2028])
    out = np.empty((int(n), 2), dtype=np.int64)
    for lo in range(0, int(n), CHUNK):
        m = min(CHUNK, int(n) - lo)
        u = rng.random((m, 5))  # round one's two drafts, two coins and its draw (round two draws its own)
        if rows.q0 is None:
            x1 = np.zeros(m, dtype=np.int64)
            num = np.zeros(m, dtype=np.int64)
        else:
            x1 = _draw(np.broadcast_to(rows.q0, (m, rows.q0.size)), u[:, 0])
            num = np.where(rows.Q1[x1].sum(1) > 0, 2, 1)
        x2 = np.where(num == 2, _draw(np.where(rows.Q1[x1].sum(1, keepdims=True) > 0, rows.Q1[x1], 1.0), u[:, 1]), 0)
        P = np.stack([np.broadcast_to(rows.p0, (m, rows.p0.size)), rows.P1[x1], rows.P1[x1]], axis=1)  # (m, 3, U)
        if rows.q0 is None:
            P = np.stack([P[:, 0], P[:, 0], P[:, 0]], axis=1)  # no draft: only row 0 (the bonus) is read
        Q = np.stack([np.broadcast_to(rows.q0 if rows.q0 is not None else rows.p0, (m, rows.p0.size)),
                      np.where(num[:, None] == 2, rows.Q1[x1], P[:, 1])], axis=1)  # (m, 2, U)
        first = verifier(P, Q, np.stack([x1, x2], 1), num, uniforms=Uniforms(u[:, 2:4], u[:, 4]))
        toks, count = np.asarray(first.tokens), np.asarray(first.num_tokens)
        if (count < 1).any():
            raise InputError("bug", "a verifier that emits a token every round",
                             "rounds that emit none (no bonus after a round with no draft: generation never ends)")
        out[lo : lo + m, 0] = toks[:, 0]
        two = count >= 2
        out[lo : lo + m, 1] = np.where(two, toks[:, 1], -1)
        again = np.flatnonzero(~two)  # a second round after the one token emitted
        if again.size:
            t = toks[again, 0]
            Q2 = rows.Q1[t]  # (r, U)
            has = Q2.sum(1) > 0
            v = rng.random((again.size, 3))
            y = np.where(has, _draw(np.where(has[:, None], Q2, 1.0), v[:, 0]), 0)
            P2 = np.stack([rows.P1[t], rows.P1[t]], axis=1)  # the second row only draws a third token
            Q2 = np.where(has[:, None], Q2, rows.P1[t])[:, None]
            second = verifier(P2, Q2, y[:, None], has.astype(np.int64), uniforms=Uniforms(v[:, 1:2], v[:, 2]))
            out[lo + again, 1] = np.asarray(second.tokens)[:, 0]
    return out


# --- the tests -------------------------------------------------------------------------------------


class Cells(NamedTuple):
    labels: list[str]  # C - 1 top cells, then "other"
    picked: np.ndarray  # (C - 1,) the top cells' indices in the law
    target: np.ndarray  # (C,) the target's exact law
    rule: np.ndarray  # (C,) the exact law of what ran (the rule or the mistake)
    observed: np.ndarray  # (C,) sampled frequencies
    test: stats.ChiSquare
    power: float  # probability the test fails under the mistake's exact law (the rule: its level)
    tv_exact: float  # TV between what ran and the target, over every cell (no binning)


def cells(law: np.ndarray, ran: np.ndarray, codes: np.ndarray, label: Callable[[int], str], top: int) -> Cells:
    """The chi-square of ``codes`` (n,) (cell indices of ``law``) over the top cells of ``law`` and a tail bin."""
    law, ran = law.ravel(), ran.ravel()
    order = np.argsort(-law, kind="stable")[:top]
    rest = np.ones(law.size, dtype=bool)
    rest[order] = False

    def bin_(v: np.ndarray) -> np.ndarray:
        return np.concatenate([v[order], [v[rest].sum()]])

    n = codes.size
    obs = bin_(np.bincount(codes, minlength=law.size).astype(np.float64))
    exp, alt = bin_(law), bin_(ran)
    test = stats.chi_square(obs, exp)
    lam = n * float(((alt - exp) ** 2 / np.where(exp > 0, exp, 1.0)).sum())
    power = float(sps.ncx2.sf(test.critical_value, test.dof, lam)) if lam > 0 else test.alpha
    return Cells([label(int(i)) for i in order] + ["other"], order, exp, alt, obs / n, test, power,
                 theory.total_variation(ran, law))  # fmt: skip


class Check(NamedTuple):
    rows: Rows
    n: int
    seed: int
    bug: str | None
    one: Cells  # the first token
    two: Cells  # the first two tokens
    decomposition: Any  # theory.Decomposition of p_0 and q_0 (None: no draft after the prompt)
    rule_tv: float  # TV(two_token_law(rule), target's law): 0 up to rounding, computed


def check(model: SmolLM2, rows: Rows, n: int, seed: int, bug: str | None = None) -> Check:
    """Sample ``n`` runs with the rule or ``bug`` on ``rows`` and test the first one and two tokens."""
    from ..proof.bugs import BUGS

    verifier = verify if bug is None else BUGS[bug].verifier
    if bug is not None and bug not in MISTAKES:
        raise InputError("bug", f"None or one of {', '.join(MISTAKES)}", repr(bug))
    seqs = sample_two(rows, n, seed, verifier)
    U = rows.vocab.size
    law2, ran2 = target_law(rows), two_token_law(rows, bug)
    one = cells(rows.p0, ran2.sum(1), seqs[:, 0], lambda i: repr(model.decode([rows.vocab[i]])), TOP_CELLS[0])
    two = cells(law2, ran2, seqs[:, 0] * U + seqs[:, 1],
                lambda i: repr(model.decode([rows.vocab[i // U], rows.vocab[i % U]])), TOP_CELLS[1])  # fmt: skip
    d = theory.decompose(rows.p0, rows.q0) if rows.q0 is not None else None
    return Check(rows, int(n), int(seed), bug, one, two, d, theory.total_variation(two_token_law(rows), law2))


def _binned(v: np.ndarray, index: np.ndarray) -> np.ndarray:
    rest = np.ones(v.size, dtype=bool)
    rest[index] = False
    return np.concatenate([v[index], [v[rest].sum()]])


def figure(c: Check, two: bool) -> go.Figure:
    """The tested cells: the target's law (for the first token split into min(p, q) and (1 - a) residual),
    the exact law of what ran when it is a mistake, and the sampled frequencies."""
    cl = c.two if two else c.one
    fig = plotly_json.blank()
    hover = "%{x}<br>%{y:.4f}<extra></extra>"
    if not two and c.decomposition is not None:
        kept, rest = _binned(c.decomposition.accepted, cl.picked), _binned(c.decomposition.replaced, cl.picked)
        fig.add_bar(x=cl.labels, y=kept, name="min(p, q)", marker_color=figures.ACCEPTED, offsetgroup="law",
                    hovertemplate=hover)  # fmt: skip
        fig.add_bar(x=cl.labels, y=rest, base=kept, name="+ (1 − a) · residual = p", marker_color=figures.REPLACED,
                    offsetgroup="law", hovertemplate=hover)  # fmt: skip
    else:
        fig.add_bar(x=cl.labels, y=cl.target, name="target p(x) p(y | x)", marker_color=figures.TARGET,
                    offsetgroup="law", hovertemplate=hover)  # fmt: skip
    if c.bug is not None:
        fig.add_bar(x=cl.labels, y=cl.rule, name=f"exact law with {c.bug}", marker_color=figures.LAW,
                    offsetgroup="bug", hovertemplate=hover)  # fmt: skip
    fig.add_bar(x=cl.labels, y=cl.observed, name=f"sampled ({c.n:,} runs)", marker_color=figures.EMPIRICAL,
                offsetgroup="sampled", hovertemplate=hover)  # fmt: skip
    fig.update_xaxes(tickangle=-45, type="category")
    what = "the first two tokens" if two else "the first token"
    return figures._layout(fig, f"Law of {what}: top cells and the rest", barmode="group",
                           yaxis_title="probability", height=380)  # fmt: skip


def verdict(cl: Cells, who: str) -> tuple[str, str]:
    """(pass or fail, the sentence) for one test."""
    t = cl.test
    says = "pass" if t.passed else "fail"
    if cl.tv_exact > 1e-9:
        against = f"its power against this mistake's exact law on these cells is {cl.power:.3f}"
    else:
        against = f"what ran has the target's law exactly, so a failure would be a false alarm (α = {t.alpha:g})"
    return says, (
        f"**{says.capitalize()}** for {who}: χ² = {t.statistic:,.1f} on {t.dof} dof against the critical value "
        f"{t.critical_value:,.1f} (α = {t.alpha:g}). The test detects a TV shift of {t.detectable_tv:.3f} with "
        f"{t.power:.0%} power; exact TV of what ran from the target over every cell: {cl.tv_exact:.4f}; {against}."
    )


def shown(c: Check) -> list[Any]:
    """The check as the page lays it out (:class:`specviz.app.text.Shown`): the first token, then the first two."""
    from .text import Shown

    out = []
    for two in (False, True):
        says, sentence = verdict(c.two if two else c.one, who(c, two))
        out.append(Shown(says, sentence, [], figure(c, two), f"x{int(two)}", rows_sentence(c) if two else None))
    return out


def who(c: Check, two: bool) -> str:
    what = "the first two tokens" if two else "the first token"
    return f"{what} with {'the correct verifier' if c.bug is None else 'the mistake ' + c.bug}"


def rows_sentence(c: Check) -> str:
    """What the rows are, and the exact facts computed from them."""
    r = c.rows
    head = (f"Drafter: {r.drafter}. The rows: p and q after the prompt and after each of the {r.first.size} tokens "
            f"that can come first, on the {r.vocab.size} tokens of their supports; a = Σ min(p, q) = {r.a:.3f} at the "
            f"first position. ")  # fmt: skip
    if c.decomposition is not None:
        head += (f"Per position the rule emits min(p, q) + (1 − a) · residual, equal to p within "
                 f"{c.decomposition.max_abs_error:.1e}; ")  # fmt: skip
    return head + (f"the rule's exact law of two tokens on these rows is {c.rule_tv:.1e} in TV from p(x) p(y | x). "
                   f"Seed {c.seed}; critical values at α = {c.one.test.alpha:g}.")  # fmt: skip
