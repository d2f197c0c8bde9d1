"""Supplying the random numbers a verifier draws for itself, while it runs.

# B rows, K drafts (padded width), V vocabulary

Most shipped verifiers take no ``uniforms=``: they call ``torch.rand`` for their coins and
``torch.multinomial`` or an exponential race for the replacement, or draw from a NumPy
generator. The probes (:mod:`specviz.proof.probes`) need chosen coins (exactly 0, just below
1, u = p/q), so :func:`supplying` replaces, for the length of one call, every random source
it knows with one that returns the values of a :class:`Supply`, and puts the originals back on
exit (an exception included):

- torch: ``torch.rand``, ``torch.rand_like``, ``Tensor.uniform_``, ``Tensor.exponential_``
  (E = -log(1 - u)), ``torch.multinomial`` and ``Tensor.multinomial`` (with replacement or
  one sample: an inverse CDF in index order over the row's weights, one uniform per sample);
- NumPy: ``np.random.default_rng`` (it returns a :class:`SuppliedGenerator`), the legacy
  ``np.random.random`` / ``random_sample`` / ``rand`` / ``uniform`` / ``exponential`` /
  ``standard_exponential``, and a :class:`SuppliedGenerator` handed to the verifier as ``rng``.

A supplied uniform is floored to the grid of the dtype asked for (2^-53 float64, 2^-24
float32, 2^-11 float16, 2^-8 bfloat16), so "just below 1" is the largest value that dtype's
generator can return, and every value is one it could return. Each draw is recorded
(:class:`Draw`: source, kind, shape, dtype, the role it was given). Draws it cannot see (a
``from torch import rand`` taken at import time, ``torch.randn``, ``Generator.integers``, a
private generator's other methods) are noticed where a generator's state moved
(torch's and NumPy's global ones, and the generator handed as ``rng``) and reported in
:attr:`Record.foreign`.

Which draw gets which value (:class:`FromUniforms`): a draw with as many values as the coins
(B*K padded, N flat) gets the coins, in row-major order; one with B values gets the row's
replacement/bonus uniform (when the counts coincide, K = 1: the first such draw is the coins,
the next the sample); a draw whose last axis is V (a race over the vocabulary) gets, per row,
values drawn from a generator seeded by that row's sample uniform (a row's tokens still depend
only on its own uniforms), with the row's uniform itself at a chosen column when a probe asks
(:attr:`FromUniforms.focus`). Any other draw (scalars drawn one row at a time, a second set of
coins) is "unmatched": it gets seeded uniforms and the probe says interception could not apply.
The paired test qualifies where every draw is matched *and* the draws mean what the
reference's uniforms mean (docs/proof.md, "Verifiers that draw their own randomness").
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

GRID_BITS = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}  # a uniform of that dtype is k * 2^-bits
# How often a coin of exactly 0 comes out of a generator of that dtype (bfloat16: measured, torch.rand on CPU).
ZERO_RATE = {"float64": "2^-53", "float32": "2^-24", "float16": "2^-11", "bfloat16": "about 2^-9 (1.96e-3 measured)"}


class Draw(NamedTuple):
    """One random draw the verifier asked for, and the role its values were given."""

    source: str  # "torch.rand", "Tensor.exponential_", "Generator.random", ...
    kind: str  # "uniform" | "exponential" | "categorical"
    shape: tuple[int, ...]
    dtype: str
    role: str  # "coins" | "sample" | "vocab" | "unmatched" | "empty"

    def describe(self) -> str:
        return f"{self.source} {self.shape} {self.dtype} as {self.role}"


@dataclass
class Record:
    """What one :func:`supplying` block saw."""

    draws: list[Draw] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)  # random sources that moved without asking us

    @property
    def unmatched(self) -> list[Draw]:
        return [d for d in self.draws if d.role == "unmatched"]


class FromUniforms:
    """The supply of one call: coins ``accept`` (B, K) or (N,), replacement/bonus ``sample`` (B,).

    ``vocab``: V, to recognise a race over the vocabulary; ``focus``: (B,) a column per row
    that gets the row's ``sample`` uniform in such a race (the far-tail probe), or None.
    """

    def __init__(self, accept: np.ndarray, sample: np.ndarray, vocab: int | None = None,
                 focus: np.ndarray | None = None) -> None:  # fmt: skip
        self.accept, self.sample = np.asarray(accept, np.float64), np.asarray(sample, np.float64).reshape(-1)
        self.vocab, self.focus = vocab, focus
        self.taken: set[str] = set()
        self._spare = np.random.default_rng(0x5EED)

    def __call__(self, shape: tuple[int, ...]) -> tuple[np.ndarray, str]:
        n = int(np.prod(shape, dtype=np.int64))
        B = self.sample.size
        if n == 0:
            return np.zeros(shape), "empty"
        if self.vocab and len(shape) >= 1 and shape[-1] == self.vocab and n // self.vocab == B and B:
            return self._race(shape), "vocab"
        if n == self.accept.size and "coins" not in self.taken:
            self.taken.add("coins")
            return self.accept.reshape(shape), "coins"
        if n == B and "sample" not in self.taken:
            self.taken.add("sample")
            return self.sample.reshape(shape), "sample"
        return self._spare.random(shape), "unmatched"

    def _race(self, shape: tuple[int, ...]) -> np.ndarray:
        """(B, V) uniforms, row b a function of the row's own sample uniform (batch invariance holds)."""
        V, B = self.vocab or 1, self.sample.size
        seed = self.sample.view(np.uint64)[:, None]  # (B, 1) the row's uniform, bit for bit
        out = _unit(_mix(seed ^ _mix(np.arange(1, V + 1, dtype=np.uint64)[None, :])))  # (B, V)
        if self.focus is not None:  # the first rows (a probe may add rows of its own after them)
            n = min(B, len(self.focus))
            out[np.arange(n), self.focus[:n].astype(np.int64)] = self.sample[:n]
        return out.reshape(shape)


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's step on uint64 (wrapping arithmetic)."""
    z = z.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _unit(z: np.ndarray) -> np.ndarray:
    """The top 53 bits of uint64 as uniforms in [0, 1)."""
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53


