"""Figures README and docs/ state about the pages, the caps and the proof suite, recomputed from the code.

Each test reads the number out of README's text and computes it; a changed default or a
changed figure makes it fail (the screenshot captions quote what the pages show).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import prose  # tests/ is on the path (see conftest)
import pytest

from specviz.app import limits, settings_demo, text
from specviz.proof import court, scenarios
from specviz.proof.bugs import BUGS
from specviz.verifiers import reference
from specviz.verifiers.processing import Settings

ROOT = Path(__file__).resolve().parents[1]
README = prose.one_line()  # README.md and docs/*.md on one line: wrapping does not matter


def grab(pattern: str) -> tuple[str, ...]:
    m = re.search(pattern, README)
    assert m, f"README no longer says {pattern!r}"
    return m.groups()


def test_verifiers_caption_block_against_chain_on_the_toy_example():
    block, chain, tv = grab(
        r"than the chain \(([\d.]+) against ([\d.]+)\), and the lossy last-threshold variant more "
        r"still, at an exact TV of (\d\.\d+)"
    )
    rows = {j.rule: j for j in court.compare(["chain", "block", "block, lossy last threshold"], court.toy_problem())}
    assert f"{rows['block'].expected_tokens_per_step:.2f}" == block
    assert f"{rows['chain'].expected_tokens_per_step:.2f}" == chain
    lossy = rows["block, lossy last threshold"]
    assert f"{lossy.tv_from_target:.3f}" == tv and not lossy.lossless
    assert lossy.expected_tokens_per_step > rows["block"].expected_tokens_per_step


def test_sampling_settings_caption_is_the_pages_first_view():
    top_p, top_k, a, tokens, K = grab(
        r"the request's top-p ([\d.]+) and the drafter's top-k (\d+), .*? acceptance rate "
        r"([\d.]+) and ([\d.]+) tokens per step at K = (\d+)"
    )
    # The page opens with these settings (app_pages/settings.py takes its defaults from here).
    assert settings_demo.DEFAULT_REQUEST == Settings(top_p=float(top_p))
    assert settings_demo.DEFAULT_DRAFTER == Settings(top_k=int(top_k))
    assert settings_demo.DEFAULT_PRESET == "hot drafter"
    zt, zd, _ = settings_demo.PRESETS[settings_demo.DEFAULT_PRESET]
    rep = settings_demo.settings_report(zt, zd, settings_demo.DEFAULT_REQUEST, settings_demo.DEFAULT_DRAFTER, K=int(K))
    assert f"{rep.pipelines[0].acceptance:.4f}" == a
    assert f"{rep.tokens_per_step:.4f}" == tokens
    assert 'links.int_param("K", 3,' in (ROOT / "app_pages" / "settings.py").read_text() and K == "3"


def test_real_text_caption_is_what_the_page_generates():
    K, T, seed, measured, exact = grab(r"\(K = (\d+), temperature (\d+), seed (\d+)\): .*? ([\d.]+) tokens per target "
                                       r"call against an exact ([\d.]+) for the contexts met")  # fmt: skip
    pair = text.trained_pair()
    steps = text.transcript(pair.target, pair.drafter, text.encode("The ").tolist(), int(K),
                            Settings(temperature=float(T)), int(seed), until=200)  # fmt: skip
    got, want = text.tokens_per_call(steps)
    assert (f"{got:.3f}", f"{want:.3f}") == (measured, exact)
    assert '"prompt", "The "' in (ROOT / "app_pages" / "text.py").read_text()  # the page's default prompt


def test_caps_in_the_serving_paragraph():
    rows, elems, seqs, per_point, table = grab(
        r"a Batch click at most ([\d,]+) rows and ([\d,]+) elements per tensor, a Bug-lab test at most ([\d,]+) "
        r"sequences, ([\d,]+) rows per tokens-per-step point, (\d+) tokens in the p/q table"
    )
    as_int = [int(x.replace(",", "")) for x in (rows, elems, seqs, per_point, table)]
    assert as_int == [limits.MAX_BATCH_ROWS, limits.MAX_BATCH_ELEMENTS, limits.MAX_PROVE_N, limits.MAX_TOKENS_N,
                      limits.MAX_TABLE_V]  # fmt: skip


def test_mutant_counts_in_the_prove_section():
    import user_verifiers as uv  # tests/ is on the path (see conftest)

    total, bonus, none_only, short = grab(
        r"with (\d+) single-step mutants \((\w+) wrong only in the bonus of full rows, "
        r"(\w+) of them only when `draft_probs=None`; (\w+) only on short rows\)"
    )
    words = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}
    assert int(total) == len(uv.MUTANTS)
    full_bonus = [m for m in uv.MUTANTS if m.bonus_only and m.shapes == "all"]
    assert words[bonus] == len(full_bonus)
    assert words[none_only] == sum("without_q" in m.name for m in full_bonus)
    assert words[short] == sum(m.shapes == "ragged" for m in uv.MUTANTS)


def speed_table(section: str, caption_starts: str) -> list[dict[str, str]]:
    """The rows of a generated table of docs/speed.md (benchmarks/speed_doc.py), each by column name."""
    from benchmarks import speed_doc

    body = speed_doc.sections(speed_doc.DOC.read_text())[section]
    (table,) = [t for t in speed_doc.tables(body) if t.caption.startswith(caption_starts)]
    return [dict(zip(table.header, row, strict=True)) for row in table.rows]


def test_speed_table_counts_and_the_quantization_bound():
    # bench_sim's table names the prove suite it timed: the scenarios and bugs the code has now
    # (a changed catalogue means the table is stale: rerun bench_sim.py --write-doc).
    (row,) = [r for r in speed_table("bench_sim", "Where users wait") if "specviz prove" in r["click"]]
    scs, bugs, rc = re.search(r"\((\d+) scenarios, (\d+) bugs; exit (\d+)\)", row["click"]).groups()
    assert (int(scs), int(bugs), int(rc)) == (len(scenarios.SCENARIOS), len(BUGS), 0)
    # bench_verify's constants table: the total-variation bound V * 2^-48, recomputed from the code.
    bounds = {int(r["V"]): float(r["TV bound"]) for r in speed_table("bench_verify", "The draw's constants")}
    assert 128256 in bounds and np.isclose(bounds[128256], 4.6e-10)
    for V, bound in bounds.items():
        assert bound == pytest.approx(V / reference.GRID, rel=0.06)  # printed to two significant digits


def test_speed_section_sum_margin_is_the_codes():
    # "A row whose float sum lies within _sample.SUM_MARGIN of the tolerance is summed again
    # exactly on the weights' grid": the generated constants table is the code's constants.
    from specviz.verifiers import _sample

    rows = speed_table("bench_verify", "The draw's constants")
    assert rows
    for r in rows:
        assert float(r["sum margin"]) == _sample.SUM_MARGIN
        assert 2.0 ** int(r["grid step"].removeprefix("2^-")) == reference.GRID
        assert int(r["block"]) == _sample.BLOCK
    # The margin covers a float32 sum's error (blocks of BLOCK added in float32) with room to spare.
    assert _sample.SUM_MARGIN > 2 * _sample.BLOCK * 2.0**-24


def test_the_app_address_readme_gives_is_the_one_the_server_prints():
    import tomllib

    from streamlit import config

    (url,) = grab(r"it prints the address to open, (http://[\d.]+:\d+)\)")
    server = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]
    port = server.get("port", config._config_options_template["server.port"].default_val)  # Streamlit's default
    assert url == f"http://{server['address']}:{port}" and server["headless"]  # headless: no browser opens by itself
