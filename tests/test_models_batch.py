"""The real model's rows in a ragged batch (the Batch page) and in ``prove --model`` (issue 28, points 4 and 6).

Skipped, with the command that installs it, where the model is absent; the Batch page's
fallback without the model is tested everywhere (the model made to look absent).
"""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from specviz import Settings, Uniforms, models, process_logits, verify
from specviz.app import batch_demo, batch_model
from specviz.models.batch import prompt_contexts, ragged_rows
from specviz.proof import model_rows
from specviz.proof.handover import CallSpec
from specviz.proof.ship import prove_shipped, run_cli
from specviz.verifiers import reference
from tests import user_verifiers as uv
from tests.apptest import open_page

pytestmark = pytest.mark.heavy  # runs the real model: left out of the quick subset

MISSING = models.missing()
needs_model = pytest.mark.skipif(MISSING is not None, reason=f"the real model is not installed: {MISSING}")
REQUEST = Settings(temperature=1.0, top_p=0.95)


@pytest.fixture(scope="module")
def model() -> models.SmolLM2:
    return models.load()


@pytest.fixture(scope="module")
def ragged(model):
    """Five prompts, five draft counts (one row with none), drafted by the first 8 layers."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    drafter = models.EarlyExit(model.llama, 8, REQUEST)
    contexts = prompt_contexts(model.encode, 5)
    return ragged_rows(model.llama, contexts, [drafter] * 5, [4, 0, 2, 3, 1], REQUEST, np.random.default_rng(7))


# --- a real ragged batch ---------------------------------------------------------------------------------


@needs_model
def test_ragged_rows_are_one_round_per_row(model, ragged):
    B, K1, V = ragged.target_probs.shape
    assert (B, K1, V) == (5, 5, model.llama.config.vocab_size)
    assert ragged.num_draft.tolist() == [4, 0, 2, 3, 1]
    assert len({tuple(c) for c in ragged.contexts}) == 5  # five different prompts
    assert (ragged.draft_tokens[1] == -1).all() and (ragged.draft_tokens[2, 2:] == -1).all()
    # Row 2's target rows are the model's after its context + its drafts, computed afresh without the cache.
    seq = ragged.contexts[2] + ragged.draft_tokens[2, :2].tolist()
    for i in range(3):
        fresh = model.llama.last_logits([seq[: len(seq) - 2 + i]]).numpy()  # (1, V)
        assert np.allclose(ragged.target_probs[2, i], process_logits(fresh, REQUEST)[0], atol=1e-5)
    # Each draft has positive q (it was drawn from it); q has zeros (top-p) and sums to 1.
    for b, k in enumerate(ragged.num_draft):
        for i in range(k):
            assert ragged.draft_probs[b, i, ragged.draft_tokens[b, i]] > 0
    assert np.allclose(ragged.draft_probs.sum(-1), 1) and (ragged.draft_probs[0] == 0).any()


@needs_model
def test_numpy_and_torch_agree_token_for_token_on_the_real_batch(ragged):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    for _ in range(20):  # 20 draws of the uniforms: acceptances, rejections and bonuses on every row
        u = Uniforms(rng.random((5, 4)), rng.random(5))
        args = (ragged.target_probs, ragged.draft_probs, ragged.draft_tokens, ragged.num_draft)
        a = verify(*args, uniforms=u)
        t = verify(*(torch.from_numpy(x) for x in args), uniforms=Uniforms(*(torch.from_numpy(x) for x in u)))
        r = reference.verify(*args, uniforms=u)
        assert np.array_equal(a.tokens, t.tokens.numpy()) and np.array_equal(a.num_tokens, t.num_tokens.numpy())
        assert np.array_equal(a.tokens, np.asarray(r.tokens))  # and the reference's
        assert (a.num_tokens[1] == 1) and (a.num_accepted <= ragged.num_draft).all()  # the row with no draft: bonus


@needs_model
def test_the_batch_demo_runs_the_real_rows_and_shows_them_as_text():
    num_draft = np.array([3, 1, 0])
    report = batch_demo.run_batch_demo(3, 3, 0, num_draft, batch_model.SOURCE, 1.0, 5, "NumPy",
                                       ["NumPy", "PyTorch CPU"], drafter="early")  # fmt: skip
    assert [x.agrees for x in report.timings] == [True, True]
    assert len(report.texts) == 3 and report.texts[2]["accepted"] == "0 of 0"
    assert all(row["PyTorch CPU = NumPy"] == "yes" for row in report.texts)
    assert report.texts[0]["prompt"].startswith("A hash table")
    # A link to the page with the model's rows restores the run, with the text table.
    at = open_page("app_pages/batch.py", {"B": "3", "K": "3", "source": batch_model.SOURCE, "drafter": "lookup"})
    assert not at.exception, at.exception
    assert not at.warning  # the model is installed: no install note
    assert any("SmolLM2-135M" in c.value for c in at.caption)
    assert len(at.dataframe) == 2  # the rows as text, the timings


def test_without_the_model_the_batch_page_keeps_its_random_rows_and_says_how_to_install(monkeypatch):
    monkeypatch.setattr(batch_model, "missing", lambda: "The real model is not installed here: pip install x")
    at = open_page("app_pages/batch.py", {"B": "3", "K": "3", "source": batch_model.SOURCE})
    assert not at.exception, at.exception
    assert "pip install x" in at.warning[0].value and at.button(key="batch.run").disabled
    at.radio(key="batch.source").set_value("random Dirichlet").run()
    assert not at.warning and not at.button(key="batch.run").disabled
    at.button(key="batch.run").click().run()
    assert len(at.dataframe) == 1  # the timings: no text table for random rows


# --- prove --model -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pool():
    if MISSING is not None:
        pytest.skip(f"the real model is not installed: {MISSING}")
    pytest.importorskip("torch").set_num_threads(1)
    return model_rows.ModelSource(2, contexts=2, seed=0)


@needs_model
def test_the_pool_holds_the_models_rows_and_tables_are_drawn_from_it(pool):
    assert pool.V == 49152 and pool.batch.target_probs.shape[0] == 8  # 2 prompts x 4 drafters
    t = pool(2, 16, seed=3, dtype="float32")
    assert t.target.shape == (16, 3, 49152) and t.num_draft[0] == 0 and t.num_draft[-1] == 2
    assert np.array_equal(t.target, t.target.astype(np.float32).astype(np.float64))  # float32 values exactly
    rows = {r.tobytes() for r in pool.batch.target_probs[:, 0].astype(np.float32)}
    assert all(r.astype(np.float32).tobytes() in rows for r in t.target[:, 0])  # every row one of the model's


@needs_model
def test_prove_on_model_rows_passes_the_engine_and_fails_resample_from_p(pool):
    spec = CallSpec("float32", "numpy")
    good = prove_shipped(verify, V=pool.V, K=2, spec=spec, tv=0.02, source=pool)
    assert good.verdict == "PASS", good.lines()
    assert good.paired.mismatches == 0 and "SmolLM2" in good.paired.rows_from and "rows of the model" in good.reason
    bad = prove_shipped(uv.broken, V=pool.V, K=2, spec=spec, tv=0.02, source=pool)
    assert bad.verdict == "FAIL", bad.lines()
    assert bad.paired.mismatches > 0 and any(s.part == "replacement" and not s.passed for s in bad.sweep.steps)


def _args(**kw):
    base = dict(verifier=None, replay=None, vocab=None, model="smollm2", drafts=2, dtype="float32", backend="numpy",
                device="cpu", layout="padded", tv=0.02, seed=0, reproducers=None, threads=None, n=1000,
                quiet=True)  # fmt: skip
    return argparse.Namespace(**{**base, **kw})


def test_prove_model_says_what_is_wrong_without_running(monkeypatch, capsys):
    assert run_cli(_args(model="gpt9"), lambda s: verify) == 2
    assert "--model" in capsys.readouterr().err
    monkeypatch.setattr(models, "missing", lambda: "gguf not installed; install it with: pip install gguf")
    assert run_cli(_args(), lambda s: verify) == 2
    assert "pip install gguf" in capsys.readouterr().err
