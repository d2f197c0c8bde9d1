"""Why it is exact, computed: the page's settings, its derivation, and what it says about one position.

# V vocabulary, K drafts

The page reads p and q from its table (:func:`read_table`), shows the decomposition
min(p, q) + (1 − a)·residual = p in numbers (:func:`decomposition`), a mistake's exact law
beside what was sampled (:func:`law_figure`, :class:`specviz.app.position.Samples`), and the
derivation line by line (:data:`DERIVATION`).
"""

from __future__ import annotations

from collections.abc import Hashable, MutableMapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from .._types import Array
from ..errors import InputError
from ..proof import bugs, theory
from . import figures, links, position
from .limits import MAX_POSITION_K
from .presenter import Metric

# Why it is exact's derivation, line by line: ("md", Markdown) or ("tex", LaTeX).
DERIVATION: tuple[tuple[str, str], ...] = (
    ("md", "A token x is emitted either by acceptance (drafted, then kept) or by replacement (after a rejection):"),
    (
        "tex",
        r"P(\text{emit } x) = \underbrace{q(x)\,\min\!\Big(1, \tfrac{p(x)}{q(x)}\Big)}_{\text{accepted}}"
        r" + \underbrace{(1 - a)\, r(x)}_{\text{replaced}}\;",  # the thin space: the brace's label overhung by 2 px
    ),
    ("md", "The acceptance term is min(p, q); the chance of a rejection is one minus the acceptance rate:"),
    ("tex", r"a = \sum_y q(y) \min\!\Big(1, \tfrac{p(y)}{q(y)}\Big) = \sum_y \min\big(p(y), q(y)\big)"),
    ("md", "The residual is what q under-proposes, normalized, and its normalizer is the same 1 − a:"),
    # Two displays, not one: side by side they ran past a 1280 px projector's edge at "= TV(p".
    ("tex", r"r(x) = \frac{\max(0,\, p(x) - q(x))}{\sum_y \max(0,\, p(y) - q(y))}"),
    ("tex", r"\sum_y \max(0,\, p(y) - q(y)) = 1 - \sum_y \min(p(y), q(y)) = 1 - a = \mathrm{TV}(p, q)"),
    ("md", "So the two factors 1 − a cancel, and min plus the positive part of the difference is p:"),
    ("tex", r"P(\text{emit } x) = \min\big(p(x), q(x)\big) + \max\big(0,\, p(x) - q(x)\big) = p(x)"),
    (
        "md",
        "The next position is reached only after an acceptance, conditioned on the accepted token, so the same "
        "argument applies to each conditional in turn: the whole sequence follows the target. Each mistake in the "
        "*Bug* box breaks one line of this: drawing the replacement from p instead of r, reusing the coin (no longer "
        "uniform after a rejection), or forgetting the clamp max(0, ·).",
    ),
)


NO_BUG = "none"  # the Bug box's choice for the correct rule
SAMPLE_SIZES = (1, 1_000, 100_000)
MAX_CLICKS = 50  # sample clicks a link replays (each drawn again from its own seed); then Reset
BUG_CHOICES = (NO_BUG, *bugs.BUGS)  # the Bug box: the correct rule, then each mistake
PARAMS = [
    links.floats_param("p", position.REFERENCE_P),
    links.floats_param("q", [0.25] * 4),
    links.choice_param("bug", NO_BUG, BUG_CHOICES),
    links.int_param("K", 1, 1, MAX_POSITION_K),
    links.int_param("seed", 0, 0, 2**32 - 1),
    links.int_list_param("drawn", SAMPLE_SIZES, MAX_CLICKS),  # the samples shown: the link replays them
]


def padded(raw_p: Sequence[Any], raw_q: Sequence[Any]) -> dict[str, list[Any]]:
    """The table's two columns, the shorter one padded with empty cells."""
    width = max(len(raw_p), len(raw_q))
    return {"p": list(raw_p) + [np.nan] * (width - len(raw_p)), "q": list(raw_q) + [np.nan] * (width - len(raw_q))}


