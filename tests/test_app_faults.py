"""The app on the faults of issue 21: extreme settings from a link or typed, bounded text, no torch."""

from __future__ import annotations

import math

import pytest
from apptest import metric, open_page, texts

from specviz.errors import InputError

pytestmark = pytest.mark.heavy  # the app without torch, in a subprocess: left out of the quick subset

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
from streamlit.testing.v1 import AppTest

from specviz.app import flow

pages = [lesson.file for lesson in flow.LESSONS]
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


# --- bounded text: every text box has a maximum, checked before parsing; the WebSocket limit --------


def test_text_is_refused_by_its_length_before_any_parsing(monkeypatch):
    from specviz.app import batch_demo, limits, position
    from specviz.app import settings_demo as sd

    calls = []
    monkeypatch.setattr(position, "parse_number", lambda s: calls.append(s) or 0.5)
    monkeypatch.setattr(position.re, "split", lambda *a, **k: calls.append(a) or [])
    long_list = "0.5, " * (limits.MAX_TYPED_CHARS // 5 + 1)  # one character over, and 10 MB
    for text in (long_list[: limits.MAX_TYPED_CHARS + 1], "1" * 10_000_000):
        with pytest.raises(InputError, match=r"^p: expected at most 2,000 characters of text, got [\d,]+ characters"):
            position.parse_text(text, "p")
        with pytest.raises(InputError, match=r"^target logits: expected at most 2,000 characters"):
            sd.parse_logits(text, "target logits")
    assert not calls  # refused by its length: nothing was split or read
    with pytest.raises(InputError, match=r"^draft counts: expected at most 50,000 characters"):
        batch_demo.parse_counts("1," * 25_001, 10_000, 4)
    # At the limit the text is parsed as before (and then judged on its values).
    monkeypatch.undo()
    assert position.parse_text("0.5 " + " " * (limits.MAX_TYPED_CHARS - 8) + "0.5", "p").values == [0.5, 0.5]
    assert batch_demo.parse_counts(", ".join(["4"] * 10_000), 10_000, 4).sum() == 40_000


def test_every_text_box_has_a_maximum_length():
    # max_chars: the browser stops typing there and Streamlit truncates a longer crafted value.
    from specviz.app import limits

    seen = {}
    setups = [
        ("app_pages/exact.py", {}),
        ("app_pages/settings.py", {"source": "typed"}),
        ("app_pages/verifiers.py", {"source": "pq"}),
        ("app_pages/batch.py", {"counts": "typed"}),
        ("app_pages/text.py", {}),
    ]
    for page, query in setups:
        at = open_page(page, query)
        for box in [*at.text_input, *at.text_area]:
            seen[(page, box.key)] = box.max_chars
    assert len(seen) == 8, seen
    assert all(0 < m <= limits.MAX_COUNTS_CHARS for m in seen.values()), seen
    assert seen[("app_pages/batch.py", "batch.typed")] == limits.MAX_COUNTS_CHARS
    assert seen[("app_pages/exact.py", "exact.p_text")] == limits.MAX_TYPED_CHARS


def test_a_crafted_value_longer_than_the_box_is_cut_and_answered_inline():
    # AppTest sets widget values the way a crafted message would: past what the browser allows.
    at = open_page("app_pages/settings.py", {"source": "typed"})
    at.text_input(key="settings.tl").set_value("1, " * 1_000_000).run()  # 3 MB
    assert not at.exception and escaped(at) is None
    assert at.text_input(key="settings.tl").value == ("1, " * 1_000)[:2000]  # Streamlit kept max_chars
    assert "target logits: expected at most 64 logits, got 667" in texts(at.error)  # the cut text, judged


def _largest_message(monkeypatch, runs) -> tuple[int, str]:
    from apptest import ROOT
    from streamlit.runtime.forward_msg_queue import ForwardMsgQueue
    from streamlit.testing.v1 import AppTest

    sizes: list[int] = []
    enqueue = ForwardMsgQueue.enqueue
    monkeypatch.setattr(ForwardMsgQueue, "enqueue", lambda self, m: sizes.append(m.ByteSize()) or enqueue(self, m))
    worst = (0, "")
    for page, query, clicks in runs:
        sizes.clear()
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
        at.run()
        at.switch_page(page)
        at.query_params.update(query)
        at.run()
        for key in clicks:
            at.button(key=key).click().run()
        assert not at.exception, (page, [e.value for e in at.exception])
        worst = max(worst, (max(sizes), f"{page} {query} {clicks}"))
    return worst


def test_server_max_message_size_fits_the_largest_message_with_room(monkeypatch):
    import tomllib

    from apptest import ROOT

    from specviz.app import flow, limits

    limit_mb = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]["maxMessageSize"]
    assert limit_mb == 2
    pages = [lesson.file for lesson in flow.LESSONS]
    heavy = [  # the largest answers found: a full Real-text run and check, the Batch page at its caps
        ("app_pages/text.py", {}, ["text.run", "text.check"]),
        ("app_pages/batch.py", {"B": "10000", "K": "16", "V": "23"}, ["batch.run"]),
        ("app_pages/find_bug.py", {}, ["findbug.reveal"]),
    ]
    size, where = _largest_message(monkeypatch, [(p, {}, []) for p in pages] + heavy)
    assert 1_000 < size < limit_mb * 1e6 / 10, (size, where)  # a tenth of the limit at most: room to grow
    assert 4 * limits.MAX_COUNTS_CHARS <= limit_mb * 1e6 / 10  # the longest typed text, 4 bytes a character


