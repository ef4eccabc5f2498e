"""The whole training step, not only the gradients: 10 optimizer steps of minibert's
`train.training_step` (forward, backward, global-norm clipping, BERT schedule, BERT's AdamW)
against transformers' BertForPreTraining driven by a PyTorch port of the same optimizer, from
the same initial weights on the same batches, in float32. Parameters must agree to 1e-4
(tensor-relative) after every step; losses and gradient norms to 1e-4 relative. (The attention
key biases are the one exception, see `is_key_bias`.)

The PyTorch optimizer below is written from docs/bert-notes.md §6 (google-research/bert optimization.py), not
from minibert.optim: no bias correction, eps 1e-6 outside the sqrt, decoupled weight decay 0.01
on every parameter whose name has neither "LayerNorm" nor "bias", clip_norm / max(norm, clip_norm).
transformers' word embedding has padding_idx=0, which zeroes the input-side gradient of row 0;
Google's BERT has no such rule, so the test sets padding_idx to None (row 0 is [PAD], which
appears in the padded rows of the batch, so this matters).
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from minibert.bert import BertForPreTraining  # noqa: E402
from minibert.analysis.gradcheck import random_batch  # noqa: E402
from minibert.loop.step import training_step  # noqa: E402
from minibert.model import BertConfig  # noqa: E402
from minibert.optim import AdamW  # noqa: E402

STEPS, PEAK_LR, WARMUP = 10, 1e-2, 3


def bert_lr(t: int) -> float:
    """docs/bert-notes.md §6.1 written out again: warmup overrides a decay that runs from step 0."""
    if t < WARMUP:
        return PEAK_LR * t / WARMUP
    return PEAK_LR * (1.0 - min(t, STEPS) / STEPS)


class TorchBertAdam:
    """google-research/bert AdamWeightDecayOptimizer + clip_by_global_norm, in PyTorch."""

    def __init__(self, named_params, wd=0.01, b1=0.9, b2=0.999, eps=1e-6, clip=1.0):
        self.params = dict(named_params)
        self.wd, self.b1, self.b2, self.eps, self.clip = wd, b1, b2, eps, clip
        self.m = {k: torch.zeros_like(p) for k, p in self.params.items()}
        self.v = {k: torch.zeros_like(p) for k, p in self.params.items()}

    @torch.no_grad()
    def step(self, lr):
        grads = {k: p.grad for k, p in self.params.items()}
        norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads.values()))
        scale = self.clip / max(float(norm), self.clip)
        for k, p in self.params.items():
            g = grads[k] * scale
            self.m[k].mul_(self.b1).add_((1 - self.b1) * g)
            self.v[k].mul_(self.b2).add_((1 - self.b2) * g * g)
            update = self.m[k] / (torch.sqrt(self.v[k]) + self.eps)
            if not ("LayerNorm" in k or k.endswith("bias")):
                update = update + self.wd * p
            p.sub_(lr * update)
        return float(norm)


def hf_labels(batch):
    """gathered features -> transformers' (B, T) labels, -100 where nothing is predicted."""
    B, T = batch["input_ids"].shape
    labels = np.full((B, T), -100, np.int64)  # (B, T)
    for b in range(B):
        for pos, tgt, w in zip(batch["masked_lm_positions"][b], batch["masked_lm_ids"][b],
                               batch["masked_lm_weights"][b]):
            if w > 0:
                labels[b, pos] = tgt
    return torch.from_numpy(labels)


def max_rel(a, b):
    """max |a - b| / max |b|: tensor-relative, so entries near 0 do not blow it up."""
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


# Softmax ignores a shift shared by all keys, so the attention key biases have a true gradient of
# exactly 0. Both sides hold float noise there (~1e-11 at first), which Adam then amplifies
# (update ~ g / eps for |g| << eps) differently in each implementation. They are checked to stay
# noise-sized (< 1e-5 in absolute value) instead of being compared with each other.
def is_key_bias(name: str) -> bool:
    return name.endswith("attention.self.key.bias")


def test_ten_training_steps_match_transformers_float32(monkeypatch):
    monkeypatch.setenv("MINIBERT_BACKEND", "numba")
    from minibert.checkpoint import to_hf_state_dict

    config = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    ours = BertForPreTraining(config, seed=3, dtype=np.float32)  # the real init (truncated normal)
    opt = AdamW(ours.params)  # BERT defaults: no bias correction, eps 1e-6, wd 0.01, exclusions

    hcfg = transformers.BertConfig(**config.to_dict(), attn_implementation="eager")
    theirs = transformers.BertForPreTraining(hcfg).float()
    load = theirs.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in to_hf_state_dict(ours.params).items()},
                                  strict=False)
    assert set(load.missing_keys) <= {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}
    theirs.bert.embeddings.word_embeddings.padding_idx = None  # Google: row 0 gets its input gradient
    theirs.train()  # dropout is 0, so train mode == eval mode numerically
    topt = TorchBertAdam(theirs.named_parameters())

    rng = np.random.default_rng(0)
    for t in range(STEPS):
        batch = random_batch(config, B=4, T=16, P=3, rng=rng)
        assert (batch["input_ids"] == 0).any()  # [PAD] row 0 is used
        r = training_step(ours, opt, batch, t, lr=PEAK_LR, warmup_steps=WARMUP, total_steps=STEPS)

        theirs.zero_grad(set_to_none=True)
        out = theirs(input_ids=torch.from_numpy(batch["input_ids"]),
                     token_type_ids=torch.from_numpy(batch["segment_ids"]),
                     attention_mask=torch.from_numpy(batch["input_mask"]),
                     labels=hf_labels(batch),
                     next_sentence_label=torch.from_numpy(batch["next_sentence_labels"]))
        out.loss.backward()
        norm = topt.step(bert_lr(t))

        assert r.lr == pytest.approx(bert_lr(t), rel=1e-12, abs=0)
        assert r.loss == pytest.approx(float(out.loss.detach()), rel=1e-4), t
        assert r.grad_norm == pytest.approx(norm, rel=1e-4), t
        hf = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
        for k, a in to_hf_state_dict(ours.params).items():
            if is_key_bias(k):
                assert np.abs(a).max() < 1e-5 and np.abs(hf[k]).max() < 1e-5, (t, k)
            else:
                assert max_rel(a, hf[k]) < 1e-4, (t, k, max_rel(a, hf[k]))

    # the weights really moved (a no-op optimizer on both sides would pass the loop above)
    start = BertForPreTraining(config, seed=3, dtype=np.float32).params
    assert max_rel(ours.params["h0.attn.qkv.w"], start["h0.attn.qkv.w"]) > 0.05
    assert not np.array_equal(ours.params["tok_emb"][0], start["tok_emb"][0])  # [PAD] row trained too
