"""The Verifiers page under AppTest, run on its own (app.py's navigation lists it separately).

The page renders without exception, shows the paper's toy figures as the court computes them,
changes its numbers when p and q change, shows bad input inline and keeps running, and puts
its settings in the link.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from apptest import shown_table
from streamlit.testing.v1 import AppTest

from specviz.app import certify
from specviz.proof import court
from specviz.verifiers import tree
from specviz.verifiers.block import block_thresholds

ROOT = Path(__file__).resolve().parents[1]
PAGE = str(ROOT / "app_pages" / "verifiers.py")


def run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def metrics(at: AppTest) -> dict[str, tuple[str, str]]:
    return {m.label: (m.value, m.delta) for m in at.metric}


def test_toy_example_figures_and_badges():
    at = run(AppTest.from_file(PAGE, default_timeout=120))
    m = metrics(at)
    assert m["chain: accepted drafts per step"] == (f"{10 / 9:.6f}", "lossless")
    assert m["block: accepted drafts per step"] == (f"{11 / 9:.6f}", "lossless")
    assert m["block, lossy last threshold: accepted drafts per step"] == (f"{4 / 3:.6f}", "LOSSY")
    table = shown_table(at, "verdict")
    # k = 2 by default; the court's tree rows are k chains from the root, named so (issue 19: one name per shape)
    assert list(table["rule"]) == [*court.RULES, "2 chains from the root, i.i.d. from q",
                                   "2 chains from the root, q's top 2"]  # fmt: skip
    trees = table[table["rule"].str.startswith("2 chains")]
    # TV is printed: a lossless rule's rounding noise reads "< 1e-12" (or "0"), never "6.59e-17"
    assert (trees["verdict"] == "lossless").all() and trees["TV from target"].isin(["< 1e-12", "0"]).all()
    assert not table["TV from target"].str.contains("e-1[3-9]").any()
    iid = trees.iloc[0]["accepted drafts per step"]
    assert iid > 10 / 9 + 0.1  # two drafts from the root keep more than one chain
    lossy = table[table["rule"] == "block, lossy last threshold"].iloc[0]
    assert lossy["TV from target"] == f"{1 / 9:.3g}"
    assert dict(at.query_params)["source"] in ("toy", ["toy"])


def test_own_p_and_q_change_the_numbers_and_bad_input_is_inline():
    at = run(AppTest.from_file(PAGE, default_timeout=120))
    at.selectbox(key="verifiers.source").set_value("pq")
    run(at)  # the p, q and K inputs are enabled for this source only
    at.text_input(key="verifiers.p").set_value("0.6, 0.4")
    at.text_input(key="verifiers.q").set_value("0.2, 0.8")
    at.slider(key="verifiers.K").set_value(1)
    run(at)
    want = {j.rule: j for j in court.compare(["chain", "block"], court.pair_problem([0.6, 0.4], [0.2, 0.8], 1))}
    m = metrics(at)
    assert m["chain: accepted drafts per step"][0] == f"{want['chain'].expected_accepted_per_step:.6f}"
    assert abs(want["chain"].expected_accepted_per_step - 0.6) < 1e-12  # sum min(p, q) = 0.2 + 0.4
    at.text_input(key="verifiers.p").set_value("0.6, 0.6")  # weights: divided by their sum, with a note
    run(at)
    assert not at.error and any("p summed to 1.2, not 1; each value was divided by it" in i.value for i in at.info)
    half = {j.rule: j for j in court.compare(["chain"], court.pair_problem([0.5, 0.5], [0.2, 0.8], 1))}
    assert metrics(at)["chain: accepted drafts per step"][0] == f"{half['chain'].expected_accepted_per_step:.6f}"
    assert abs(half["chain"].expected_accepted_per_step - 0.7) < 1e-12  # sum min(p, q) = 0.2 + 0.5
    link = {k: v[-1] if isinstance(v, list) else v for k, v in at.query_params.items()}
    assert link["source"] == "pq" and link["p"] == "0.6, 0.6" and link["K"] == "1"
    at.text_input(key="verifiers.p").set_value("0.6, -0.4")
    run(at)
    assert any("p: expected non-negative probabilities" in str(e.value) for e in at.error)
    assert not at.metric  # no numbers for a problem that is not one


def test_tree_section_follows_k():
    at = run(AppTest.from_file(PAGE, default_timeout=120))
    toy = ((1 / 3, 2 / 3), (2 / 3, 1 / 3))
    for k in (1, 2):
        at.slider(key="verifiers.k").set_value(k)
        run(at)
        rows = shown_table(at, "candidates").to_dict("records")
        want = tree.kary_expected_accepted(*toy, k, 2, iid=True)
        assert abs(rows[0]["exact accepted per step"] - want) < 1e-12
    assert abs(tree.kary_expected_accepted(*toy, 1, 2) - 10 / 9) < 1e-12  # k = 1 is the chain
    assert tree.kary_expected_accepted(*toy, 2, 2) > 10 / 9 + 0.1
    at.slider(key="verifiers.k").set_value(3)  # 3 distinct top tokens of a 2-token q: said inline
    run(at)
    assert "at most V = 2" in shown_table(at, "candidates").to_dict("records")[1]["measured (10,000 trees)"]


def test_a_hostile_link_falls_back_or_is_shown_as_text():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.query_params.update({"source": "nope", "p": "[x](http://evil)", "K": "99"})
    run(at)
    assert any("source" in str(w.value) for w in at.warning)  # bad choice: a note, the default used
    assert metrics(at)["block: accepted drafts per step"][0] == f"{11 / 9:.6f}"  # the toy example, unharmed
    at.selectbox(key="verifiers.source").set_value("pq")
    run(at)
    errors = [str(e.value) for e in at.error]
    assert errors and all("](" not in e for e in errors)  # the typed text is escaped, never a link


def test_traced_tree_changes_with_the_seed():
    at = run(AppTest.from_file(PAGE, default_timeout=120))
    first = shown_table(at, "coin u").to_dict("records")
    assert {"accepted", "rejected", "not tried"} & {r["outcome"] for r in first}
    assert first[-1]["outcome"].startswith("drawn at node")
    seen = [first]
    for seed in (1, 2, 3):
        at.number_input(key="verifiers.seed").set_value(seed)
        run(at)
        seen.append(shown_table(at, "coin u").to_dict("records"))
    assert any(str(s) != str(first) for s in seen[1:])  # other coins, another walk


def test_measure_button_runs_every_rule_beside_its_exact_figure():
    at = run(AppTest.from_file(PAGE, default_timeout=120))
    assert shown_table(at, "z") is None  # no measurement before the click
    at.number_input(key="verifiers.n").set_value(2_000)
    at.button(key="verifiers.measure").click()
    run(at)
    measured = shown_table(at, "z").to_dict("records")
    assert [r["rule"] for r in measured] == list(court.RULES)
    chain = next(r for r in measured if r["rule"] == "chain")
    assert abs(chain["exact, over the rounds run"] - (1 + 10 / 9)) < 1e-12  # context-free: every round alike
    assert all(abs(float(r["z"])) < 6 for r in measured if r["z"] != "–")  # "–": no power, no z
    assert "None" not in at.dataframe[1].value.to_csv()
    link = {k: v[-1] if isinstance(v, list) else v for k, v in at.query_params.items()}
    assert link["n"] == "2000"


def test_measure_without_power_says_inconclusive_not_a_z():
    at = run(AppTest.from_file(PAGE, default_timeout=120))
    at.number_input(key="verifiers.n").set_value(100)
    at.button(key="verifiers.measure").click()
    run(at)
    measured = shown_table(at, "z").to_dict("records")
    for r in measured:  # the rule of every verdict: no power, no pass or fail, no z
        if r["detectable shift"] > 0.05:
            assert r[certify.SIMULATION_TEST] == "inconclusive" and r["z"] == "–", r
            assert "inconclusive" in r["measured tokens per verification (±1 SE)"]
    by = {r["rule"]: r for r in measured}
    says = certify.SIMULATION_TEST
    assert by["chain"][says] == by["block"][says] == "inconclusive"  # 100 sequences are too few
    at.number_input(key="verifiers.n").set_value(20_000)  # control: enough sequences to speak
    at.button(key="verifiers.measure").click()
    run(at)
    big = shown_table(at, "z").to_dict("records")
    assert all(r[certify.SIMULATION_TEST] == "agrees" for r in big if r["rule"] in ("chain", "block")), big
    assert not any("pass" in str(v) for r in big for v in r.values())  # never "pass" beside a lossy rule


def test_block_step_by_step_shows_block_thresholds_numbers_and_follows_the_seed():
    at = run(AppTest.from_file(PAGE, default_timeout=120))
    toy_p, toy_q = [1 / 3, 2 / 3], [2 / 3, 1 / 3]
    seen = []
    for seed in (0, 1, 2, 3):
        at.number_input(key="verifiers.seed").set_value(seed)
        run(at)
        rows = shown_table(at, "threshold h_i").to_dict("records")
        x = np.array([[r["token x_i"] for r in rows]])
        thr = block_thresholds(np.array([[toy_p] * 3]), np.array([[toy_q] * 2]), x, [2])
        assert [r["threshold h_i"] for r in rows] == thr.thresholds[0].tolist()  # the package's numbers
        assert [r["weight w_i"] for r in rows] == thr.weights[0, 1:].tolist()
        tau = max([i + 1 for i, r in enumerate(rows) if r["uniform eta_i"] < r["threshold h_i"]], default=0)
        assert [r["kept"] for r in rows] == [i < tau for i in range(2)]  # the last passing uniform decides
        seen.append(str(rows))
        link = {k: v[-1] if isinstance(v, list) else v for k, v in at.query_params.items()}
        assert link["seed"] == str(seed) or (seed == 0 and "seed" not in link)
    assert len(set(seen)) > 1  # other drafts and uniforms with another seed
    figs = [c.key for c in at.get("plotly_chart")]
    # the court's chart, the two tree shapes (issue 19: each shape drawn) and the block's drawing
    assert figs == ["verifiers.chart", "verifiers.shape_chains", "verifiers.shape_kary", "verifiers.block_chart"]


def test_greyed_out_boxes_show_the_problem_judged_and_the_typed_pair_is_kept():
    """Issue 29: the toy example was judged while the greyed boxes showed the textbook p and q."""
    at = run(AppTest.from_file(PAGE, default_timeout=120))
    assert at.selectbox(key="verifiers.source").value == "toy"
    boxes = {t.label: t.value for t in at.text_input}
    assert boxes == {"p (target)": "1/3, 2/3", "q (draft)": "2/3, 1/3"}  # court.TOY_P and TOY_Q
    assert [s.value for s in at.slider if s.label.startswith("Drafts")] == [court.TOY_K]
    assert all(t.disabled for t in at.text_input)
    at.selectbox(key="verifiers.source").select("pq")
    run(at)
    at.text_input(key="verifiers.p").set_value("0.6, 0.4")
    at.text_input(key="verifiers.q").set_value("0.5, 0.5")
    run(at)
    at.selectbox(key="verifiers.source").select("reference")
    run(at)
    assert [s.value for s in at.slider if s.label.startswith("Drafts")] == [certify.shown_problem("reference").K]
    assert "0.6, 0.4" not in [t.value for t in at.text_input]
    at.selectbox(key="verifiers.source").select("pq")
    run(at)
    assert at.text_input(key="verifiers.p").value == "0.6, 0.4"  # kept while another problem was judged
    assert at.text_input(key="verifiers.q").value == "0.5, 0.5"