def test_the_server_refuses_a_message_over_the_limit_unread():
    browser = pytest.importorskip("browser")
    pytest.importorskip("websockets")
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    def send(url: str, n_bytes: int) -> str:
        msg = BackMsg()
        msg.rerun_script.widget_states.widgets.add(id="no-such-widget", string_value="x" * n_bytes)
        with connect(url.replace("http", "ws", 1) + "/_stcore/stream", subprotocols=["streamlit"],
                     max_size=None, open_timeout=30) as ws:  # fmt: skip
            ws.send(msg.SerializeToString())
            try:
                ws.recv(timeout=30)
                return "answered"
            except ConnectionClosed as e:
                return f"closed {e.rcvd.code if e.rcvd else None}"

    with browser.streamlit_server() as url:
        assert send(url, 1_500_000) == "answered"  # control: under the 2 MB limit the app runs
        assert send(url, 3_000_000) == "closed 1009"  # 1009: message too big, refused by the server
        log = browser.server_log(url)
    assert "Error deserializing" not in log and "Traceback" not in log


# --- crafted widget values: NaN or inf sent for an integer number_input -----------------------------
# Streamlit turns an integer box's value into an int in its own deserializer (int(nan) raises), and
# runs it in ScriptRunner.on_script_will_rerun, before app.py starts: no app code runs before it and
# Streamlit offers no hook there. What the app can do is what its config does: the visitor who sent it
# sees Streamlit's redacted message (client.showErrorDetails = "none"), no traceback or path; the server
# and every other session go on; a reload (a new session) works. Float boxes are safe: Streamlit
# replaces a non-finite float by the box's default value.


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_crafted_non_finite_integer_fails_only_the_senders_session(bad):
    at = open_page("app_pages/batch.py")
    at.number_input(key="batch.seed").set_value(bad).run()
    assert len(at.exception) == 1 and not at.title  # the page never ran for that message
    shown = str(at.exception[0].value)
    assert "redacted" in shown and "Traceback" not in shown and "/" not in shown.split("(if")[0]
    other = open_page("app_pages/batch.py")  # another visitor meanwhile, and the sender after a reload
    assert other.title[0].value == "Batch" and not other.exception
    assert other.number_input(key="batch.seed").value == 0


def test_a_crafted_non_finite_float_falls_back_to_the_default():
    at = open_page("app_pages/settings.py", {"rT": "0.7"})
    at.number_input(key="settings.rT").set_value(math.nan).run()
    assert not at.exception and escaped(at) is None
    assert at.number_input(key="settings.rT").value == 0.0  # the box's default (its minimum), not NaN
    assert math.isfinite(float(metric(at, "acceptance rate Σ min(p, q)")))
