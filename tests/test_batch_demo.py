"""The Batch page's demo (specviz.app.batch_demo): typed counts, caps, random ragged batches, backends."""

from __future__ import annotations

import numpy as np
import pytest

from specviz import InputError
from specviz.app import batch_demo, limits


def test_parse_counts_explains_what_is_wrong():
    np.testing.assert_array_equal(batch_demo.parse_counts("4, 2;0 ,3", 4, 4), [4, 2, 0, 3])
    with pytest.raises(InputError, match="expected B = 4 comma-separated counts, one per row, got 3"):
        batch_demo.parse_counts("1,2,3", 4, 4)
    with pytest.raises(InputError, match=r"counts in \[0, K = 4\], got 5 for row 1"):
        batch_demo.parse_counts("1,5", 2, 4)
    with pytest.raises(InputError, match="whole numbers, got 'x' for row 0"):
        batch_demo.parse_counts("x", 1, 4)


def test_cap_batch_keeps_tensors_within_the_element_budget():
    size = batch_demo.cap_batch(10**6, 4, 32_000)
    assert size.B * 5 * 32_000 <= limits.MAX_BATCH_ELEMENTS and size.V == 32_000
    rows = min(limits.MAX_BATCH_ELEMENTS // (5 * 32_000), limits.MAX_BATCH_ROWS)  # the caps, whatever they are
    assert size.B == rows and size.notes and f"B capped at {rows:,}" in size.notes[0]
    assert batch_demo.cap_batch(10**9, 0, 1).B == min(limits.MAX_BATCH_ROWS, limits.MAX_BATCH_ELEMENTS)
    huge_v = batch_demo.cap_batch(4, 4, 10**9)
    assert huge_v.V * 5 <= limits.MAX_BATCH_ELEMENTS and huge_v.B == 1 and len(huge_v.notes) == 2
    assert batch_demo.cap_batch(16, 4, 32) == (16, 32, [])


@pytest.mark.parametrize("source", batch_demo.RANDOM_SOURCES)  # the model's rows: tests/test_models_batch.py
def test_make_batch_is_a_valid_ragged_batch(source):
    B, K, V = 37, 5, 111
    j = batch_demo.draft_counts("random 0..K", B, K, seed=3)
    b = batch_demo.make_batch(B, K, V, j, source, 0.3, seed=3)
    assert b.target_probs.shape == (B, K + 1, V) and b.draft_probs.shape == (B, K, V)
    assert b.target_probs.dtype == np.float32
    np.testing.assert_allclose(b.target_probs.sum(-1), 1, atol=1e-5)
    valid = np.arange(K)[None, :] < j[:, None]
    assert np.all(b.draft_tokens[~valid] == -1)
    rows, cols = np.nonzero(valid)
    assert np.all(b.draft_probs[rows, cols, b.draft_tokens[valid]] > 0)  # every draft could have been drawn
    again = batch_demo.make_batch(B, K, V, j, source, 0.3, seed=3)
    np.testing.assert_array_equal(again.draft_tokens, b.draft_tokens)


def test_backends_agree_and_are_timed():
    j = batch_demo.draft_counts("random 0..K", 20, 4, seed=0)
    b = batch_demo.make_batch(20, 4, 50, j, "peaked", 1.0, seed=0)
    timings = batch_demo.time_backends(b, ["NumPy", "PyTorch CPU"], budget_s=0.01, max_repeats=3)
    assert [t.backend for t in timings] == ["NumPy", "PyTorch CPU"]
    assert all(t.agrees and t.seconds > 0 and t.rows_per_second > 0 for t in timings)
    report = batch_demo.run_batch_demo(20, 4, 50, j, "peaked", 1.0, 0, "PyTorch CPU", [], max_rows=8)
    assert report.head.tokens.shape == (8, 5) and report.num_accepted.shape == (20,)
    np.testing.assert_array_equal(report.num_draft, j)


def test_run_backend_names_an_unknown_backend():
    b = batch_demo.make_batch(2, 1, 3, np.array([1, 0]), "peaked", 1.0, seed=0)
    with pytest.raises(InputError, match="backend: expected one of NumPy, PyTorch CPU, PyTorch CUDA, got 'TPU'"):
        batch_demo.run_backend(b, "TPU")


def test_k_zero_has_no_acceptance_rate_and_every_rate_is_defined():
    rep = batch_demo.run_batch_demo(6, 0, 5, np.zeros(6, dtype=np.int64), "peaked", 1.0, 0, "NumPy", [])
    assert rep.tested == 0 and rep.accepted == 0
    assert batch_demo.rate_text(rep.accepted, rep.tested) == "—"
    assert np.all(rep.num_tokens == 1)  # each row emits its bonus
    assert batch_demo.rate_text(7, 10) == "0.700" and batch_demo.rate_text(0, 3, 2) == "0.00"


def test_every_backend_keeps_its_rows_and_torch_reports_its_threads():
    import torch

    j = batch_demo.draft_counts("random 0..K", 30, 4, seed=5)
    both = ["NumPy", "PyTorch CPU"]
    rep = batch_demo.run_batch_demo(30, 4, 9, j, "random Dirichlet", 0.5, 5, "NumPy", both, max_rows=8)
    assert set(rep.heads) == {"NumPy", "PyTorch CPU"}
    for head in rep.heads.values():
        np.testing.assert_array_equal(head.tokens, rep.head.tokens)  # same uniforms, same tokens
        assert head.tokens.shape == (8, 5)
    threads = {t.backend: t.threads for t in rep.timings}
    assert threads == {"NumPy": None, "PyTorch CPU": torch.get_num_threads()}
    assert rep.tested == int(np.minimum(rep.num_accepted + 1, j).sum()) > 0
    assert rep.acceptance_rate == rep.accepted / rep.tested


def test_loops_note_says_which_code_ran(monkeypatch):
    from specviz import verify
    from specviz.verifiers import _fused

    pytest.importorskip("numba")
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(300), (8, 2))
    q = rng.dirichlet(np.ones(300), (8, 1))
    x = rng.integers(0, 300, (8, 1))
    n = np.ones(8, dtype=np.int64)
    calls = []
    real = _fused.block_sums
    monkeypatch.setattr(_fused, "block_sums", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setenv(_fused.BACKEND_ENV, "auto")
    assert "ran compiled (Numba" in batch_demo.loops_note()
    verify(p, q, x, n, rng=np.random.default_rng(1))
    assert calls  # what the note says ran, ran
    monkeypatch.setenv(_fused.BACKEND_ENV, "numpy")
    calls.clear()
    assert "NumPy's code only (SPECVIZ_BACKEND=numpy)" in batch_demo.loops_note()
    verify(p, q, x, n, rng=np.random.default_rng(1))
    assert not calls
    monkeypatch.setenv(_fused.BACKEND_ENV, "auto")
    monkeypatch.setattr(_fused, "_kernels", False)  # Numba missing
    assert "Numba is not installed" in batch_demo.loops_note()


def test_loops_note_says_why_the_compiled_loops_did_not_run(monkeypatch):
    from specviz.verifiers import _fused

    monkeypatch.delenv(_fused.BACKEND_ENV, raising=False)
    monkeypatch.setattr(_fused, "_kernels", False)
    trouble = "specviz: the compiled loop accept could not be loaded or compiled: EOFError: Ran out of input."
    monkeypatch.setattr(_fused, "_note", trouble)  # what _fused._call warned
    note = batch_demo.loops_note()
    assert note == "On the CPU the verifier ran NumPy's code only: " + trouble.removeprefix("specviz: ")
    assert "Numba is not installed" not in note


def test_without_torch_only_numpy_is_offered_and_the_reason_says_how_to_add_it(monkeypatch):
    monkeypatch.setattr(batch_demo, "torch_installed", lambda: False)
    assert batch_demo.available_backends(cuda_ok=True) == ["NumPy"]
    ok, reason = batch_demo.cuda_status()
    assert not ok and reason == batch_demo.TORCH_MISSING and 'pip install ".[torch]"' in reason
    monkeypatch.undo()
    if batch_demo.torch_installed():
        assert batch_demo.available_backends(cuda_ok=False) == ["NumPy", "PyTorch CPU"]
        assert batch_demo.available_backends(cuda_ok=True) == list(batch_demo.BACKENDS)


def test_the_timing_table_and_caption_follow_each_backend():
    pytest.importorskip("torch")
    j = batch_demo.draft_counts("random 0..K", 12, 3, seed=1)
    rep = batch_demo.run_batch_demo(12, 3, 7, j, "peaked", 1.0, 1, "NumPy", ["NumPy", "PyTorch CPU"], max_rows=4)
    rows = batch_demo.timing_rows(rep)
    assert [r["backend"] for r in rows] == ["NumPy", "PyTorch CPU"] and all(r["agrees"] == "yes" for r in rows)
    assert rows[0]["torch threads"] == "" and rows[1]["torch threads"] == str(rep.timings[1].threads)
    caption = batch_demo.timing_caption(rep)
    assert f"PyTorch CPU ran with torch.get_num_threads() = {rep.timings[1].threads}" in caption
    assert "NumPy ran with" not in caption and "zero-copy" in caption
    numpy_only = batch_demo.run_batch_demo(12, 3, 7, j, "peaked", 1.0, 1, "NumPy", ["NumPy"], max_rows=4)
    assert "torch.get_num_threads" not in batch_demo.timing_caption(numpy_only)  # no torch backend, no torch line
