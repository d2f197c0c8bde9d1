"""The "Sampling settings" lesson: which p, which q, and what a mismatch costs or breaks.

# V vocabulary, K drafts

Pure functions behind the app page: process a target's and a drafter's logits with their own
settings (:mod:`specviz.verifiers.processing`), and compute, exactly, what the first emitted token
follows under the correct pipeline and under the two mismatches engines have shipped:

- ``q_unprocessed``: the drafts are drawn from the drafter's *processed* law, but the verifier
  is given the drafter's raw softmax as q;
- ``target_unprocessed``: the verifier is given the target's raw softmax as p while the
  request asked for other settings (plain decoding samples the processed target).

Each is compared with three references: the raw target, the processed target, and plain
decoding with the request's settings (the same law as the processed target: that is the
definition of lossless here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np
import plotly.graph_objects as go

from ..errors import InputError
from ..proof import theory
from ..verifiers.processing import Settings, output_law, process_logits
from . import figures, limits

# Logit presets (target, draft) over a small vocabulary, with a line saying what each shows.
PRESETS: dict[str, tuple[tuple[float, ...], tuple[float, ...], str]] = {
    "similar models": (
        (2.0, 1.5, 0.5, 0.0, -0.5, -1.0, -2.0, -3.0),
        (1.8, 1.2, 0.9, 0.1, -0.2, -1.5, -1.5, -2.5),
        "a drafter close to the target: high acceptance at the same settings",
    ),
    "hot drafter": (
        (3.0, 1.0, 0.0, -1.0, -2.0, -2.5, -3.0, -4.0),
        (1.0, 0.8, 0.6, 0.4, 0.2, 0.0, -0.2, -0.4),
        "the drafter spreads its mass: filtering it (top-k, lower temperature) raises acceptance",
    ),
    "different favourites": (
        (0.5, 2.5, 1.0, 0.0, -1.0, -1.0, -2.0, -2.0),
        (2.5, 0.5, 1.0, 0.0, -1.0, -1.0, -2.0, -2.0),
        "the two models rank their top tokens differently",
    ),
}
KNOBS = ("temperature", "top_k", "top_p")
# The page's first view: settings on both sides change their side's law, so the two mismatch
# pipelines are visibly lossy there (with default settings everywhere all three coincide).
DEFAULT_PRESET = "hot drafter"
DEFAULT_REQUEST = Settings(top_p=0.9)
DEFAULT_DRAFTER = Settings(top_k=4)


class Pipeline(NamedTuple):
    name: str
    description: str
    verifier_p: np.ndarray  # (V,) the p the verifier is given
    verifier_q: np.ndarray  # (V,) the q the verifier is given
    law: np.ndarray  # (V,) exact law of the first emitted token
    acceptance: float  # probability the first draft is accepted
    tv_plain: float  # TV from plain decoding with the request's settings
    tv_raw: float  # TV from the raw (unprocessed) target
    lossless: bool  # tv_plain below LOSSLESS_TV


LOSSLESS_TV = 1e-12  # float64 rounding of these closed forms is ~1e-16 per token
LOSSLESS_NOTE = (
    f"Lossless means TV from plain decoding below {LOSSLESS_TV:g}, shown as 0 (to {LOSSLESS_TV:g}): float64 "
    "rounding of these closed forms is about 1e-16 per token. A mismatch bug is lossy only when its side's settings "
    "change that side's law (q_unprocessed the drafter's, target_unprocessed the request's): with default settings "
    "everywhere (temperature 1, top-k 0, top-p 1) all three coincide."
)


def format_tv(tv: float) -> str:
    """A total variation as the page shows it: below :data:`LOSSLESS_TV` it is rounding noise of
    the closed forms (e.g. 6e-17), shown as the bound ``"0 (to 1e-12)"`` instead of the noise."""
    tv = float(tv)
    if not tv == tv:  # NaN
        raise InputError("tv", "a total variation in [0, 1]", "nan")
    return f"0 (to {LOSSLESS_TV:g})" if tv < LOSSLESS_TV else f"{tv:.3g}"


class SettingsReport(NamedTuple):
    p_raw: np.ndarray  # (V,) softmax of the target logits
    p: np.ndarray  # (V,) processed target: what plain decoding with the request samples
    q_raw: np.ndarray  # (V,) softmax of the draft logits
    q: np.ndarray  # (V,) the law the drafts are drawn from
    removed_p: np.ndarray  # (V,) bool: tokens the request's settings removed
    removed_q: np.ndarray  # (V,) bool: tokens the drafter's settings removed
    pipelines: list[Pipeline]  # correct first, then the mismatches
    tokens_per_step: float  # the correct pipeline's exact expectation with K drafts
    K: int


def _acceptance(p: np.ndarray, q: np.ndarray, reported: np.ndarray) -> float:
    ratio = np.where(reported > 0, np.minimum(1.0, p / np.where(reported > 0, reported, 1.0)), 0.0)
    return float((q * ratio).sum())


def logits_vector(values: Sequence[float], name: str) -> np.ndarray:
    """Typed logits (V,) as float64; -inf allowed (a token ruled out), NaN and +inf not."""
    try:
        z = np.asarray(list(values), dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise InputError(name, "numbers (logits; -inf rules a token out)", str(e)) from e
    if z.ndim != 1 or z.size < 1:
        raise InputError(name, "at least one logit", f"{z.size}")
    return z


def settings_report(target_logits: Sequence[float], draft_logits: Sequence[float], request: Settings,
                    drafter: Settings, K: int = 3) -> SettingsReport:  # fmt: skip
    """Everything the page shows, computed exactly. Logits (V,) each; K >= 1 drafts."""
    zt, zd = logits_vector(target_logits, "target_logits"), logits_vector(draft_logits, "draft_logits")
    if zt.shape != zd.shape:
        raise InputError("draft_logits", f"{zt.size} logits like target_logits", f"{zd.size}")
    if int(K) < 1:
        raise InputError("K", "at least 1 draft", str(K))
    p_raw, p = process_logits(zt), process_logits(zt, request)
    q_raw, q = process_logits(zd), process_logits(zd, drafter)
    pipes = []
    for name, desc, vp, vq in (
        ("correct", "p processed with the request's settings; q the law each draft was drawn from", p, q),
        ("q_unprocessed", "drafts drawn from the processed q, verified with the drafter's raw softmax as q", p, q_raw),
        ("target_unprocessed", "the verifier's p is the raw softmax; the request asked for other settings", p_raw, q),
    ):  # fmt: skip
        law = output_law(vp, q, vq)
        tv = theory.total_variation(law, p)
        pipes.append(Pipeline(name, desc, vp, vq, law, _acceptance(vp, q, vq), tv, theory.total_variation(law, p_raw),
                              tv < LOSSLESS_TV))  # fmt: skip
    a = min(1.0, pipes[0].acceptance)  # rounding can pass 1
    return SettingsReport(
        p_raw=p_raw, p=p, q_raw=q_raw, q=q, removed_p=(zt > -np.inf) & (p == 0), removed_q=(zd > -np.inf) & (q == 0),
        pipelines=pipes, tokens_per_step=theory.expected_tokens(a, int(K)), K=int(K),
    )  # fmt: skip


class SweepPoint(NamedTuple):
    value: float
    acceptance: float  # sum min(p, q) with the drafter's knob at ``value``
    tokens_per_step: float  # (1 - a^(K+1)) / (1 - a)


def sweep(target_logits: Sequence[float], draft_logits: Sequence[float], request: Settings, drafter: Settings,
          knob: str, values: Sequence[float], K: int = 3) -> list[SweepPoint]:  # fmt: skip
    """Acceptance and tokens per step as one of the drafter's settings varies, the target fixed.

    The pipeline is the correct one at every point, so the output is the processed target
    throughout: only the speed changes.
    """
    if knob not in KNOBS:
        raise InputError("knob", "one of " + ", ".join(KNOBS), repr(knob))
    zt, zd = logits_vector(target_logits, "target_logits"), logits_vector(draft_logits, "draft_logits")
    p = process_logits(zt, request)
    out = []
    for v in values:
        value: Any = int(v) if knob == "top_k" else float(v)  # the type of the field knob names
        s = replace(drafter, **{knob: value})
        a = min(1.0, float(np.minimum(p, process_logits(zd, s)).sum()))  # rounding can pass 1
        out.append(SweepPoint(float(v), a, theory.expected_tokens(a, int(K))))
    return out


class SweepView(NamedTuple):
    figure: go.Figure  # acceptance and tokens per step over the knob's values, the drafter's own value marked
    best: SweepPoint  # the value with the highest acceptance


def sweep_view(target_logits: Sequence[float], draft_logits: Sequence[float], request: Settings, drafter: Settings,
               knob: str, K: int) -> SweepView:  # fmt: skip
    """:func:`sweep` over :func:`sweep_values`, drawn, with the best value for acceptance. Logits (V,) each."""
    V = len(target_logits)
    pts = sweep(target_logits, draft_logits, request, drafter, knob, sweep_values(knob, V), int(K))
    current = float(getattr(drafter, knob))
    mark = float(V) if knob == "top_k" and current == 0 else current  # top-k 0 (off) is top-k V
    fig = figures.sweep_curve([pt.value for pt in pts], [pt.acceptance for pt in pts],
                              [pt.tokens_per_step for pt in pts], knob, mark, int(K))  # fmt: skip
    return SweepView(fig, max(pts, key=lambda pt: pt.acceptance))


# --- the page's inputs ---------------------------------------------------------------------------

SOURCES = ("preset", "random", "typed")  # where the page's logits come from
MAX_TYPED_V = 64  # typed logits: more is unreadable in the page's chart (as limits.MAX_TABLE_V)
RANDOM_V = 8  # random logits: the presets' vocabulary size


def parse_logits(text: str, name: str) -> np.ndarray:
    """Typed logits (V,): numbers separated by commas and/or spaces; ``-inf`` rules a token out.

    NaN and ``+inf`` are refused here (:func:`specviz.verifiers.processing.process_logits` would refuse
    them too, with a message about the array rather than the text).
    """
    items = [s for s in limits.check_text(text, name).replace(",", " ").split() if s]  # the length first
    if not items:
        raise InputError(name, "numbers separated by commas or spaces, e.g. 2, 1, 0, -inf", "nothing")
    if len(items) > MAX_TYPED_V:
        raise InputError(name, f"at most {MAX_TYPED_V} logits", f"{len(items)}")
    values = []
    for s in items:
        try:
            v = float(s)
        except ValueError:
            raise InputError(name, "numbers (or -inf)", repr(s)) from None
        if v != v or v == np.inf:
            raise InputError(name, "finite numbers or -inf", repr(s))
        values.append(v)
    z = np.array(values)
    if not (z > -np.inf).any():
        raise InputError(name, "at least one finite logit", "only -inf")
    return z


def random_logits(seed: int, V: int = RANDOM_V) -> tuple[np.ndarray, np.ndarray]:
    """A target's and a drafter's logits (V,) each, standard normal times 1.5, from ``seed``.

    The drafter is the target plus independent noise of the same scale, so the two agree
    roughly, as a small model and a large one trained on the same data do.
    """
    rng = np.random.default_rng(int(seed))
    zt = 1.5 * rng.standard_normal(int(V))
    return np.round(zt, 2), np.round(zt + 1.5 * rng.standard_normal(int(V)), 2)


def sweep_values(knob: str, V: int) -> list[float]:
    """The drafter's settings the sweep visits: temperature 0.1..2.0, top-k 1..V, top-p 0.05..1."""
    if knob == "temperature":
        return [round(0.1 * i, 1) for i in range(1, 21)]
    if knob == "top_k":
        return [float(k) for k in range(1, int(V) + 1)]
    if knob == "top_p":
        return [round(0.05 * i, 2) for i in range(1, 21)]
    raise InputError("knob", "one of " + ", ".join(KNOBS), repr(knob))


