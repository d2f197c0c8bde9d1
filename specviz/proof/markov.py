"""Context-dependent target and drafter: Markov chains over V tokens with a start state.

# V vocabulary, L sequence length

A chain is the smallest model whose next-token distribution changes with context, which is
what makes an end-to-end test meaningful: p and q differ at every position, and a verifier
that mixes up positions or contexts produces the wrong *joint* law even when every single
position looks right.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np

from ..errors import InputError, digits

START = -1  # the context before the first token
# Up to this many tokens, an inverse-CDF draw compares one column at a time: NumPy pays ~30 ns
# per row for an (A, V) comparison broadcast against (A, 1) and for a reduction over a short last
# axis, so at V = 4 the column loop measured 5x faster (16,384 draws: 91 vs 499 us), even at V = 32.
COLUMN_LOOP_V = 32
GUIDE = 1024  # buckets of u in an inverse-CDF guide table: a draw needs a count in < V/1024 of cases
DrafterMode = Literal["sample", "argmax", "argmax_reports_softmax"]  # Drafter.mode: see Drafter


class MarkovChain(NamedTuple):
    """``table`` (V+1, V): row 0 is the start distribution, row t+1 follows token t."""

    table: np.ndarray

    @property
    def V(self) -> int:
        return int(self.table.shape[1])

    def probs(self, prev: np.ndarray | int) -> np.ndarray:
        """Next-token distributions after ``prev`` (any shape, START for none): (..., V)."""
        return self.table[np.asarray(prev) + 1]

    def joint_law(self, L: int) -> np.ndarray:
        """Exact law of the first L tokens: shape (V,) * L, a product of transitions."""
        law = self.table[0].copy()  # (V,)
        for _ in range(L - 1):
            law = law[..., :, None] * self.table[1:]  # (..., V) -> (..., V, V): x_prev, x_next
        return law

    def inverse_cdf(self) -> InverseCDF:
        """Running sums of every row, computed once, for drawing many tokens by inverse CDF."""
        return inverse_cdf(self.table)


class InverseCDF(NamedTuple):
    """Inverse-CDF tables of R probability rows (a chain's R = V+1 rows), built once.

    A row's token for uniform u is the first index whose running sum exceeds ``u * total``,
    never past the last token with mass: exactly :func:`specviz.proof.simulate.sample_rows`, whose
    running sums are the same row-wise ``np.cumsum`` and so bit-identical. Storing +inf from
    the last token with mass on turns that cap into the comparison itself (:meth:`count_thresholds`):
    token v wins on u in [cdf[v-1] / total, cdf[v] / total), an interval of length p(v) up to
    the last bit, and a token of probability 0 wins on an empty interval.

    :meth:`draw` first looks the token up in a guide table (Chen and Asau's method): u's bucket
    k = floor(u * GUIDE) is exact (GUIDE is a power of 2), and the count is non-decreasing in u
    (u * total rounds monotonically), so where the count is the same at the bucket's first and
    last double it is that value on the whole bucket. Only the few buckets that hold a
    threshold (at most V - 1 of the GUIDE per row) are marked -1 and counted.
    """

    thresholds: np.ndarray  # (R, V) running sums; +inf from the last token with mass on
    totals: np.ndarray  # (R,) each row's running sum at its last token
    guide: np.ndarray  # (R * GUIDE,) the token of every u in bucket k of row r at r * GUIDE + k, or -1

    def draw(self, rows: np.ndarray, u: np.ndarray) -> np.ndarray:
        """One token per draw: row indices rows (A,) into the table, uniforms u (A,) in [0, 1) -> (A,) int64."""
        tok = self.guide.take(rows * GUIDE + (u * GUIDE).astype(np.int64))  # (A,)
        unsure = np.flatnonzero(tok < 0)
        if unsure.size:
            tok[unsure] = self.count_thresholds(rows[unsure], u[unsure])
        return tok

    # Not named count: a NamedTuple method of that name would shadow tuple.count(value).
    def count_thresholds(self, rows: np.ndarray, u: np.ndarray) -> np.ndarray:
        """The definition: how many thresholds of each row are <= u * total. (A,) int64."""
        x = u * self.totals.take(rows)  # (A,)
        V = self.thresholds.shape[1]
        if V <= COLUMN_LOOP_V:
            tok = np.zeros(x.shape, dtype=np.int64)
            for v in range(V - 1):  # column V-1 is +inf in every row
                tok += self.thresholds[:, v].take(rows) <= x
            return tok
        return np.count_nonzero(self.thresholds.take(rows, axis=0) <= x[:, None], axis=1).astype(np.int64)


def inverse_cdf(table: np.ndarray) -> InverseCDF:
    """:class:`InverseCDF` of probability rows (R, V), each with some positive mass."""
    t = np.asarray(table, dtype=np.float64)
    cdf = np.cumsum(t, axis=1)  # (R, V) row by row, in order: the sums sample_rows computes
    R, V = t.shape
    last = V - 1 - np.argmax(t[:, ::-1] > 0, axis=1)  # (R,) last token with mass
    thresholds = np.where(np.arange(V)[None, :] < last[:, None], cdf, np.inf)
    unguided = InverseCDF(thresholds, cdf[:, -1].copy(), np.empty(0, dtype=np.int64))
    k = np.arange(GUIDE)
    rows = np.repeat(np.arange(R), GUIDE)  # (R * GUIDE,)
    first = unguided.count_thresholds(rows, np.tile(k / GUIDE, R))  # each bucket's first double
    final = unguided.count_thresholds(rows, np.tile(np.nextafter((k + 1) / GUIDE, 0), R))  # and its last
    return unguided._replace(guide=np.where(first == final, first, -1))


def make_chain(table: np.ndarray, name: str = "table") -> MarkovChain:
    """Validate a (V+1, V) table of probability rows and wrap it."""
    t = np.asarray(table, dtype=np.float64)
    if t.ndim != 2 or t.shape[0] != t.shape[1] + 1 or t.shape[1] < 1:
        raise InputError(name, "shape (V+1, V): a start row and one row per token", f"shape {t.shape}")
    if not np.isfinite(t).all() or (t < 0).any():
        raise InputError(name, "finite non-negative probabilities", "NaN, infinite or negative entries")
    sums = t.sum(1)
    if np.abs(sums - 1).max() > 1e-9:
        raise InputError(
            name, "rows summing to 1 (tolerance 1e-9)", f"a row summing to {digits(sums[np.abs(sums - 1).argmax()])}"
        )
    return MarkovChain(t)


def random_chain(
    V: int, rng: np.random.Generator, *, concentration: float = 1.0, zero_fraction: float = 0.0
) -> MarkovChain:
    """A random chain: Dirichlet(concentration) rows, optionally with zeros in each support.

    ``zero_fraction`` of each row's entries (rounded down, never all) are set to exactly 0
    and the row renormalized, so tests meet tokens the target or the drafter cannot produce.
    """
    if V < 1:
        raise InputError("V", "at least 1 token", str(V))
    if not 0 <= zero_fraction < 1:
        raise InputError("zero_fraction", "a fraction in [0, 1)", str(zero_fraction))
    table = rng.dirichlet(np.full(V, concentration), size=V + 1)  # (V+1, V)
    n_zero = min(int(zero_fraction * V), V - 1)
    if n_zero:
        for row in table:  # V+1 rows of a small test chain
            row[rng.choice(V, size=n_zero, replace=False)] = 0.0
        table /= table.sum(1, keepdims=True)
    return MarkovChain(table)


@dataclass(frozen=True)
class Drafter:
    """How draft tokens are proposed from a chain, and what q the verifier is told.

    ``mode``:
    - ``"sample"``: draw x from the chain's row and report that row as q (the usual case);
    - ``"argmax"``: take the row's argmax and report no q (a deterministic drafter, verified
      with ``draft_probs=None``; lossless whatever the proposal rule);
    - ``"argmax_reports_softmax"``: take the argmax but report the full row as q, the
      pipeline mistake in :mod:`specviz.proof.bugs`.
    """

    chain: MarkovChain
    mode: DrafterMode = "sample"

    @property
    def reports_q(self) -> bool:
        return self.mode != "argmax"

    @property
    def samples(self) -> bool:
        return self.mode == "sample"
