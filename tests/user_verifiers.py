"""Stand-ins for a user's own verifiers, loaded by `prove --verifier tests.user_verifiers:NAME`."""

from __future__ import annotations

import numpy as np

from specviz import verify
from specviz.bugs import BUGS


def correct(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None):
    return verify(target_probs, draft_probs, draft_tokens, num_draft, rng=rng, uniforms=uniforms)


def broken(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None):
    """Resamples from p after a rejection: the classic mistake."""
    return BUGS["resample_from_p"].verifier(
        target_probs, draft_probs, draft_tokens, num_draft, rng=rng, uniforms=uniforms
    )


def crashes(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None):
    raise RuntimeError("out of cheese")


def wrong_shape(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None):
    res = verify(target_probs, draft_probs, draft_tokens, num_draft, rng=rng, uniforms=uniforms)
    return res._replace(tokens=np.asarray(res.tokens)[:, :1])