def greedy_pick(logits: Sequence[float]) -> tuple[int, int]:
    """(the greedy token, how many tokens tie with it at the top logit): ties go to the lowest id."""
    z = logits_vector(logits, "logits")
    top = z.max()
    return int(np.argmax(z)), int((z == top).sum())


def parse_logit_pair(target_text: str, draft_text: str) -> tuple[np.ndarray, np.ndarray]:
    """Typed target and draft logits (:func:`parse_logits`), as many of one as of the other."""
    zt, zd = parse_logits(target_text, "target logits"), parse_logits(draft_text, "draft logits")
    if zt.size != zd.size:
        raise InputError("draft logits", f"{zt.size} logits, as many as the target's", f"{zd.size}")
    return zt, zd


def logits(source: str, preset: str, seed: int, target_text: str, draft_text: str) -> tuple[np.ndarray, np.ndarray]:
    """The target's and the drafter's logits (V,) each, from ``source``: a preset, ``seed``, or the typed texts."""
    if source == "preset":
        return np.array(PRESETS[preset][0]), np.array(PRESETS[preset][1])
    if source == "random":
        return random_logits(int(seed))
    if source == "typed":
        return parse_logit_pair(target_text, draft_text)
    raise InputError("source", "one of " + ", ".join(SOURCES), repr(source))


