"""The proof suite's scenarios: fixed Markov chains, a window of L tokens, and where each bug shows.

# V vocabulary, L tokens judged, K drafts per round

A scenario fixes a target chain and a drafter chain (seeded by :data:`CHAIN_SEED` and the
scenario's place in :data:`SCENARIOS`, so ``--seed`` only changes the sampling), the window of
L emitted tokens whose joint law is judged, the padded draft width K, whether rows are ragged,
and whether the drafter samples or proposes its argmax.

Which tokens a scenario sees: a round that accepts all j drafts emits j + 1 tokens, the last
one the bonus. With L = K every first round's bonus is token K + 1, outside the L-token
window, and later rounds start past token 1; so a verifier wrong only in the bonus of full
rows would pass every L = K scenario. The suite therefore has scenarios with L > K (L = K + 1,
ragged too, and K = 1 with L = 3); :attr:`Scenario.covers` says what each one sees, and
:data:`HOME` where each bug of the catalogue is run.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import InputError
from . import theory
from .bugs import BUGS, Bug
from .markov import DrafterMode, MarkovChain, make_chain, random_chain

CHAIN_SEED = 20_241_130  # the chains of a scenario are fixed; --seed only changes the sampling
REFERENCE_P = theory.REFERENCE_P  # the textbook example: a = 0.7 against uniform q


class Scenario(NamedTuple):
    name: str
    title: str
    V: int
    L: int
    K: int
    ragged: bool
    drafter_mode: DrafterMode  # "sample" or "argmax" (a deterministic drafter, draft_probs=None)
    chains: str  # "random", "textbook", "zeros" or "greedy"
    description: str

    @property
    def covers(self) -> str:
        """Which emitted tokens enter the L-token window, in words."""
        return coverage(self)


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario("reference", "Random Markov chains", 4, 3, 3, False, "sample", "random",
                 "Target and drafter are random Markov chains over 4 tokens with a start state; 3 drafts per round."),
        Scenario("textbook", "p = [0.5, 0.3, 0.15, 0.05] vs uniform q", 4, 3, 3, False, "sample", "textbook",
                 "Context-free: the same p and uniform q at every position (a = 0.7, 2.533 tokens per step)."),
        Scenario("ragged", "Ragged rows, wrong padding", 4, 3, 3, True, "sample", "random",
                 "Each row drafts 0 to 3 tokens per round; positions past its count hold wrong distributions."),
        Scenario("deterministic", "Deterministic drafter", 4, 3, 3, False, "argmax", "random",
                 "The drafter proposes its argmax and reports no q (draft_probs=None)."),
        Scenario("zeros", "Zeros in the supports", 4, 3, 3, False, "sample", "zeros",
                 "Half of every row of both chains is exactly 0: tokens one model can never produce."),
        Scenario("greedy", "Greedy target (temperature 0)", 4, 3, 3, False, "sample", "greedy",
                 "The target is one-hot on its argmax: the output must be plain greedy decoding."),
        Scenario("bonus", "The bonus of full rows in view (L = K + 1)", 4, 4, 3, False, "sample", "random",
                 "Random chains, 3 drafts per round, 4 tokens judged: a round accepting every draft shows its bonus."),
        Scenario("one_draft", "One draft per round", 4, 3, 1, False, "sample", "random",
                 "Random chains, 1 draft per round, 3 tokens judged: the bonus of full rows, round after round."),
        Scenario("ragged_bonus", "Ragged rows, every bonus in view", 4, 4, 3, True, "sample", "random",
                 "Each row drafts 0 to 3 tokens per round, 4 tokens judged: the bonus of every row shape is seen."),
        Scenario("deterministic_bonus", "Deterministic drafter, the bonus in view", 4, 3, 1, False, "argmax", "random",
                 "The drafter proposes its argmax with no q (draft_probs=None); 1 draft per round, 3 tokens judged."),
    ]
}  # fmt: skip

# Where each bug shows; the rest are run on "reference" (see default_home).
HOME: dict[str, tuple[str, ...]] = {
    "wrong_bonus_row": ("ragged", "ragged_bonus"),  # invisible when every row has K drafts
    "no_bonus": ("reference", "textbook", "bonus"),
    "greedy_draft_sampled_q": ("deterministic",),
}


def default_home(bug: Bug) -> tuple[str, ...]:
    """Where a bug missing from :data:`HOME` runs: by the step it swaps."""
    if bug.step == ("last_draw", "row_before"):
        return ("bonus", "one_draft")  # wrong only in the bonus of full rows: invisible when L = K
    if bug.step == ("last_draw", "last_padded_row"):
        return ("ragged", "ragged_bonus")
    return ("reference",)


for _bug in BUGS.values():  # a bug added to bugs.py gets a home where it can show
    HOME.setdefault(_bug.name, default_home(_bug))


def bonus_shapes(sc: Scenario) -> tuple[int, ...]:
    """The draft counts j whose row's bonus token can enter the L-token window: j + 1 <= L
    (it is token j + 1 of a first round; later rounds start past token 1)."""
    return tuple(j for j in (range(sc.K + 1) if sc.ragged else (sc.K,)) if j + 1 <= sc.L)


def coverage(sc: Scenario) -> str:
    """The emitted tokens scenario ``sc`` judges.

    In the first round a row with j drafts emits tokens 1..j (drafts, or the replacement at the
    first rejection) and its bonus as token j + 1; later rounds start past token 1. So the
    window of L tokens sees the drafts and replacements at positions 1..min(K, L) and the bonus
    of rows with j drafts exactly when j + 1 <= L.
    """
    shown = list(bonus_shapes(sc))
    hidden = [j for j in (range(sc.K + 1) if sc.ragged else (sc.K,)) if j not in shown]
    last = min(sc.K, sc.L)
    kind = "argmax drafts" if sc.drafter_mode == "argmax" else "drafts"
    parts = [f"{kind} and replacements at position{' 1' if last == 1 else f's 1..{last}'}"]
    if shown:
        if shown == [sc.K]:
            rows = f"full rows ({sc.K} draft{'s' if sc.K > 1 else ''})"
        else:
            rows = "rows with " + ", ".join(map(str, shown)) + " drafts"
        if sc.ragged and sc.K in shown:
            rows += " (all row shapes)"
        parts.append(f"the bonus of {rows}")
    text = ", ".join(parts)
    if hidden:
        text += f"; NOT the bonus of full rows (token {sc.K + 1} > L = {sc.L})"
    return text


def can_show(bug: Bug, sc: Scenario) -> bool:
    """Whether ``bug`` can change what scenario ``sc`` judges: a bug that needs ragged rows
    cannot show without them, and one wrong only in the bonus of full rows cannot show when
    that bonus never enters the window (L = K)."""
    if bug.needs_ragged and not sc.ragged:
        return False
    if bug.step == ("last_draw", "row_before"):
        return sc.K in bonus_shapes(sc)
    return True


def scenario_chains(scenario: Scenario) -> tuple[MarkovChain, MarkovChain]:
    """The scenario's fixed target and drafter chains."""
    V = scenario.V
    rng = np.random.default_rng([CHAIN_SEED, list(SCENARIOS).index(scenario.name)])
    if scenario.chains == "textbook":
        return make_chain(np.tile(REFERENCE_P, (V + 1, 1))), make_chain(np.full((V + 1, V), 1 / V))
    if scenario.chains == "zeros":
        return random_chain(V, rng, zero_fraction=0.5), random_chain(V, rng, zero_fraction=0.5)
    target, draft = random_chain(V, rng), random_chain(V, rng)
    if scenario.chains == "greedy":
        target = make_chain(np.eye(V)[np.argmax(target.table, axis=1)])
    return target, draft


def get_scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise InputError("scenario", "one of " + ", ".join(SCENARIOS), repr(name)) from None


def cell_tokens(code: int, V: int, L: int) -> str:
    """The L tokens of cell ``code`` (base-V order, first token most significant): "0 2 1"."""
    digits = []
    for _ in range(L):
        code, d = divmod(code, V)
        digits.append(d)
    return " ".join(map(str, reversed(digits)))
