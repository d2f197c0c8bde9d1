"""Bug lab: pick a mistake, predict whether the end-to-end test catches it, run it, compare."""

from __future__ import annotations

import numpy as np
import streamlit as st

from specviz import InputError
from specviz.app import figures, flow, limits, links, presenter, results, serving
from specviz.proof import engine_bugs, prove, stats
from specviz.proof.bugs import BUGS

S = "buglab."
NONE = "none (correct verifier)"
PREDICTIONS = ("the test will pass", "the test will fail")
PREDICT_WORDS = ("pass", "fail")  # ?predict=pass|fail: the prediction travels with the link
PARAMS = [
    links.choice_param("predict", "none", ["none", *PREDICT_WORDS]),
    links.choice_param("bug", NONE, [NONE, *BUGS]),
    links.choice_param("scenario", "reference", list(prove.SCENARIOS)),
    links.int_param("n", 100_000, 1, 10**12),
    links.int_param("seed", 0, 0, 2**32 - 1),
]


def home_scenario(bug: str) -> str:
    return "reference" if bug == NONE else prove.HOME.get(bug, ("reference",))[0]


@st.cache_data(show_spinner="Running the test…", max_entries=64, ttl=3600)  # counts over V^L cells: small
def run_case(scenario: str, n: int, seed: int, bug: str) -> prove.CaseResult:
    return prove.run_case(scenario, n=n, seed=seed, bug=None if bug == NONE else BUGS[bug])


def set_n_and_run(n: int) -> None:
    """The inconclusive verdict's button: take the suggested N and run with it (one click, not two)."""
    st.session_state[S + "n"] = n
    ss = st.session_state
    st.session_state[S + "ran"] = (ss[S + "scenario"], min(n, limits.MAX_PROVE_N), int(ss[S + "seed"]), ss[S + "bug"])


def on_bug_change() -> None:
    st.session_state[S + "scenario"] = home_scenario(st.session_state[S + "bug"])
    st.session_state[S + "prediction"] = None  # a new bug, a new prediction


query = st.query_params.to_dict()
# A new session, or a link to this page (e.g. from "Why it is exact"): a link naming only the bug starts where it shows.
fresh = not links.seen(st.session_state, S + "scenario") or links.link_given(query, st.session_state, PARAMS)
from_link = links.link_given(query, st.session_state, PARAMS)
link_notes = links.init_state(query, st.session_state, PARAMS, S, keep=("prediction",))
if fresh and "scenario" not in query:  # no link, or one naming only the bug: start where the bug shows
    st.session_state[S + "scenario"] = home_scenario(st.session_state[S + "bug"])
if from_link and st.session_state[S + "predict"] in PREDICT_WORDS:  # the link's prediction, kept
    st.session_state[S + "prediction"] = PREDICTIONS[PREDICT_WORDS.index(st.session_state[S + "predict"])]

st.title("Bug lab")
st.caption(
    "Each bug is the correct verifier with exactly one step swapped. The test: generate N sequences of L tokens by "
    "repeated draft-and-verify rounds over Markov chains, then a chi-square test of their joint law against the "
    "target's exact law, and tokens per step against the exact expectation."
)
for note in link_notes:
    st.warning(note, icon=":material/link:")

# --- choose, predict -------------------------------------------------------------------------------
left, right = st.columns([1, 1], gap="large")
with left:
    bug = st.selectbox("Bug", [NONE, *BUGS], key=S + "bug", on_change=on_bug_change)
    if bug == NONE:
        st.markdown("**The correct verifier.** The negative control: the test must pass.")
    else:
        st.markdown(f"**{BUGS[bug].title}.**")
        with st.expander("Why it breaks and what catches it (open after you predict)"):
            st.markdown(BUGS[bug].explanation)
            st.caption(f"Caught by: {BUGS[bug].caught_by}.")
    scenario = st.selectbox("Scenario", list(prove.SCENARIOS), key=S + "scenario")
    sc = prove.SCENARIOS[scenario]
    st.caption(f"**{sc.title}.** {sc.description} V = {sc.V}, L = {sc.L}, K = {sc.K}.")
    if scenario != home_scenario(bug):
        st.caption(f"This bug's home scenario is '{home_scenario(bug)}'.")
    with st.expander(f"{len(engine_bugs.FAULTS)} more failures no test of the law can see"):
        for fault in engine_bugs.FAULTS.values():
            st.markdown(f"**{fault.name}: {fault.title}.** {fault.explanation}")
            st.caption(f"Caught by: {fault.caught_by}.")
