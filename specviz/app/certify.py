"""The Verifiers page's problem, its measured rows, and its certified bound: a verifier paired with the reference.

# B rows, K drafts (padded width), V vocabulary

The page's problem (the toy pair, a typed p and q, or a scenario) is a Markov chain target and
a drafter (:class:`specviz.proof.court.Problem`). :func:`problem_round` draws B rows from it:
each row a context drawn uniformly (the start or any token), drafts drawn from the drafter one
after another (a deterministic drafter takes the argmax), the target's and drafter's rows after
each prefix, the row's draft count as the problem says, and explicit uniforms. :func:`certify`
hands the same tables and uniforms to the verifier and to :func:`specviz.verifiers.reference.verify`
(float64 NumPy, padded layout, as the page's numbers are) and counts the rows whose tokens differ.
By the coupling inequality (:mod:`specviz.proof.ship`), 0 mismatches in n rows certify
TV(verifier, reference) <= -ln(0.05)/n at 95%, and the reference is within V * 2^-48 of the target.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..proof import block_trace, court, scenarios, stats
from ..proof.court import Problem
from ..proof.handover import outcome
from ..proof.ship import CONFIDENCE, certified_bound
from ..verifiers import tree
from ..verifiers.reference import GRID
from ..verifiers.verify import PAD_TOKEN, verify
from . import links, position, results, tree_shapes
from .presenter import Metric

ROWS = 100_000  # rows per certificate: at V = 4, K = 3 about 0.07 s of CPU for both verifiers (0.17 s at 200,000)
BATCH = 5_000  # rows per call
MAX_ROWS = 1_000_000
ENGINE = ("the chain engine (specviz.verify)", verify)  # (name, verifier) the page certifies


class Certificate(NamedTuple):
    """What the paired test on the page's problem saw and certified."""

    verifier: str
    rows: int
    drafts: int
    mismatches: int
    bound: float  # CONFIDENCE upper bound on P(mismatch) >= TV(verifier, reference)
    reference_tv: float  # V * 2^-48 >= TV(reference, target)
    V: int
    K: int
    seconds: float  # CPU seconds of the whole test

    @property
    def certified(self) -> bool:
        return self.mismatches == 0 and self.rows > 0

    def lines(self) -> list[str]:
        """The result in words (Markdown-free; the page shows each line as it is)."""
        ln = -np.log(1.0 - CONFIDENCE)
        head = f"{self.verifier} against specviz.verifiers.reference.verify on the same inputs and uniforms: "
        if self.certified:
            return [
                head + f"{self.mismatches} mismatches in {self.rows:,} rows ({self.drafts:,} drafts).",
                f"Certified: TV(engine, reference) <= -ln(0.05)/n = {ln:.4f} / {self.rows:,} = {self.bound:.4g} at "
                f"{CONFIDENCE:.0%}, plus the reference's own V * 2^-48 = {self.reference_tv:.2g} from the target.",
            ]
        return [
            head + f"{self.mismatches:,} mismatches in {self.rows:,} rows ({self.drafts:,} drafts).",
            f"No certificate: rows differ from the reference (mismatch rate {self.mismatches / max(self.rows, 1):.3g};"
            f" {CONFIDENCE:.0%} upper bound {self.bound:.3g}).",
        ]


def covers(pb: Problem, source_label: str) -> str:
    """What the certificate covers, in words."""
    nd = pb.num_draft
    counts = f"{nd} drafts per row" if isinstance(nd, int) else f"draft counts {', '.join(map(str, nd))} (ragged)"
    drafter = {"sample": "drafts sampled from q", "argmax": "a deterministic drafter (argmax, no q)",
               "argmax_reports_softmax": "argmax drafts reported with the full q"}[pb.drafter.mode]  # fmt: skip
    return (f"Covers: these distributions ({source_label}: V = {pb.target.V}, K = {pb.K}, {counts}, {drafter}, "
            "every context equally often), this dtype (float64 NumPy) and this layout (padded); the law of whole "
            "rows, averaged over the rows drawn. Nothing about other distributions, dtypes or layouts: "
            "python -m specviz prove --vocab V tests those.")  # fmt: skip


