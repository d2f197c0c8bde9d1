"""The verifier registry: every verifier the package ships, with what the proof tools need to know.

# B rows, K drafts, V vocabulary, N tree nodes

Each :class:`Entry` says, once, what the rest of the package used to guess:

- ``name``: the function's name, and ``title``: the label of its row in the exact court;
- ``kind``: "chain" (one draft sequence per row), "block" (block verification, judged against
  its own tokens per step) or "tree" (several candidates per node): what ``prove --kind`` holds
  it to;
- ``signature``: "verify" (``target_probs, draft_probs, draft_tokens, num_draft``, the
  signature and result of :func:`specviz.verify`) or "tree" (``target_probs, draft_probs,
  node_tokens, parents, num_nodes``, :func:`specviz.verifiers.tree.verify_tree`'s);
- ``lossless``: what it claims; the exact court checks the claim (tests/test_registry.py);
- ``reference``: ``module:function`` of the plain rule its tokens must equal on the same
  uniforms (:mod:`specviz.verifiers.reference`), or "" for a rule with none;
- ``own``: the kind's own verifier: ``prove --kind`` runs it when no ``--verifier`` is given,
  and its mistakes are the kind's negative controls (:func:`specviz.proof.controls.kind_controls`).

Who reads it: ``prove --kind`` (:func:`own_verifier`, :func:`signature_of`), the exact court
(:data:`specviz.proof.court.RULES` is :func:`court_rules`), ``specviz list`` and the Verifiers
page. Adding a verifier is one module in :mod:`specviz.verifiers` and one entry in
:data:`VERIFIERS` (docs/design.md shows it on a worked example).

A function outside the registry (``prove --verifier mine:fn``) declares its signature with an
attribute ``fn.signature = "tree"``; without one, :func:`signature_of` falls back to reading
its parameters (a third or later positional parameter called ``parents``: "tree").
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..verifiers.block import verify_block, verify_block_lossy
from ..verifiers.lossy import verify_lenient, verify_ratio_threshold, verify_typical
from ..verifiers.sample_match import verify_sample_match
from ..verifiers.tree import verify_tree, verify_tree_chain
from ..verifiers.verify import Verification, verify
from .bugs import Bug
from .controls import KINDS, kind_controls

SIGNATURES = ("verify", "tree")


class Entry(NamedTuple):
    """One verifier of the package (see the module docstring for each field)."""

    name: str
    title: str
    kind: str  # one of KINDS
    signature: str  # one of SIGNATURES
    lossless: bool
    function: Callable[..., Any]
    reference: str  # "module:function", or "" when the rule has no reference
    own: bool  # the kind's own verifier (prove --kind runs it; its mistakes are the kind's controls)
    summary: str

    @property
    def mistakes(self) -> dict[str, Bug]:
        """The kind's classic mistakes when this is the kind's own verifier; none otherwise."""
        return kind_controls(self.kind) if self.own else {}


def resolve(spec: str) -> Callable[..., Any] | None:
    """``module:function`` -> the function, or None when the module or the name is missing."""
    mod, _, fn = spec.partition(":")
    try:
        return getattr(importlib.import_module(mod), fn, None)
    except ImportError:
        return None


_REF = "specviz.verifiers.reference"

VERIFIERS: dict[str, Entry] = {
    e.name: e
    for e in [
        Entry("verify", "chain", "chain", "verify", True, verify, f"{_REF}:verify", True,
              "Speculative sampling: accept x while u q(x) < p(x), then the residual or the bonus."),
        Entry("verify_block", "block", "block", "verify", True, verify_block, f"{_REF}:verify_block", True,
              "Block verification (Sun et al.): the block of drafts judged jointly, more tokens per step."),
        Entry("verify_tree", "tree", "tree", "tree", True, verify_tree, f"{_REF}:verify_tree", True,
              "Tree verification: candidates tried in order, the residual after each rejected one."),
        Entry("verify_tree_chain", "tree (chain-shaped)", "tree", "verify", True, verify_tree_chain, f"{_REF}:verify",
              False, "Tree verification on chain-shaped trees, with verify's signature: the chain rule."),
        Entry("verify_sample_match", "sample-and-match", "chain", "verify", True, verify_sample_match, "", False,
              "Draw a token from p with a uniform of its own at each position, keep drafts while they match it, emit "
              "the drawn token at the first mismatch; q is never read."),
        Entry("verify_block_lossy", "block, lossy last threshold", "block", "verify", False, verify_block_lossy, "",
              False, "Block verification with min(1, prod p/q) as the last threshold: lossy, for comparison."),
        Entry("verify_typical", "typical acceptance (Medusa)", "chain", "verify", False, verify_typical, "", False,
              "Medusa's typical acceptance: lossy, for comparison."),
        Entry("verify_lenient", "lenient acceptance (theta = 3/4)", "chain", "verify", False, verify_lenient, "",
              False, "Acceptance with a lenient threshold: lossy, for comparison."),
        Entry("verify_ratio_threshold", "ratio threshold (p/q >= 1/2)", "chain", "verify", False,
              verify_ratio_threshold, "", False, "Accept when p/q clears a fixed threshold: lossy, for comparison."),
    ]
}  # fmt: skip


def check(entries: dict[str, Entry] = VERIFIERS) -> None:
    """Every entry well formed: a known kind and signature, one own verifier per kind."""
    for e in entries.values():
        if e.kind not in KINDS:
            raise InputError(f"VERIFIERS[{e.name!r}].kind", "one of " + ", ".join(KINDS), repr(e.kind))
        if e.signature not in SIGNATURES:
            raise InputError(f"VERIFIERS[{e.name!r}].signature", "one of " + ", ".join(SIGNATURES), repr(e.signature))
    for k in KINDS:
        own = [e.name for e in entries.values() if e.kind == k and e.own]
        if len(own) != 1:
            raise InputError("VERIFIERS", f"exactly one own verifier of kind {k!r}", f"{own}")


check()
_BUILT_IN = frozenset(VERIFIERS)


def table() -> list[dict[str, Any]]:
    """Rows for display (the Verifiers page, ``specviz list``): one per entry, what it declares."""
    return [
        {
            "verifier": e.name,
            "court row": e.title if e.signature == "verify" else "(judged on trees)",
            "kind": e.kind,
            "signature": e.signature,
            "claims": "lossless" if e.lossless else "LOSSY",
            "reference": e.reference.partition(":")[2] if e.reference else "none",
            "mistakes": ", ".join(e.mistakes) if e.own else "",
            "what it is": e.summary,
        }
        for e in VERIFIERS.values()
    ]


def get(name: str) -> Entry:
    """The entry called ``name``; an InputError listing the names otherwise."""
    try:
        return VERIFIERS[name]
    except KeyError:
        raise InputError("verifier", "one of " + ", ".join(VERIFIERS), repr(name)) from None


def own_verifier(kind: str) -> Entry:
    """The kind's own verifier: what ``prove --kind`` runs without ``--verifier``."""
    if kind not in KINDS:
        raise InputError("kind", "one of " + ", ".join(KINDS), repr(kind))
    return next(e for e in VERIFIERS.values() if e.kind == kind and e.own)