def load(state: MutableMapping[str, Any], prefix: str, p: list[float], q: list[float], **settings: int) -> None:
    """Put p and q (and ``settings``) in the table (``state``: st.session_state, the page's keys under ``prefix``):
    a fresh editor, so they replace any edits."""
    state.update({prefix + "p": p, prefix + "q": q, **{prefix + name: v for name, v in settings.items()}})
    state[prefix + "table_version"] += 1


def load_preset(state: MutableMapping[str, Any], prefix: str) -> None:
    """The Preset box's callback: load the preset chosen (nothing for "your own table")."""
    name = state[prefix + "preset"]
    if name is not None:
        load(state, prefix, *position.preset(name, int(state[prefix + "seed"])))


def load_text(state: MutableMapping[str, Any], prefix: str) -> None:
    """Read the typed p and q texts (either may be left empty) into the table; keep what to say for the next run."""
    read = position.read_texts({name: state.get(f"{prefix}{name}_text", "") for name in ("p", "q")})
    state.update({prefix + name: values for name, values in read.values.items()})
    if read.values:
        state[prefix + "table_version"] += 1  # a fresh editor showing what was read
    notes = [("success", f"{name}: {links.plain(said)}") for name, said in read.notes.items()]  # echo it: as text
    state[prefix + "text_result"] = notes + [("error", links.error_text(e)) for e in read.errors]


def show_me(state: MutableMapping[str, Any], prefix: str, where: position.ShowMe) -> None:
    """Load the setting where the selected bug shows: a preset and a draft count."""
    load(state, prefix, *position.preset(where.preset, position.SHOW_ME_SEED), K=where.K, seed=position.SHOW_ME_SEED)


class TableRead(NamedTuple):
    dists: dict[str, position.ParsedDist]  # "p" and "q" where valid
    messages: list[tuple[str, str]]  # ("error" or "info", Markdown) in the order p, q


def read_table(typed_p: Sequence[Any], typed_q: Sequence[Any]) -> TableRead:
    """The table's p and q as distributions, with what to say about each (an error, or a sum divided out)."""
    dists, messages = {}, []
    for name, typed in (("p", typed_p), ("q", typed_q)):
        try:
            dists[name] = position.parse_distribution(typed, name)
        except InputError as e:
            messages.append(("error", f"{links.error_text(e)}. Fix the table: the rest of the page waits for a valid "
                                      f"{name}."))  # fmt: skip
            continue
        note = dists[name].note
        if note:
            messages.append(("info", note.capitalize() + ": every number below uses the divided values."))
    return TableRead(dists, messages)


class Decomposition(NamedTuple):
    metrics: list[Metric]
    columns: dict[str, tuple[np.ndarray, str]]  # the table's columns: values (V,) and what each means
    caption: str


def decomposition(target_probs: Array, draft_probs: Array) -> Decomposition:
    """min(p, q) + (1 − a)·residual = p, in numbers: the metrics, the table and whether the residual is p."""
    p, q = target_probs, draft_probs
    d = theory.decompose(p, q)
    same = position.residual_is_target(p, q)
    return Decomposition(
        [Metric("acceptance rate a", f"{d.acceptance_rate:.4f}", help="a = Σ min(p, q)"),
         Metric("TV(p, q) = 1 − a", f"{d.total_variation:.4f}", help="total variation distance between p and q"),
         Metric("largest |output − p|", f"{d.max_abs_error:.2e}", help="min(p, q) + (1 − a)·residual against p")],
        {"p": (p, "target probability"), "q": (q, "draft probability"),
         "min(p,q)": (d.accepted, "emitted by acceptance"),
         "P(accept)": (d.accept_prob, "min(1, p/q): chance a drafted token is kept"),
         "residual r": (d.residual, "max(0, p − q) / (1 − a): the replacement law"),
         "(1−a)·r": (d.replaced, "emitted by replacement")},
        "Accept probability 1 where q(x) = 0: such a token is never drafted. The residual is where q "
        "under-proposes. It is p itself exactly when q = a·p wherever p > 0, q's other 1 − a sitting on tokens p "
        "never produces (e.g. p = [.5, .5, 0], q = [.25, .25, .5] at a = 0.5), or when a = 1 and it is never "
        f"used. Here it {'is' if same.equal else 'is not'} p.",
    )  # fmt: skip