def _draw(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """(R,) tokens by inverse CDF: cdf (R, V) running sums, u (R,) in [0, 1); never a zero-mass token."""
    V = cdf.shape[1]
    x = np.minimum((cdf <= (u * cdf[:, -1])[:, None]).sum(axis=1), V - 1)
    mass = np.diff(cdf, axis=1, prepend=0.0)
    zero = mass[np.arange(len(x)), x] <= 0  # float rounding at a zero's edge: the heaviest token instead
    x[zero] = mass[zero].argmax(axis=1)
    return x


def problem_round(pb: Problem, B: int, rng: np.random.Generator) -> tuple[tuple, tuple, int]:
    """(verifier arguments, uniforms (accept, sample), drafts) of B rows drawn from ``pb`` (module docstring)."""
    V, K = pb.target.V, pb.K
    chain = pb.drafter.chain
    nd = pb.num_draft
    num = np.full(B, nd, dtype=np.int64) if isinstance(nd, int) else rng.choice(np.asarray(nd, np.int64), size=B)
    prev = rng.integers(-1, V, size=B)  # -1: the start row
    P = np.empty((B, K + 1, V))
    Q = np.empty((B, K, V))
    x = np.full((B, K), PAD_TOKEN, dtype=np.int64)
    for i in range(K + 1):
        P[:, i] = pb.target.probs(prev)
        if i == K:
            break
        q = chain.probs(prev)  # (B, V)
        Q[:, i] = q
        tok = q.argmax(axis=1) if pb.drafter.mode != "sample" else _draw(np.cumsum(q, axis=1), rng.random(B))
        x[:, i] = np.where(i < num, tok, PAD_TOKEN)
        prev = tok  # rows past their count go on with a valid context: their rows are never read
    draft = Q if pb.drafter.reports_q else None
    return (P, draft, x, num), (rng.random((B, K)), rng.random(B)), int(num.sum())


def certify(verifier: Callable[..., Any], name: str, pb: Problem, *, rows: int = ROWS, seed: int = 0) -> Certificate:
    """Paired test of ``verifier`` (:func:`specviz.verify`'s signature and ``uniforms=``) against the reference
    on ``rows`` rows of ``pb``; stops at the first call with a mismatch. Returns :class:`Certificate`."""
    from ..verifiers.reference import verify as ref

    if not isinstance(rows, int) or not 1 <= rows <= MAX_ROWS:
        raise InputError("rows", f"an integer in [1, {MAX_ROWS:,}]", repr(rows))
    rng = np.random.default_rng([seed, 18, 7])
    t0 = time.process_time()
    done = drafts = bad = 0
    while done < rows and not bad:
        B = min(BATCH, rows - done)
        args, uniforms, nd = problem_round(pb, B, rng)
        expected, _ = outcome(ref(*args, uniforms=uniforms, validate=False), B, pb.K)
        got, _ = outcome(verifier(*args, uniforms=uniforms), B, pb.K)
        bad += int((got != expected).any(axis=1).sum())
        done += B
        drafts += nd
    return Certificate(name, done, drafts, bad, certified_bound(bad, done), pb.target.V / GRID,
                       pb.target.V, pb.K, time.process_time() - t0)  # fmt: skip


# --- the page's problem and its measured rows ---------------------------------------------------------

TOY = "toy"  # the block paper's p = (1/3, 2/3), q = (2/3, 1/3), K = 2
PQ = "pq"  # a typed p and q, the same at every position


class Shown(NamedTuple):
    """The p, q and K a problem of the Verifiers page judges, as its greyed-out inputs show them."""

    p: str
    q: str
    K: int


def shown_problem(source: str) -> Shown:
    """What the Verifiers page's p, q and K boxes show for a problem other than a typed pair: its own numbers."""
    if source == TOY:
        return Shown(f"{court.TOY_P[0] * 3:g}/3, {court.TOY_P[1] * 3:g}/3", f"{court.TOY_Q[0] * 3:g}/3, "
                     f"{court.TOY_Q[1] * 3:g}/3", court.TOY_K)  # fmt: skip
    if source == PQ:
        raise InputError("source", "a problem other than the typed pair (its boxes show what was typed)", source)
    pb = court.problem(source)
    return Shown("the scenario's target chain (a row per context)", "the scenario's drafter (a row per context)", pb.K)


def page_problem(source: str, p: tuple[float, ...], q: tuple[float, ...], K: int) -> court.Problem:
    """The problem the Verifiers page judges: the toy pair, a typed p and q with K drafts, or a prove scenario."""
    if source == TOY:
        return court.toy_problem()
    if source == PQ:
        return court.pair_problem(p, q, K)
    return court.problem(source)


# The tokens test of a measured rule compares its simulation with the court's exact expectation for the same
# rule: it checks the simulation, lossy rule or not, and says nothing about losslessness (the badge does).
SIMULATION_TEST = "simulation = exact tokens?"
SIMULATION_SAYS = {"pass": "agrees", "fail": "differs", "inconclusive": "inconclusive"}


def measured_rows(judgements: list[court.Judgement], pb: court.Problem, n: int, seed: int) -> list[dict]:
    """Tokens per verification measured for each rule the court judged (``n`` sequences each) beside the exact value.

    Trees have no verify-signature run and refused rules no exact table: they are left out. A
    point speaks only with the power every verdict needs (:func:`specviz.app.results.tokens_point`).
    """
    out = []
    for j in judgements:
        if j.rule not in court.RULES or j.refused:
            continue
        m = court.measure(j, j.rule, pb, n=n, seed=seed)
        t = results.tokens_point(m.tokens_per_round, m.se, m.rounds, m.exact)
        # z as text: without power the test gives no z ("–"), where a number column would print "None".
        z = f"{m.z:+.2f}" if t.conclusive and np.isfinite(m.z) else "–"
        out.append({"rule": j.rule, "measured tokens per verification (±1 SE)": results.point_text(t),
                    "exact, over the rounds run": m.exact, "z": z,
                    SIMULATION_TEST: SIMULATION_SAYS[results.tokens_says(t)],
                    "detectable shift": t.detectable})  # fmt: skip
    return out


# --- the rest of the Verifiers page: its settings, the court's table, the trees, the block, the registry -------------

MAX_K = 3  # the exact court enumerates every draft sequence: K = 3 at V = 4 answers in a few seconds
MAX_V = 4  # tokens in a typed p or q, for the same reason
MAX_ASSIGNMENTS = 256  # candidate-token assignments per context of a tree the court judges on a click
MAX_EVALS = 1_000_000  # verifier rows per rule before the court refuses (about a second at V = 4)
MAX_MEASURE_N = 100_000  # sequences per rule of one measurement: a few seconds for 7 rules
TREE_ROWS = 10_000  # measured trees per rule: 85 nodes at k = 3, K = 3 take a fraction of a second
SCENARIOS = ("reference", "deterministic", "zeros", "ragged")  # prove's scenarios the court answers fast
SOURCES = (TOY, PQ, *SCENARIOS)
SOURCE_LABELS = {
    TOY: "toy example",  # the block paper's p = (1/3, 2/3), q = (2/3, 1/3), K = 2: said under the box
    PQ: "Your own p and q (the same at every position)",
    **{name: f"Scenario: {scenarios.SCENARIOS[name].title}" for name in SCENARIOS},
}
PARAMS = [
    links.choice_param("source", TOY, SOURCES),
    links.text_param("p", "0.5, 0.3, 0.15, 0.05", max_len=200),
    links.text_param("q", "0.25, 0.25, 0.25, 0.25", max_len=200),
    links.int_param("K", 2, 1, MAX_K),
    links.int_param("k", 2, 1, 3),
    links.int_param("seed", 0, 0, 2**32 - 1),
    links.int_param("n", 20_000, 100, 10**9),
]
INTRO = (
    "Every rule is put through the exact court (specviz.proof.court): its output law over the first tokens is "
    "enumerated over its explicit uniforms, compared with the target's law, and its expected tokens per "
    "verification computed exactly. The verdict is computed from those numbers: lossless when the total-variation "
    f"distance from the target is at most {results.LOSSLESS_TV_TEXT:g} plus the mass the enumeration could not resolve."
)
HEADLINE = ("chain", "block", "block, lossy last threshold")  # the rules whose tokens per step head the page


def typed_pair(source: str, p_text: str, q_text: str) -> position.TypedPair:
    """The typed p and q when they define the problem (raises InputError on bad text); none for other problems."""
    if source != PQ:  # the texts are read only when they define the problem (a link may carry junk)
        return position.TypedPair((), (), [])
    return position.parse_pair(p_text, q_text, MAX_V, "the court enumerates every draft sequence")


def judge(source: str, p: tuple[float, ...], q: tuple[float, ...], K: int, k: int) -> list[court.Judgement]:
    """Every rule through the exact court on the page's problem, trees of ``k`` chains included."""
    pb = page_problem(source, p, q, K)
    return court.compare_with_trees(pb, k, max_evals=MAX_EVALS, max_assignments=MAX_ASSIGNMENTS)


def court_rows(judgements: list[court.Judgement], k: int) -> list[dict]:
    """The court's table, one name per tree shape: the court's tree rows are k chains from the root."""
    rows = court.table(judgements)
    for r in rows:
        r["rule"] = tree_shapes.court_label(r["rule"], k)
    return rows


def headline(rows: list[dict]) -> list[Metric]:
    by_rule = {r["rule"]: r for r in rows}
    return [Metric(f"{name}: accepted drafts per step", f"{by_rule[name]['accepted drafts per step']:.6f}",
                   by_rule[name]["verdict"]) for name in HEADLINE]  # fmt: skip


def shown_rows(rows: list[dict]) -> list[dict]:
    """TV as text: a lossless rule's rounding noise reads "< 1e-12", not "6.59e-17"."""
    return [{**r, "TV from target": results.tv_text(r["TV from target"])} for r in rows]


def measured_caption(n_run: int, n_asked: int) -> str:
    return (
        f"{n_run:,} seeded sequences per rule through specviz.proof.simulate.generate (the seed above); the "
        f"exact figure is the court's expectation for each (context, draft count) the run met, averaged over its "
        f"verifications; z = (measured − exact) / SE. '{SIMULATION_TEST}' checks the simulation "
        "against the court's exact figure for the same rule, lossy rules included: it is not a test of "
        f"losslessness (the verdict above is). It speaks only after {stats.MIN_ROUNDS} "
        f"verifications and when it would catch a shift of {stats.MIN_TOKENS:g} tokens with "
        f"{stats.POWER:.0%} probability (the detectable shift column); otherwise it says inconclusive and "
        "gives no z."
        + (f" Capped at {MAX_MEASURE_N:,} sequences per rule." if n_run < n_asked else "")
    )


def refused_caption(rows: list[dict]) -> str | None:
    refused = [r["rule"] for r in rows if r["verdict"] == "refused"]
    if not refused:
        return None
    return (f"Refused ({', '.join(refused)}): the enumeration needed more than {MAX_EVALS:,} verifier rows; the court "
            "gives no number rather than a guess.")  # fmt: skip


RULES_CAPTION = (
    "Rules: chain (specviz.verify), block verification (Sun et al., ICLR 2025), recursive rejection sampling on a "
    "chain-shaped tree, sample-and-match, and four rules that are lossy in general, kept for comparison (the "
    "badge says where one happens to be exact, e.g. with a deterministic drafter): block verification with the "
    "uncapped product as its last threshold, Medusa's typical acceptance (epsilon 0.09, delta 0.3, then the "
    "target's argmax, as Medusa's medusa_generate does), lenient acceptance (keep with probability "
    "min(1, p / (0.75 q))) and a ratio threshold (keep iff p / q >= 1/2, no coin)."
)
CERTIFY_CAPTION = (
    f"The button runs the chain engine (specviz.verify) and the plain reference "
    f"(specviz.verifiers.reference) on {ROWS:,} rows drawn from this problem with the same uniforms: "
    "no row differing certifies a bound on their distance."
)
TREES_CAPTION = (
    "Two shapes, one name each. The table above judges **k chains from the root**: k independent drafts of K "
    "tokens sharing only the context. This section measures the **full k-ary tree**: k candidates at every node, K "
    "levels deep, so every accepted node has k fresh candidates below it and more drafts survive per step. Tree "
    "verification (specviz.verifiers.tree) on a context-free pair (the toy example or your own p and q): after a "
    "rejected candidate the node's target becomes the normalized residual, so the tokens still follow the target "
    "(checked exactly by enumeration in tests/test_tree.py). k = 1 is the chain for both. Exact: the chance a node "
    "accepts one of its candidates, A, raised to each depth and summed."
)
BLOCK_CAPTION = (
    "Block verification (specviz.verifiers.block) on the pair above: K drafts drawn from q, then per draft its weight "
    "w_i = min(1, w_(i-1) p(x_i) / q(x_i)), its threshold h_i = m_i / (m_i + 1 - w_i) (the last one h_K = w_K) and "
    "the uniform eta_i compared with it. Every uniform is looked at: tau, the drafts kept, is the LAST i with "
    "eta_i < h_i, so a later pass rescues earlier failures. Then one token: the bonus from p if tau = K, else from "
    "the residual (w_tau p - q)+ normalized. The seed above draws the drafts and the uniforms."
)
REGISTRY_CAPTION = (
    "The verifier registry (specviz.proof.registry): each rule's kind, the signature it takes, whether it claims "
    "to be lossless (the court above checks the claim), the plain reference its tokens must equal on the same "
    "uniforms, and for each kind's own verifier the mistakes prove --kind runs as its negative controls."
)


def pair(source: str, p: tuple[float, ...], q: tuple[float, ...], K: int) -> tuple[Any, Any, int]:
    """The context-free pair and depth the tree and block sections draw: the toy example's, or the typed ones."""
    return (court.TOY_P, court.TOY_Q, court.TOY_K) if source == TOY else (p, q, K)


def tree_rows(p: Any, q: Any, k: int, depth: int, seed: int, measure: Callable[..., tree.Measured]) -> list[dict]:
    """Exact and measured accepted drafts of the full k-ary tree, i.i.d. and top-k candidates; ``measure``:
    :func:`specviz.verifiers.tree.measure_kary` with ``n`` given (the page caches it)."""
    out: list[dict] = []
    kary = tree_shapes.kary_name(k)
    for label, iid in ((f"{kary}, i.i.d. from q (SpecInfer)", True), (f"{kary}, q's top k (EAGLE-style)", False)):
        measured = f"measured ({TREE_ROWS:,} trees)"
        try:
            got = measure(p, q, k, depth, seed, iid)
        except InputError as e:  # k distinct top tokens need k <= V
            # str(e), not links.error_text: a table cell shows text as typed, escapes included
            out.append({"candidates": label, "exact accepted per step": None, measured: str(e)})
            continue
        exact = tree.kary_expected_accepted(p, q, k, depth, iid=iid)
        point = results.tokens_point(got.mean, got.se, got.n, exact)
        out.append({"candidates": label, "exact accepted per step": exact, measured: results.point_text(point)})
    return out


def tree_figures(k: int, depth: int) -> dict[str, Any]:
    """The two shapes, drawn: k chains from the root (what the court judges) and the full k-ary tree."""
    return {"chains": tree_shapes.shape_figure(tree.multi_draft_parents(k, depth), tree_shapes.chains_name(k)),
            "kary": tree_shapes.shape_figure(tree.kary_parents(k, depth), tree_shapes.kary_name(k))}  # fmt: skip


def traced_tree(p: Any, q: Any, k: int, depth: int, seed: int) -> list[dict]:
    """One seeded verification of a full k-ary tree with i.i.d. candidates, node by node."""
    one = tree.context_free_trees(p, q, tree.kary_parents(k, depth), 1, np.random.default_rng(seed))
    return tree.trace(one, tree.verify_tree(*one, rng=np.random.default_rng([seed, 1])))


def traced_tree_text(seed: int) -> str:
    return (f"**One traced verification** (i.i.d. candidates, seed {seed}): each tried candidate's coin u against "
            "its acceptance probability min(1, r(y) / q(y)), where r is the target row, or the residual left by the "
            "siblings rejected before it; the last line is the token drawn where the walk stopped.")  # fmt: skip


def block_text(steps: block_trace.BlockTrace, K: int) -> str:
    return (f"Kept **tau = {steps.tau}** of {K} drafts; emitted {steps.tokens}. The last token, **{steps.token}**, "
            f"came from {steps.source}: {np.round(steps.source_row, 4).tolist()} "
            f"(sample uniform {steps.sample_uniform:.4f}).")  # fmt: skip


REGISTRY_COLUMNS = ("verifier", "kind", "signature", "claims", "reference")  # the short ones, as a table


def registry_list(entries: list[dict]) -> str:
    """The long columns (what each is, its mistakes) as wrapped text: nothing runs past a projector's page."""
    return "\n".join(
        f"- **{row['verifier']}**: {row['what it is']}"
        + (f" Its mistakes, run as controls: {row['mistakes']}." if row["mistakes"] else "")
        for row in entries
    )