with right:
    prediction = st.radio("Your prediction", PREDICTIONS, index=None, key=S + "prediction")
    # Right under the prediction: in view on a 1280 x 720 projector without scrolling (N and seed rarely change).
    clicked = st.button("Run the test", type="primary", key=S + "run")
    n_asked = st.number_input("N sequences", min_value=1, step=10_000, key=S + "n")
    n, n_note = limits.cap(
        int(n_asked), limits.MAX_PROVE_N, "N", "a larger test takes more than a few seconds per click"
    )
    if n_note:
        st.warning(n_note, icon=":material/content_cut:")
    seed = st.number_input("Seed", min_value=0, max_value=2**32 - 1, step=1, key=S + "seed")

shown_settings = {"bug": bug, "scenario": scenario, "n": int(n_asked), "seed": int(seed)}
if prediction is not None:
    shown_settings["predict"] = PREDICT_WORDS[PREDICTIONS.index(prediction)]
links.show_in_link(st.query_params, st.session_state, shown_settings, PARAMS, S)  # the address bar shows them
run_key = (scenario, n, int(seed), bug)
if clicked or from_link:  # a link restores the result too (N within its cap), not only the settings
    st.session_state[S + "ran"] = run_key

# --- reveal ----------------------------------------------------------------------------------------
ran = st.session_state.get(S + "ran") == run_key
if ran or not presenter.presenting(st.session_state):  # in presenter mode, before a run, nothing above the inputs
    st.divider()
if not ran:
    if not presenter.presenting(st.session_state):
        st.info("Make your prediction, then click **Run the test**.")
    raise flow.EndOfPage  # st.stop() would drop the Next link

try:
    res = serving.heavy(("bug-lab", *run_key), lambda: run_case(*run_key), st.empty())  # bounded, shared
except InputError as e:
    st.error(links.error_text(e), icon=":material/error:")
    raise flow.EndOfPage from None  # st.stop() would drop the Next link

if res.error:
    st.error(f"The verifier raised: {links.plain(res.error)}")
    raise flow.EndOfPage  # st.stop() would drop the Next link

subject = "the correct verifier" if bug == NONE else bug
verdict = results.case_verdict(res, subject, seed=int(seed))
# The box's colour is what the test said (green: it passed, red: it failed), never whether that was hoped for.
show, icon = results.VERDICT_BOXES[verdict.word]
getattr(st, show)(f"**Verdict: {verdict.head}.** {verdict.seen}", icon=icon)
if verdict.word == "inconclusive":
    st.caption("Your prediction is not judged: at this N the test could not tell either way.")
    suggested = None if verdict.needed_n is None else results.suggested_n(verdict.needed_n)
    if suggested is not None and suggested <= limits.MAX_PROVE_N:
        st.button(
            f"Run again with N = {suggested:,} (the N it needs, with a margin)",
            key=S + "use_needed_n",
            on_click=set_n_and_run,
            args=(suggested,),
        )
elif prediction is None:
    st.caption("You did not predict this time: next time decide first, then run.")
else:
    passed = verdict.word in ("pass", "missed")
    outcome = PREDICTIONS[0] if passed else PREDICTIONS[1]
    where = "below" if presenter.presenting(st.session_state) else "above"  # presenter mode puts inputs after results
    right_or_wrong = "You were right." if prediction == outcome else f"You were wrong: read the explanation {where}."
    st.markdown(f"You predicted *{prediction}*; it {'passed' if passed else 'failed'}. {right_or_wrong}")


j = res.joint
tok = verdict.tokens
m = st.columns(4)
m[0].metric(f"chi-square ({j.dof} dof)", f"{j.statistic:,.1f}", help=f"{j.cells} cells after pooling")
jp = verdict.joint_p
m[1].metric(f"critical value (α = {j.alpha:g})", f"{jp.critical_value:,.1f}",
            help=f"the statistic's (1 − α) quantile, by {jp.method}")  # fmt: skip