def show_me_label(where: position.ShowMe) -> str:
    return f"Show me: load '{where.preset}' with K = {where.K} (TV {where.tv:.3f})"


def no_position_effect(bug: str) -> str:
    return (f"{bug} never changes the law of the first token at one position: with every preset and every K "
            "here its TV from p is 0 (or it has no single-position law). Its effect shows end to end, in the "
            f"Bug lab: /bug-lab?bug={bug}")  # fmt: skip


def no_law_text(bug: str) -> str:
    return (f"**{bug}** has no single-position law: it reads the bonus from padded row K instead of row "
            "num_draft[b], which differs only when a row has fewer drafts than the padded width. Here every row "
            "has K drafts and every target row is p, so what you sample below is p. See it fail in the Bug lab, "
            "scenario 'ragged'.")  # fmt: skip


def hidden_text(bug: str, where: position.ShowMe) -> str:
    return (f"With this p, q and K, {bug} leaves the first token's law at p (TV 0): nothing to see here. "
            f"The button below loads a setting where it moves it by TV {where.tv:.3f}.")  # fmt: skip


def replayed(state: MutableMapping[str, Any], key: str, setting: Hashable, V: int, drawn: list[int],
             from_link: bool) -> tuple[position.Samples, list[int]]:  # fmt: skip
    """The visitor's samples at this ``setting``, kept in ``state[key]`` (kept, or a new one), and the sizes a link
    replays into it, click by click: a link shows what was sampled."""
    samples = state.get(key)
    replay = from_link and (samples is None or (samples.key, samples.sizes) != (setting, drawn))
    if samples is None or samples.key != setting or replay:
        samples = state[key] = position.Samples(setting, V)
    return samples, (drawn if replay else [])


def law_figure(target_probs: Array, law: Array | None, samples: position.Samples, bug: str) -> Any:
    """The exact law beside what was sampled (a star for one sample)."""
    label = "exact law of the rule" if bug == NO_BUG else f"exact law with {bug}"
    sampled: Array = samples.freq
    return figures.law_comparison(target_probs, law, sampled, n=samples.total or None, law_name=label,
                                  single=samples.single)  # fmt: skip


def sampled_tv(samples: position.Samples, target_probs: Array, law: Array | None) -> list[Metric]:
    """TV(sampled, exact law; p where there is none), once there is more than one sample: the TV of one says
    nothing."""
    if samples.total <= 1:
        return []
    tv = theory.total_variation(samples.freq, target_probs if law is None else law)
    return [Metric(f"TV(sampled, exact), {samples.total:,} rows", f"{tv:.4f}")]


def samples_caption(total: int) -> str | None:
    if total == 1:
        return f"One sample is one token, marked with a star: sample {SAMPLE_SIZES[1]:,} to see a histogram."
    return "Error bars: ±2 standard errors of a frequency under the exact law, clipped to [0, 1]." if total else None


def full_help(samples: position.Samples) -> str | None:
    """Why the Sample buttons are disabled, or None while they are not."""
    full = samples.clicks >= MAX_CLICKS
    return f"{MAX_CLICKS} clicks, the most a link replays: Reset to sample again" if full else None


def shown_trace(trace: list[dict]) -> list[dict]:
    """The drawn slot has no p/q test: a dash says so where a missing value would read "None"."""
    return [{**r, "p/q": f"{r['p/q']:.4f}" if r["p/q"] == r["p/q"] else "— (drawn, not tested)"} for r in trace]