def court_rules() -> dict[str, Callable[..., Any]]:
    """The rules the exact court judges by name: every entry with verify's signature, by title.

    The same dict object for the life of the process (:data:`specviz.proof.court.RULES` is it),
    kept up to date by :func:`register`."""
    _COURT_RULES.clear()
    _COURT_RULES.update({e.title: e.function for e in VERIFIERS.values() if e.signature == "verify"})
    return _COURT_RULES


_COURT_RULES: dict[str, Callable[..., Any]] = {}


def register(entry: Entry) -> Entry:
    """Add ``entry`` to :data:`VERIFIERS` at run time (a verifier outside the package, or the
    worked example of docs/design.md); a verifier of the package is a line in :data:`VERIFIERS`.
    Refuses a name or a court title already taken, and a malformed entry."""
    if entry.name in VERIFIERS:
        raise InputError("entry", "a verifier name not yet registered", repr(entry.name))
    if any(e.title == entry.title for e in VERIFIERS.values()):
        raise InputError("entry", "a court title not yet registered", repr(entry.title))
    if not callable(entry.function):
        raise InputError("entry", "a callable function", type(entry.function).__name__)
    trial = {**VERIFIERS, entry.name: entry}
    check(trial)
    VERIFIERS[entry.name] = entry
    court_rules()
    return entry