Supply = Callable[[tuple[int, ...]], tuple[np.ndarray, str]]


def on_grid(u: np.ndarray, dtype: str) -> np.ndarray:
    """Uniforms floored to the grid of ``dtype``'s generator, within [0, 1 - 2^-bits]."""
    step = 2.0 ** -GRID_BITS.get(dtype, 53)
    return np.clip(np.floor(np.asarray(u, np.float64) / step) * step, 0.0, 1.0 - step)


class _Active:
    """The supply and record of the block now running (one at a time: verifiers are called in sequence)."""

    supply: Supply | None = None
    record: Record | None = None


def _take(source: str, kind: str, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """float64 uniforms on ``dtype``'s grid for one draw, recorded (the caller transforms them)."""
    assert _Active.supply is not None and _Active.record is not None
    values, role = _Active.supply(tuple(int(s) for s in shape))
    _Active.record.draws.append(Draw(source, kind, tuple(int(s) for s in shape), dtype, role))
    return on_grid(values, dtype)


def _exponential(u: np.ndarray) -> np.ndarray:
    return -np.log1p(-u)  # u = 0 gives E = 0: the smallest exponential, as the coin 0 is the smallest uniform


def _inverse_cdf(w: np.ndarray, u: np.ndarray) -> np.ndarray:
    """(R,) token per row of weights w (R, V) in index order at uniform u (R,), never a zero weight."""
    c = np.cumsum(np.maximum(w, 0.0), axis=-1)  # (R, V)
    idx = np.array([np.searchsorted(c[r], u[r] * c[r, -1], side="right") for r in range(len(u))], dtype=np.int64)
    return np.minimum(idx, w.shape[-1] - 1)


class SuppliedGenerator(np.random.Generator):
    """A NumPy generator whose ``random``/``uniform``/``exponential`` draws come from the active supply.

    Outside a :func:`supplying` block it draws as a PCG64 generator seeded with ``seed``."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(np.random.PCG64(seed))

    def random(self, size: Any = None, dtype: Any = np.float64, out: Any = None) -> Any:
        if _Active.supply is None or out is not None:
            return super().random(size, dtype, out)
        name = np.dtype(dtype).name
        u = _take("Generator.random", "uniform", _shape(size), name)
        return u.astype(name) if size is not None else float(u)

    def uniform(self, low: Any = 0.0, high: Any = 1.0, size: Any = None) -> Any:
        if _Active.supply is None or not (isinstance(low, (int, float)) and isinstance(high, (int, float))):
            return super().uniform(low, high, size)
        lo, hi = float(low), float(high)
        u = lo + (hi - lo) * _take("Generator.uniform", "uniform", _shape(size), "float64")
        return u if size is not None else float(u)

    def standard_exponential(self, size: Any = None, dtype: Any = np.float64, method: str = "zig",
                             out: Any = None) -> Any:  # fmt: skip
        if _Active.supply is None or out is not None:
            return super().standard_exponential(size, dtype, method, out)  # type: ignore[call-overload]
        name = np.dtype(dtype).name
        e = _exponential(_take("Generator.standard_exponential", "exponential", _shape(size), name))
        return e.astype(name) if size is not None else float(e)

    def exponential(self, scale: Any = 1.0, size: Any = None) -> Any:
        if _Active.supply is None or not np.isscalar(scale):
            return super().exponential(scale, size)
        e = scale * _exponential(_take("Generator.exponential", "exponential", _shape(size), "float64"))
        return e if size is not None else float(e)


def _shape(size: Any) -> tuple[int, ...]:
    if size is None:
        return ()
    return tuple(int(s) for s in size) if isinstance(size, (tuple, list)) else (int(size),)


def _torch_patches(torch: Any) -> list[tuple[Any, str, Any]]:
    """(owner, attribute, replacement) for each torch source."""
    Tensor = torch.Tensor
    o_rand, o_mult = torch.rand, torch.multinomial

    def name(dt: Any) -> str:
        return str(dt).replace("torch.", "")

    def tensor(u: np.ndarray, dtype: Any, device: Any) -> Any:
        return torch.from_numpy(np.ascontiguousarray(u)).to(dtype=dtype, device=device)

    def rand(*size: Any, generator: Any = None, out: Any = None, dtype: Any = None, device: Any = None,
             requires_grad: bool = False, **kw: Any) -> Any:  # fmt: skip
        if out is not None:
            return o_rand(*size, generator=generator, out=out, dtype=dtype, device=device, **kw)
        shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)) else size
        dtype = dtype or torch.get_default_dtype()
        t = tensor(_take("torch.rand", "uniform", tuple(shape), name(dtype)), dtype, device)
        return t.requires_grad_(requires_grad)

    def rand_like(x: Any, *, dtype: Any = None, device: Any = None, **kw: Any) -> Any:
        dtype, device = dtype or x.dtype, device or x.device
        return tensor(_take("torch.rand_like", "uniform", tuple(x.shape), name(dtype)), dtype, device)

    def uniform_(self: Any, a: float = 0.0, b: float = 1.0, *, generator: Any = None, **kw: Any) -> Any:
        u = _take("Tensor.uniform_", "uniform", tuple(self.shape), name(self.dtype))
        with torch.no_grad():
            return self.copy_(tensor(a + (b - a) * u, self.dtype, self.device))

    def exponential_(self: Any, lambd: float = 1.0, *, generator: Any = None, **kw: Any) -> Any:
        e = _exponential(_take("Tensor.exponential_", "exponential", tuple(self.shape), name(self.dtype))) / lambd
        with torch.no_grad():
            return self.copy_(tensor(e, self.dtype, self.device))

    def multinomial(x: Any, num_samples: int, replacement: bool = False, *, generator: Any = None,
                    out: Any = None) -> Any:  # fmt: skip
        if out is not None or (num_samples > 1 and not replacement):  # without replacement: not one uniform per sample
            if _Active.record is not None:
                _Active.record.foreign.append("torch.multinomial without replacement: drawn by torch, not supplied")
            return o_mult(x, num_samples, replacement, generator=generator, out=out)
        w = x.detach().double().cpu().numpy().reshape(-1, x.shape[-1])  # (R, V)
        R = w.shape[0]
        u = _take("torch.multinomial", "categorical", (R, num_samples) if x.dim() > 1 else (num_samples,),
                  "float64").reshape(R, num_samples)  # fmt: skip
        tok = np.stack([_inverse_cdf(w, u[:, s]) for s in range(num_samples)], axis=1)  # (R, num_samples)
        return torch.from_numpy(tok.reshape(*x.shape[:-1], num_samples)).to(x.device)

    return [(torch, "rand", rand), (torch, "rand_like", rand_like), (Tensor, "uniform_", uniform_),
            (Tensor, "exponential_", exponential_), (torch, "multinomial", multinomial),
            (Tensor, "multinomial", multinomial)]  # fmt: skip


def _numpy_patches() -> list[tuple[Any, str, Any]]:
    legacy = np.random

    def random(size: Any = None) -> Any:
        u = _take("np.random.random", "uniform", _shape(size), "float64")
        return u if size is not None else float(u)

    def rand(*size: int) -> Any:
        u = _take("np.random.rand", "uniform", tuple(size), "float64")
        return u if size else float(u)

    def uniform(low: float = 0.0, high: float = 1.0, size: Any = None) -> Any:
        u = low + (high - low) * _take("np.random.uniform", "uniform", _shape(size), "float64")
        return u if size is not None else float(u)

    def standard_exponential(size: Any = None) -> Any:
        e = _exponential(_take("np.random.standard_exponential", "exponential", _shape(size), "float64"))
        return e if size is not None else float(e)

    def exponential(scale: float = 1.0, size: Any = None) -> Any:
        e = scale * _exponential(_take("np.random.exponential", "exponential", _shape(size), "float64"))
        return e if size is not None else float(e)

    def default_rng(seed: Any = None) -> SuppliedGenerator:
        return SuppliedGenerator()

    return [(legacy, "random", random), (legacy, "random_sample", random), (legacy, "rand", rand),
            (legacy, "uniform", uniform), (legacy, "standard_exponential", standard_exponential),
            (legacy, "exponential", exponential), (legacy, "default_rng", default_rng)]  # fmt: skip


_MISSING = object()


@contextlib.contextmanager
def supplying(supply: Supply, generators: tuple[Any, ...] = ()) -> Iterator[Record]:
    """Within the block, the random sources listed in the module docstring return ``supply``'s values.

    ``generators``: generators handed to the verifier (a :class:`SuppliedGenerator`, a
    ``torch.Generator``) whose state is watched for draws that did not come through here.
    Yields the :class:`Record`; everything patched is restored on exit, an exception included.
    """
    if _Active.supply is not None:
        raise RuntimeError("supplying() blocks do not nest")
    torch = _torch()
    patches = _numpy_patches() + (_torch_patches(torch) if torch is not None else [])
    before = _states(torch, generators)
    saved = [(owner, attr, owner.__dict__.get(attr, _MISSING)) for owner, attr, _ in patches]
    record = Record()
    _Active.supply, _Active.record = supply, record
    try:
        for owner, attr, fn in patches:
            setattr(owner, attr, fn)
        yield record
    finally:
        for owner, attr, old in saved:
            if old is _MISSING:
                delattr(owner, attr)  # inherited (Tensor.uniform_ lives on its C base): uncover it
            else:
                setattr(owner, attr, old)
        _Active.supply, _Active.record = None, None
        record.foreign += _moved(before, _states(torch, generators))


def _torch() -> Any:
    """torch when it is installed, imported now: a verifier that imports it on its first call is covered too."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def _states(torch: Any, generators: tuple[Any, ...]) -> dict[str, Any]:
    legacy: Any = np.random.get_state()  # noqa: NPY002 - (name, keys, pos, ...): the keys move with each draw
    out: dict[str, Any] = {"NumPy's global generator": legacy[1].copy()}
    if torch is not None:
        out["torch's global generator"] = torch.get_rng_state().clone()
    for i, g in enumerate(generators):
        if isinstance(g, np.random.Generator):
            out[f"the rng handed in ({i})"] = repr(g.bit_generator.state)
        elif torch is not None and isinstance(g, torch.Generator):
            out[f"the torch.Generator handed in ({i})"] = g.get_state().clone()
    return out


def _moved(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    out = []
    for k, a in before.items():
        b = after[k]
        same = a == b if isinstance(a, str) else bool((np.asarray(a) == np.asarray(b)).all())
        if not same:
            out.append(f"{k} advanced: draws not recognised")
    return out


# ---------------------------------------------------------------------------------------------
# A verifier without uniforms=, called as if it took them.


def _params(fn: Callable[..., Any]) -> tuple[set[str], bool]:
    try:
        ps = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return set(), False
    return set(ps), any(p.kind is inspect.Parameter.VAR_KEYWORD for p in ps.values())


def takes_uniforms(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` names a ``uniforms`` parameter (a ``**kwargs`` alone does not count)."""
    return "uniforms" in _params(fn)[0]


class Supplied:
    """``verifier`` (which draws its own randomness) called as ``f(*args, uniforms=(accept, sample))``.

    Each call runs inside :func:`supplying` with :class:`FromUniforms`; ``rng=`` (a
    :class:`SuppliedGenerator` or a ``torch.Generator``) is passed when the verifier names it.
    :attr:`draws` and :attr:`problems` collect what the calls since :meth:`reset` saw.
    ``focus``: see :class:`FromUniforms` (set by a probe around its calls).
    """

    def __init__(self, verifier: Callable[..., Any]) -> None:
        self.verifier = verifier
        names, _ = _params(verifier)
        self.rng_name = "rng" if "rng" in names else "generator" if "generator" in names else None
        self.focus: np.ndarray | None = None
        self.draws: list[Draw] = []
        self.problems: list[str] = []
        self.__name__ = getattr(verifier, "__name__", "verifier")

    def reset(self) -> None:
        self.draws, self.problems = [], []

    def __call__(self, *args: Any, uniforms: Any, **kw: Any) -> Any:
        from .handover import as_numpy

        ua, us = (as_numpy(u) for u in uniforms)
        V = int(args[0].shape[-1])
        gens: tuple[Any, ...] = ()
        if self.rng_name:
            gens = (_generator_for(args[0]),)
            kw = {**kw, self.rng_name: gens[0]}
        with supplying(FromUniforms(ua, us, V, self.focus), gens) as rec:
            res = self.verifier(*args, **kw)
        self.draws += rec.draws
        self.problems += [f"{d.source} {d.shape} not matched to the coins or the sample" for d in rec.unmatched]
        self.problems += rec.foreign
        return res

    def roles(self) -> set[str]:
        return {d.role for d in self.draws}

    def seen(self) -> str:
        """The distinct draws seen, in order: 'torch.rand (4, 1) float32 as coins; ...'."""
        out: list[str] = []
        for d in self.draws:
            if d.describe() not in out:
                out.append(d.describe())
        return "; ".join(out[:4]) + (f"; and {len(out) - 4} more" if len(out) > 4 else "")


def _generator_for(table: Any) -> Any:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(table, torch.Tensor):
        return torch.Generator(device=table.device).manual_seed(0)
    return SuppliedGenerator()


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """torch's and NumPy's global generators seeded with ``seed``, their states put back after."""
    torch = sys.modules.get("torch")
    np_state = np.random.get_state()  # noqa: NPY002 - the legacy global generator is what is seeded
    t_state = torch.get_rng_state() if torch is not None else None
    np.random.seed(seed)  # noqa: NPY002
    if torch is not None:
        torch.manual_seed(seed)
    try:
        yield
    finally:
        np.random.set_state(np_state)  # noqa: NPY002
        if torch is not None:
            torch.set_rng_state(t_state)


def ignores_uniforms(verifier: Callable[..., Any], call: Any, B: int, K: int) -> str | None:
    """Why ``verifier`` does not follow the ``uniforms=`` it is given, or None when it does.

    ``call``: a :class:`~specviz.proof.handover.Call`. The same call runs twice with the same
    uniforms under different generator states (torch's and NumPy's global generators, and a
    fresh ``rng`` when the verifier names one); a verifier that reads its uniforms returns the
    same tokens both times.
    """
    from .handover import outcome

    names, _ = _params(verifier)
    got = []
    for seed in (1, 2):
        kw: dict[str, Any] = {}
        if "rng" in names:
            kw["rng"] = _seeded_generator(call.args[0], seed)
        with _seeded(seed):
            got.append(outcome(verifier(*call.args, uniforms=call.uniforms, **kw), B, K)[0])
    rows = np.flatnonzero((got[0] != got[1]).any(axis=1))
    if rows.size == 0:
        return None
    return (f"the same uniforms under two generator states gave different tokens in rows {rows[:6].tolist()} "
            f"of {B}: it accepts uniforms= but draws its own randomness")  # fmt: skip


def _seeded_generator(table: Any, seed: int) -> Any:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(table, torch.Tensor):
        return torch.Generator(device=table.device).manual_seed(seed)
    return np.random.default_rng(seed)


__all__ = ["Draw", "Record", "FromUniforms", "SuppliedGenerator", "Supplied", "supplying", "on_grid",
           "takes_uniforms", "ignores_uniforms", "GRID_BITS", "ZERO_RATE"]  # fmt: skip
