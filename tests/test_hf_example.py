"""examples/hf_pair.py: the wrapper that turns a causal LM's forward pass into a specviz.app.text.Model.

The model-independent part runs on stand-ins built from the character n-gram models of
specviz.app.text, wrapped as if they were causal LMs (a forward pass over padded id tensors that
returns logits at every position, wider than the vocabulary). Wrapped, they must give the
same logits, the same rounds and the same sequences as the n-grams called directly. The
real-model part needs transformers and local weights; it skips, saying why, without them.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from specviz import InputError
from specviz.app.text import ALPHABET, decode, encode, generate, tokens_per_call, trained_pair
from specviz.verifiers.processing import Settings

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "hf_pair.py"
V = len(ALPHABET)
EXTRA = 3  # columns past V in the stand-in's logits, as in LMs whose vocabulary is padded for speed

spec = importlib.util.spec_from_file_location("hf_pair", SCRIPT)
hf_pair = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hf_pair)


class StandIn:
    """A causal 'LM' over character ids: logits (R, T, V + EXTRA) at every position from an n-gram.

    ``causal=False`` makes every position read the whole padded row instead (a model that looks
    ahead): the negative control for the wrapper's reading of prefixes and padded rows.
    """

    def __init__(self, ngram, causal: bool = True) -> None:
        self.ngram, self.causal, self.rows_run = ngram, causal, []

    def __call__(self, ids, mask):
        R, T = ids.shape
        self.rows_run.append(R)
        rows = ids.tolist()
        hist = [row[: t + 1] if self.causal else row for row in rows for t in range(T)]
        logits = self.ngram(hist).reshape(R, T, V)  # (R, T, V)
        junk = np.full((R, T, EXTRA), 50.0)  # would win every draw if the wrapper did not cut to V
        return torch.from_numpy(np.concatenate([logits, junk], axis=2))


@pytest.fixture(scope="module")
def pair():
    return trained_pair()


def wrapped(ngram, causal: bool = True):
    fwd = StandIn(ngram, causal)
    return hf_pair.causal_lm_model(fwd, V), fwd


def test_wrapper_gives_each_history_its_own_logits(pair):
    rng = np.random.default_rng(3)
    model, fwd = wrapped(pair.target)
    base = encode("The quick brown fox").tolist()
    prefixes = [base[:n] for n in (19, 12, 19, 1, 7)]  # prefixes of one row: read from one pass
    ragged = [rng.integers(0, V, size=n).tolist() for n in (1, 9, 4, 30, 2)]  # not prefixes: right-padded
    for hist, rows in ((prefixes, 1), (ragged, 5)):
        got = model(hist)
        assert got.shape == (len(hist), V) and got.dtype == np.float64
        np.testing.assert_array_equal(got, pair.target(hist))
        assert fwd.rows_run[-1] == rows


def test_negative_control_a_model_that_looks_ahead_is_read_wrongly(pair):
    # The wrapper relies on causality; a forward pass that sees the padding or the longer prefix
    # must make the comparison above fail, or that test could not catch a wrong read.
    model, _ = wrapped(pair.target, causal=False)
    base = encode("The quick brown fox").tolist()
    for hist in ([base[:n] for n in (19, 12, 1)], [base[:3], [5, 6, 7, 8, 9, 10]]):
        assert not np.allclose(model(hist), pair.target(hist))


def test_rounds_through_the_wrapper_equal_the_direct_ones(pair):
    target, t_fwd = wrapped(pair.target)
    drafter, d_fwd = wrapped(pair.drafter)
    prompt = encode("The ").tolist()
    kw = dict(K=3, tokens=60, settings=Settings(temperature=0.8, top_k=40), seed=5, V=V)
    got = hf_pair.run(target, drafter, prompt, **kw)
    want = hf_pair.run(pair.target, pair.drafter, prompt, **kw)
    # Every field of every round: drafts, p, q, coins (NaN where not reached), accepted, emitted, bonus.
    np.testing.assert_equal([tuple(s) for s in got], [tuple(s) for s in want])
    assert sum(len(s.emitted) for s in got) >= 60
    assert 0 < sum(s.accepted for s in got) < 3 * len(got)  # both acceptances and rejections occurred
    assert t_fwd.rows_run == [1] * len(got)  # one target pass of one row per round verifies K + 1 positions
    assert d_fwd.rows_run == [1] * (3 * len(got))
    lines = hf_pair.report(got, decode)
    assert len(lines) == len(got) + 1
    measured, expected = tokens_per_call(got)
    assert lines[-1].endswith(f"{measured:.3f} tokens per call (exact expectation for the drafts met: {expected:.3f})")
    assert f"accepted {got[0].accepted}/3" in lines[0]


def test_batched_generation_through_the_wrapper_equals_the_direct_one(pair):
    # generate() asks for n rows of K + 1 histories at once: right-padded rows, not one prefix chain.
    target, t_fwd = wrapped(pair.target)
    drafter, _ = wrapped(pair.drafter)
    prompt = encode("def ").tolist()
    kw = dict(n=16, L=8, K=3, settings=Settings(temperature=1.0))
    got = generate(target, drafter, prompt, rng=np.random.default_rng(11), **kw)
    want = generate(pair.target, pair.drafter, prompt, rng=np.random.default_rng(11), **kw)
    np.testing.assert_array_equal(got, want)
    assert max(t_fwd.rows_run) > 1


def test_bad_input_names_the_argument(pair):
    model, _ = wrapped(pair.target)
    with pytest.raises(InputError, match="histories: expected non-empty"):
        model([[1, 2], []])
    with pytest.raises(InputError, match="prompt: expected at least one token"):
        hf_pair.run(model, model, [], K=2, tokens=5, settings=Settings(), seed=0, V=V)
    short = hf_pair.causal_lm_model(lambda ids, mask: torch.zeros(ids.shape[0], ids.shape[1], V - 1), V)
    with pytest.raises(InputError, match=r"forward: expected logits of shape \(R, T, >= V\)"):
        short([[1, 2, 3]])
    with pytest.raises(InputError, match="V: expected a vocabulary"):
        hf_pair.causal_lm_model(lambda ids, mask: None, 1)


class FakeTransformers:
    """A stand-in ``transformers`` module: a character tokenizer and n-gram 'LMs' under two names.

    ``from_pretrained`` insists on ``local_files_only=True`` and raises OSError, as transformers
    does, for a name it does not hold; ``other-tokenizer`` has a different vocabulary.
    """

    def __init__(self, pair) -> None:
        self.pair, self.loaded = pair, []
        fake = self

        class Tok:
            pad_token_id = None

            def __init__(self, chars: str) -> None:
                self.chars = chars

            def get_vocab(self):
                return {c: i for i, c in enumerate(self.chars)}

            def __len__(self) -> int:
                return len(self.chars)

            def __call__(self, text: str):
                return type("Enc", (), {"input_ids": encode(text).tolist()})()

            def decode(self, ids) -> str:
                return decode(ids)

        class LM:
            def __init__(self, ngram) -> None:
                self.fwd = StandIn(ngram)

            def to(self, device):
                return self

            def eval(self):
                return self

            def __call__(self, input_ids, attention_mask):
                return type("Out", (), {"logits": self.fwd(input_ids, attention_mask)})()

        def check(name: str, local_files_only: bool = False) -> None:
            assert local_files_only is True, "from_pretrained called without local_files_only=True"
            if name not in ("target", "drafter", "other-tokenizer"):
                raise OSError(f"We couldn't connect to 'https://huggingface.co' to load {name}\nmore")
            fake.loaded.append(name)

        class AutoTokenizer:
            @staticmethod
            def from_pretrained(name, local_files_only=False):
                check(name, local_files_only)
                return Tok(ALPHABET[::-1] if name == "other-tokenizer" else ALPHABET)

        class AutoModelForCausalLM:
            @staticmethod
            def from_pretrained(name, local_files_only=False):
                check(name, local_files_only)
                return LM(fake.pair.drafter if name == "drafter" else fake.pair.target)

        self.AutoTokenizer, self.AutoModelForCausalLM = AutoTokenizer, AutoModelForCausalLM


def test_main_with_a_stand_in_transformers(pair, monkeypatch, capsys):
    fake = FakeTransformers(pair)
    monkeypatch.setitem(sys.modules, "transformers", fake)
    assert hf_pair.main(["missing-model", "drafter"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("skipped: 'missing-model' is not in the local Hugging Face cache and specviz never downloads")
    assert hf_pair.main(["target", "other-tokenizer"]) == 2
    assert "models: expected two models with the same tokenizer" in capsys.readouterr().err
    assert hf_pair.main(["target", "drafter", "--prompt", "The ", "--tokens", "20", "--K", "2", "--seed", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"target target, drafter drafter, V = {V}, K = 2, prompt 'The '"
    steps = hf_pair.run(pair.target, pair.drafter, encode("The ").tolist(), K=2, tokens=20, settings=Settings(),
                        seed=4, V=V)  # fmt: skip
    assert lines[1:-1] == hf_pair.report(steps, decode)  # the same rounds as the n-grams called directly
    assert lines[-1] == "text: " + repr("The " + decode([t for s in steps for t in s.emitted]))


def _run_script(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=600)


def test_script_skips_cleanly_without_transformers():
    if importlib.util.find_spec("transformers") is not None:
        pytest.skip("transformers is installed here: the real-model test below runs instead")
    out = _run_script()
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("skipped: transformers is not installed"), out.stdout


def test_script_on_local_models():
    pytest.importorskip("transformers", reason="transformers is not installed (never installed by specviz)")
    names = [os.environ.get("SPECVIZ_HF_TARGET", "gpt2-medium"), os.environ.get("SPECVIZ_HF_DRAFTER", "gpt2")]
    out = _run_script(*names, "--tokens", "12", "--K", "3")
    assert out.returncode == 0, out.stderr
    if out.stdout.startswith("skipped:"):
        pytest.skip(out.stdout.strip())
    assert "tokens per call" in out.stdout and "round   1: drafts" in out.stdout, out.stdout