def unregister(name: str) -> None:
    """Remove an entry added by :func:`register` (the package's own entries stay)."""
    if name in _BUILT_IN:
        raise InputError("name", "a verifier added by register()", f"{name!r}, one of the package's own")
    VERIFIERS.pop(name, None)
    court_rules()


def entry_of(fn: Callable[..., Any]) -> Entry | None:
    """The registry entry whose function is ``fn``, if any."""
    return next((e for e in VERIFIERS.values() if e.function is fn), None)


def signature_of(fn: Callable[..., Any], kind: str | None = None) -> str:
    """The signature ``fn`` takes: "verify" or "tree".

    Declared, in this order: the registry entry of ``fn``; ``fn.signature``; a mistake of a kind
    (``kind`` given, ``fn`` one of its controls) takes the kind's own verifier's. Only a function
    that declares nothing has its parameters read (:func:`sniff_signature`).
    """
    e = entry_of(fn)
    if e is not None:
        return e.signature
    declared = getattr(fn, "signature", None)
    if isinstance(declared, str):
        if declared not in SIGNATURES:
            raise InputError("verifier", "a signature attribute, one of " + ", ".join(SIGNATURES), repr(declared))
        return declared
    if kind is not None and any(b.verifier is fn for b in kind_controls(kind).values()):
        return own_verifier(kind).signature
    return sniff_signature(fn)


def sniff_signature(fn: Callable[..., Any]) -> str:
    """"tree" when ``fn``'s parameters include ``parents`` among the first five, "verify" otherwise."""
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return "verify"
    return "tree" if "parents" in params[:5] else "verify"


def as_chain(tree_fn: Callable[..., Any]) -> Callable[..., Any]:
    """A verifier with verify_tree's signature as one with verify's: each row is the chain-shaped
    tree (-1, 0, .., K-1) holding its drafts, as :func:`specviz.verifiers.tree.verify_tree_chain` lays it out."""

    def chain(target_probs: Any, draft_probs: Any, draft_tokens: Any, num_draft: Any, *, rng: Any = None,
              uniforms: Any = None) -> Any:  # fmt: skip
        T, x, j = np.asarray(target_probs), np.asarray(draft_tokens), np.asarray(num_draft).astype(np.int64)
        B, K = x.shape
        V = T.shape[2]
        D = None
        if draft_probs is not None:
            D = np.zeros((B, K + 1, V))  # (B, K+1, V): the last node has no children
            D[:, :K] = draft_probs
        toks = np.zeros((B, K + 1), np.int64)
        toks[:, 1:] = np.where(np.arange(K)[None, :] < j[:, None], x, 0)
        par = np.broadcast_to(np.arange(K + 1) - 1, (B, K + 1))
        kw = {"rng": rng} if uniforms is None else {"uniforms": uniforms}
        res = tree_fn(T, D, toks, par, j + 1, **kw)
        return Verification(tokens=np.asarray(res.tokens), num_tokens=np.asarray(res.num_tokens),
                            num_accepted=np.asarray(res.num_accepted), accept_uniforms=np.asarray(res.accept_uniforms),
                            ratios=np.asarray(res.thresholds), bonus=np.asarray(res.bonus),
                            sample_uniforms=np.asarray(res.sample_uniforms))  # fmt: skip

    chain.__name__ = getattr(tree_fn, "__name__", "tree verifier")
    return chain


def as_verify_signature(fn: Callable[..., Any], kind: str | None = None) -> Callable[..., Any]:
    """``fn`` itself when it takes verify's signature, :func:`as_chain` of it when it takes the tree's."""
    return as_chain(fn) if signature_of(fn, kind) == "tree" else fn