m[2].metric(
    "p-value" if jp.method == "chi-square" else f"p-value ({jp.method})",
    results.p_text(jp),
    help=results.P_HELP[jp.method].format(draws=jp.draws),
)
m[3].metric("joint test", results.joint_says(j, jp))
m = st.columns(4)
m[0].metric("TV(observed, exact)", f"{j.tv:.4f}")
m[1].metric(
    f"detectable TV ({j.power:.0%} power)",
    f"{j.detectable_tv:.4f}" if np.isfinite(j.detectable_tv) else "∞ (no power)",
    help="any shift of the law at least this large in total variation fails the test with this power",
)
m[2].metric(
    "tokens per step, measured",
    f"{res.tokens.measured:.4f}",
    f"± {res.tokens.se:.4f} (1 SE)" if tok.rounds >= stats.MIN_ROUNDS else "too few rounds for an SE",
    delta_color="off",
    delta_arrow="off",
)
m[3].metric(
    "tokens per step, theory",
    f"{res.tokens.expected:.4f}",
    f"z = {tok.z:+.2f}" if tok.rounds >= stats.MIN_ROUNDS else f"needs ≥ {tok.needed_rounds:,} rounds",
    delta_color="off",
    delta_arrow="off",
    help="exact expectation over the contexts the run met",
)
tokens_says = results.tokens_says(tok)
st.caption(
    f"The tokens-per-step test says {tokens_says}"
    + (f" (|z| = {abs(tok.z):.2f} against {results.z_critical(j.alpha):.2f})" if tokens_says != "inconclusive" else "")
    + f". The verdict fails when a test rejects at level α = {j.alpha:g}, whatever its power; it passes only when "
    f"both tests could see a shift of TV {stats.MIN_TV:g} in the law (or {stats.MIN_TOKENS:g} tokens per step, after "
    f"{stats.MIN_ROUNDS} rounds) and neither rejects; otherwise it is inconclusive. Low power voids a pass, not a "
    "rejection."
)

if bug == "shared_uniform":
    st.subheader("The lesson: a first-token-only test misses it")
    rows = [("first token only", res.first_token)]
    rows += [(f"token {t + 1} on its own", c) for t, c in enumerate(res.positions[1:], start=1)]
    rows += [(f"joint law of {sc.L} tokens", j)]
    cols = st.columns(len(rows) + 1)
    for col, (name, t) in zip(cols, rows, strict=False):
        col.metric(
            name,
            results.joint_says(t, jp if t is j else None),
            f"chi-square {t.statistic:,.1f} vs {t.critical_value:,.1f}",
            delta_color="off",
            delta_arrow="off",
        )
    cols[-1].metric(
        "tokens per step",
        tokens_says,
        f"z = {tok.z:+.1f}" if tokens_says != "inconclusive" else "too few rounds",
        delta_color="off",
        delta_arrow="off",
    )
    seen = [name for name, t in rows if results.joint_says(t, jp if t is j else None) == "fail"]
    missed = [name for name, t in rows if results.joint_says(t, jp if t is j else None) == "pass"]
    if tokens_says != "inconclusive":
        (seen if tokens_says == "fail" else missed).append("tokens per step")
    st.markdown(
        "One coin per row keeps the first token exact: the first-token test cannot see this bug. After an accepted "
        "draft the shared coin is known to be small, so the next draft is accepted too often: that shifts the later "
        "tokens and raises the tokens per step above what a lossless rule gives."
    )
    st.markdown(
        f"In this run, tests that see it: {', '.join(seen) if seen else 'none'}; tests that miss it: "
        f"{', '.join(missed) if missed else 'none'}."
        + (
            f" Tokens per step: measured {res.tokens.measured:.4f} against {res.tokens.expected:.4f} for a "
            f"lossless rule ({'more' if res.tokens.measured > res.tokens.expected else 'fewer'})."
            if tokens_says != "inconclusive"
            else ""
        )
    )

joint_fig = figures.joint_comparison(res.observed, res.law, sc.V, sc.L)
st.plotly_chart(presenter.chart(joint_fig, st.session_state), key=S + "joint")
st.caption(f"Run time {res.seconds:.2f} s (cached: the same settings answer instantly).")

record = results.case_record(res, bug=None if bug == NONE else bug, n=n, seed=int(seed), V=sc.V, L=sc.L)
d1, d2 = st.columns(2)
d1.download_button(
    "Download this run (JSON)",
    results.to_json(record),
    file_name=f"specviz-bug-lab-{scenario}-{'correct' if bug == NONE else bug}.json",
    mime="application/json",
    key=S + "download_json",
    help="the fields of `specviz prove --json`, the verdict with its power, and the counts against the exact law",
)
d2.download_button(
    "Download the counts (CSV)",
    results.to_csv(record["cells"]),
    file_name=f"specviz-bug-lab-{scenario}-counts.csv",
    mime="text/csv",
    key=S + "download_csv",
    help="one row per sequence of tokens: observed count, exact probability, expected count",
)
