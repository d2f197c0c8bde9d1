"""Bug lab: pick a mistake, predict whether the end-to-end test catches it, run it, compare."""

from __future__ import annotations

import streamlit as st

from specviz import InputError, figures, limits, links, prove
from specviz.bugs import BUGS

S = "buglab."
NONE = "none (correct verifier)"
PREDICTIONS = ("the test will pass", "the test will fail")
PARAMS = [
    links.choice_param("bug", NONE, [NONE, *BUGS]),
    links.choice_param("scenario", "reference", list(prove.SCENARIOS)),
    links.int_param("n", 100_000, 1, 10**12),
    links.int_param("seed", 0, 0, 2**32 - 1),
]


def home_scenario(bug: str) -> str:
    return "reference" if bug == NONE else prove.HOME.get(bug, ("reference",))[0]


@st.cache_data(show_spinner="Running the test…", max_entries=64)
def run_case(scenario: str, n: int, seed: int, bug: str) -> prove.CaseResult:
    return prove.run_case(scenario, n=n, seed=seed, bug=None if bug == NONE else BUGS[bug])


def on_bug_change() -> None:
    st.session_state[S + "scenario"] = home_scenario(st.session_state[S + "bug"])
    st.session_state[S + "prediction"] = None  # a new bug, a new prediction


query = st.query_params.to_dict()
fresh = S + "scenario" not in st.session_state
link_notes = links.init_state(query, st.session_state, PARAMS, S)
if fresh and "scenario" not in query:  # no link, or one naming only the bug: start where the bug shows
    st.session_state[S + "scenario"] = home_scenario(st.session_state[S + "bug"])

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
with right:
    prediction = st.radio("Your prediction", PREDICTIONS, index=None, key=S + "prediction")
    n_asked = st.number_input("N sequences", min_value=1, step=10_000, key=S + "n")
    n, n_note = limits.cap(
        int(n_asked), limits.MAX_PROVE_N, "N", "a larger test takes more than a few seconds per click"
    )
    if n_note:
        st.warning(n_note, icon=":material/content_cut:")
    seed = st.number_input("Seed", min_value=0, max_value=2**32 - 1, step=1, key=S + "seed")
    clicked = st.button("Run the test", type="primary", key=S + "run")

link = links.encode_params({"bug": bug, "scenario": scenario, "n": int(n_asked), "seed": int(seed)}, PARAMS)
if st.query_params.to_dict() != link:  # the address bar reproduces what is shown
    st.query_params.from_dict(link)
run_key = (scenario, n, int(seed), bug)
if clicked:
    st.session_state[S + "ran"] = run_key

# --- reveal ----------------------------------------------------------------------------------------
st.divider()
if st.session_state.get(S + "ran") != run_key:
    st.info("Make your prediction, then click **Run the test**.")
    st.stop()

try:
    res = run_case(*run_key)
except InputError as e:
    st.error(str(e), icon=":material/error:")
    st.stop()

if res.error:
    st.error(f"The verifier raised: {res.error}")
    st.stop()

outcome = PREDICTIONS[0] if res.passed else PREDICTIONS[1]
what = {
    "pass": "The correct verifier passes.",
    "FAIL": "The correct verifier FAILED: a false alarm or a real bug.",
    "caught": f"The test fails: {bug} is caught.",
    "missed": f"The test passes: {bug} is missed here.",
}
verdict_line = f"**Verdict: {res.verdict}.** {what[res.verdict]}"
(st.success if res.verdict in ("pass", "caught") else st.error)(verdict_line)
if prediction is None:
    st.caption("You did not predict this time: next time decide first, then run.")
else:
    right_or_wrong = "You were right." if prediction == outcome else "You were wrong: read the explanation above."
    st.markdown(f"You predicted *{prediction}*; it {'passed' if res.passed else 'failed'}. {right_or_wrong}")

j = res.joint
m = st.columns(4)
m[0].metric(f"chi-square ({j.dof} dof)", f"{j.statistic:,.1f}", help=f"{j.cells} cells after pooling")
m[1].metric(f"critical value (α = {j.alpha:g})", f"{j.critical_value:,.1f}")
m[2].metric("p-value", f"{j.p_value:.3g}")
m[3].metric("joint test", "pass" if j.passed else "fail")
m = st.columns(4)
m[0].metric("TV(observed, exact)", f"{j.tv:.4f}")
m[1].metric(
    f"detectable TV ({j.power:.0%} power)",
    f"{j.detectable_tv:.4f}",
    help="any shift of the law at least this large in total variation fails the test with this power",
)
m[2].metric(
    "tokens per step, measured",
    f"{res.tokens_measured:.4f}",
    f"± {res.tokens_se:.4f} (1 SE)",
    delta_color="off",
    delta_arrow="off",
)
m[3].metric(
    "tokens per step, theory",
    f"{res.tokens_theory:.4f}",
    f"z = {res.tokens_z:+.2f}",
    delta_color="off",
    delta_arrow="off",
    help="exact expectation over the contexts the run met",
)
st.caption(
    f"The tokens-per-step test {'passes' if res.tokens_passed else 'fails'} (|z| = {abs(res.tokens_z):.2f}). "
    "The verdict fails when either test fails."
)

if bug == "shared_uniform":
    st.subheader("The lesson: a first-token-only test misses it")
    a, b = st.columns(2)
    for col, name, t in ((a, "first token only", res.first_token), (b, f"joint law of {sc.L} tokens", j)):
        col.metric(
            name,
            "pass" if t.passed else "fail",
            f"chi-square {t.statistic:,.1f} vs {t.critical_value:,.1f}",
            delta_color="off",
            delta_arrow="off",
        )
    st.markdown(
        "One coin per row keeps the first token exact, so a test of the first token (or of each position on its own) "
        "passes. The damage is in the dependence between positions: after an accepted draft the shared coin is known "
        "to be small, so the next draft is accepted too often. Only a test of the **joint** law sees it."
    )

st.plotly_chart(figures.joint_comparison(res.observed, res.law, sc.V, sc.L), key=S + "joint")
st.caption(f"Run time {res.seconds:.2f} s (cached: the same settings answer instantly).")
