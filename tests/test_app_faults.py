"""The app on the faults of issue 21: extreme settings from a link or typed, bounded text, no torch."""

from __future__ import annotations

import math

import pytest
from apptest import metric, open_page, texts

ESCAPED_KEY = "app.escaped_input_error"


def escaped(at) -> str | None:
    return at.session_state[ESCAPED_KEY] if ESCAPED_KEY in at.session_state else None


def test_sampling_settings_link_with_an_underflowing_temperature_shows_finite_numbers():
    # Was: acceptance nan, tokens per step 4.0000, and "InputError escaped page" in the log.
    at = open_page("app_pages/settings.py", {"rT": "1e-320"})
    acceptance = float(metric(at, "acceptance rate Σ min(p, q)"))
    per_step = float(metric(at, "tokens per step, K = 3"))
    assert 0 <= acceptance <= 1 and math.isfinite(per_step)
    # K = 3 drafts at acceptance a: (1 - a^4) / (1 - a) tokens per step, to the 4 decimals shown.
    assert per_step == pytest.approx((1 - acceptance**4) / (1 - acceptance), abs=2e-4)
    assert not at.error and escaped(at) is None


def test_real_text_link_with_an_underflowing_temperature_writes_text():
    at = open_page("app_pages/text.py", {"T": "1e-320", "rounds": "5"})
    assert metric(at, "target calls (rounds)") == "5"
    assert int(metric(at, "characters generated")) >= 5
    assert math.isfinite(float(metric(at, "tokens per target call")))
    assert not at.error and escaped(at) is None


def test_typed_logits_at_the_ends_of_float64_give_disjoint_p_and_q():
    # p = softmax([1e308, 0] / 0.5) = [1, 0] and q = [0, 1]: nothing in common, acceptance 0.
    query = {"source": "typed", "tl": "1e308, 0", "dl": "0, 1e308", "rT": "0.5", "dT": "0.5"}
    at = open_page("app_pages/settings.py", query)
    assert metric(at, "acceptance rate Σ min(p, q)") == "0.0000"
    assert metric(at, "tokens per step, K = 3") == "1.0000"
    assert not at.error and escaped(at) is None, texts(at.error)


# --- without torch: every page works, and the Batch page says how to add it ------------------------

NO_TORCH = r'''
import importlib.abc, json, sys


class NoTorch(importlib.abc.MetaPathFinder):
    """As if torch were not installed: ``import torch`` raises ModuleNotFoundError."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoTorch())
sys.path.insert(0, "tests")
import ast
from pathlib import Path
from streamlit.testing.v1 import AppTest

pages = [ast.literal_eval(c.args[0]) for c in ast.walk(ast.parse(Path("app.py").read_text()))
         if isinstance(c, ast.Call) and getattr(c.func, "attr", None) == "Page"]
out = {}
for page, query in [(p, {}) for p in pages] + [("app_pages/batch.py", {"backend": "PyTorch CPU", "B": "8"})]:
    at = AppTest.from_file("app.py", default_timeout=120)
    at.run()
    at.switch_page(page)
    at.query_params.update(query)
    at.run()
    if page.endswith("batch.py") and not query:
        at.button(key="batch.run").click().run()
    out[page + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")] = {
        "exceptions": [str(e.value)[:500] for e in at.exception],
        "errors": [str(e.value) for e in at.error],
        "text": "\n".join(str(e.value) for e in [*at.caption, *at.warning, *at.markdown, *at.info]),
        "escaped": at.session_state["app.escaped_input_error"] if "app.escaped_input_error" in at.session_state
        else None,
        "backends": list(at.radio(key="batch.backend").options) if page.endswith("batch.py") else None,
    }
out["torch imported"] = "torch" in sys.modules
print(json.dumps(out))
'''


def test_every_page_works_without_torch():
    import json
    import subprocess
    import sys
    from pathlib import Path

    from specviz.app import batch_demo, links

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-c", NO_TORCH], cwd=root, capture_output=True, text=True, timeout=900,
        env={**__import__("os").environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out.pop("torch imported") is False
    assert len(out) >= 10, sorted(out)  # every registered page, and the link asking for PyTorch CPU
    for page, seen in out.items():
        assert not seen["exceptions"] and seen["escaped"] is None, (page, seen)
    batch = out["app_pages/batch.py"]
    assert batch["backends"] == ["NumPy"], batch["backends"]
    missing = links.plain(batch_demo.TORCH_MISSING)  # as markdown shows it, the brackets escaped
    assert f"The PyTorch backends are disabled: {missing}." in batch["text"]
    assert "verified in one call" in batch["text"] and not batch["errors"]
    linked = out["app_pages/batch.py?backend=PyTorch CPU&B=8"]
    assert f"PyTorch CPU is not available here ({missing}); using NumPy." in linked["text"]
