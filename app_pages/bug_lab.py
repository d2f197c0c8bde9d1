"""Bug lab: pick a mistake, predict whether the end-to-end test catches it, run it, compare."""

from __future__ import annotations

import streamlit as st

from specviz import InputError
from specviz.app import bug_lab as bl
from specviz.app import figures, flow, limits, links, presenter, results, serving
from specviz.proof import engine_bugs, prove, scenarios
from specviz.proof.bugs import BUGS

S = "buglab."
NONE, PREDICTIONS, PREDICT_WORDS = bl.NONE, bl.PREDICTIONS, bl.PREDICT_WORDS
PARAMS = [
    links.choice_param("predict", "none", ["none", *PREDICT_WORDS]),
    links.choice_param("bug", NONE, [NONE, *BUGS]),
    links.choice_param("scenario", "reference", list(scenarios.SCENARIOS)),
    links.int_param("n", 100_000, 1, 10**12),
    links.int_param("seed", 0, 0, 2**32 - 1),
]


@st.cache_data(show_spinner="Running the test…", max_entries=64, ttl=3600)  # counts over V^L cells: small
def run_case(scenario: str, n: int, seed: int, bug: str) -> prove.CaseResult:
    return prove.run_case(scenario, n=n, seed=seed, bug=None if bug == NONE else BUGS[bug])


def set_n_and_run(n: int) -> None:
    """The inconclusive verdict's button: take the suggested N and run with it (one click, not two)."""
    st.session_state[S + "n"] = n
    ss = st.session_state
    st.session_state[S + "ran"] = (ss[S + "scenario"], min(n, limits.MAX_PROVE_N), int(ss[S + "seed"]), ss[S + "bug"])


def on_bug_change() -> None:
    st.session_state[S + "scenario"] = bl.home_scenario(st.session_state[S + "bug"])
    st.session_state[S + "prediction"] = None  # a new bug, a new prediction


# A new session, or a link to this page (e.g. from "Why it is exact"): a link naming only the bug starts where it shows.
new_session = not links.seen(st.session_state, S + "scenario")
RAN = links.Result("ran", answers_prediction=True)  # a link restores the bug, the settings and the prediction step
link = links.open_page(st, PARAMS, S, keep=("prediction",), results=(RAN,))
from_link = link.from_link
if from_link:  # a shared link never answers before the visitor runs it, even for settings this session ran
    st.session_state.pop(S + "ran", None)
if (new_session or from_link) and "scenario" not in link.query:  # start where the bug shows
    st.session_state[S + "scenario"] = bl.home_scenario(st.session_state[S + "bug"])
if from_link and st.session_state[S + "predict"] in PREDICT_WORDS:  # the link's prediction, kept
    st.session_state[S + "prediction"] = bl.prediction_from_link(st.session_state[S + "predict"])

st.title("Bug lab")
st.caption(
    "Each bug is the correct verifier with exactly one step swapped. The test: generate N sequences of L tokens by "
    "repeated draft-and-verify rounds over Markov chains, then a chi-square test of their joint law against the "
    "target's exact law, and tokens per step against the exact expectation."
)
link.show_notes()

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
    scenario = st.selectbox("Scenario", list(scenarios.SCENARIOS), key=S + "scenario")
    sc = scenarios.SCENARIOS[scenario]
    st.caption(f"**{sc.title}.** {sc.description} V = {sc.V}, L = {sc.L}, K = {sc.K}.")
    if scenario != bl.home_scenario(bug):
        st.caption(f"This bug's home scenario is '{bl.home_scenario(bug)}'.")
    with st.expander(f"{len(engine_bugs.FAULTS)} more failures no test of the law can see"):
        for fault in engine_bugs.FAULTS.values():
            st.markdown(f"**{fault.name}: {fault.title}.** {fault.explanation}")
            st.caption(f"Caught by: {fault.caught_by}.")
with right:
    prediction = st.radio("Your prediction", PREDICTIONS, index=None, key=S + "prediction")
    # Right under the prediction: in view on a 1280 x 720 projector without scrolling (N and seed rarely change).
    clicked = st.button("Run the test", type="primary", key=S + "run")
    n_asked = st.number_input("N sequences", min_value=1, step=10_000, key=S + "n")
    n = link.cap(int(n_asked), limits.MAX_PROVE_N, "N", "a larger test takes more than a few seconds per click")
    seed = st.number_input("Seed", min_value=0, max_value=2**32 - 1, step=1, key=S + "seed")

shown_settings = {"bug": bug, "scenario": scenario, "n": int(n_asked), "seed": int(seed)}
if prediction is not None:
    shown_settings["predict"] = bl.link_word(prediction)
run_key = (scenario, n, int(seed), bug)
if clicked or link.restores(RAN):  # restores: never, the verdict answers the visitor's prediction
    st.session_state[S + "ran"] = run_key

# --- reveal ----------------------------------------------------------------------------------------
ran = st.session_state.get(S + "ran") == run_key
link.show_in_link(shown_settings, [RAN] if ran else [])  # the address bar shows them (and no mark for RAN)
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
judged = bl.judge_prediction(prediction, verdict.word, presenter.presenting(st.session_state))
(st.markdown if judged.judged else st.caption)(judged.text)
retry = bl.retry_n(verdict)
if retry is not None:
    st.button(f"Run again with N = {retry:,} (the N it needs, with a margin)", key=S + "use_needed_n",
              on_click=set_n_and_run, args=(retry,))  # fmt: skip

for row in bl.case_metrics(res, verdict):
    presenter.metrics(st.columns(len(row)), row)
st.caption(bl.tokens_caption(verdict.tokens, res.joint.alpha))

if bug == "shared_uniform":
    st.subheader("The lesson: a first-token-only test misses it")
    lesson = bl.shared_uniform_lesson(res, verdict.joint_p, verdict.tokens, sc.L)
    presenter.metrics(st.columns(len(lesson.tiles)), lesson.tiles)
    st.markdown(bl.SHARED_UNIFORM_WHY)
    st.markdown(lesson.seen)

joint_fig = figures.joint_comparison(res.observed, res.law, sc.V, sc.L)
st.plotly_chart(presenter.chart(joint_fig, st.session_state), key=S + "joint")
st.caption(f"Run time {res.seconds:.2f} s (cached: the same settings answer instantly).")
for col, d in zip(st.columns(2), bl.downloads(res, bug, scenario, n, int(seed), sc.V, sc.L), strict=True):
    col.download_button(d.label, d.data, d.file_name, d.mime, key=S + d.key, help=d.help)