def removed_text(rep: SettingsReport) -> str:
    """The tokens the request's settings and the drafter's settings removed, in words."""
    return (f"Removed by the request's settings: **{token_list(rep.removed_p)}**. "
            f"Removed by the drafter's settings: **{token_list(rep.removed_q)}**.")  # fmt: skip


def token_list(mask: np.ndarray) -> str:
    """The tokens ``mask`` marks, as words ("token 0, token 3"); "none" when it marks none."""
    idx = np.flatnonzero(mask)
    return ", ".join(f"token {i}" for i in idx) if idx.size else "none"


def pipeline_rows(rep: SettingsReport) -> list[dict[str, str]]:
    """The three pipelines as table rows: verdict, TV from plain decoding and from the raw target, acceptance."""
    return [
        {
            "pipeline": pl.name,
            "verdict": "✓\u00a0lossless" if pl.lossless else "✗\u00a0lossy",  # no break between mark and word
            "TV from plain decoding": format_tv(pl.tv_plain),
            "TV from the raw target": format_tv(pl.tv_raw),
            "acceptance": f"{pl.acceptance:.4f}",
            "what the verifier is given": pl.description,
        }
        for pl in rep.pipelines
    ]


def greedy_text(target_logits: Sequence[float], greedy: SettingsReport, rep: SettingsReport) -> str:
    """What temperature 0 does here: the target's argmax (and its ties), q's mass on it, the drafter's top token.

    ``greedy``: the report at the request's temperature 0; ``rep``: at the request's own settings.
    """
    top, ties = greedy_pick(target_logits)
    tied = f" (tied with {ties - 1} other token{'s' if ties > 2 else ''}; specviz breaks ties by the lowest id)"
    return (
        f"Here the target's argmax is **token {top}**{tied if ties > 1 else ''}. With the drafter's current settings, "
        f"q gives it {greedy.q[top]:.4f}: that is the acceptance rate at temperature 0 "
        f"({greedy.pipelines[0].acceptance:.4f}). The drafter's most likely token is token {int(np.argmax(rep.q))}."
    )
