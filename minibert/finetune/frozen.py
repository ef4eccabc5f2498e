"""The feature-based approach (paper §5.3, Table 7): BERT frozen, a small classifier on its vectors.

Instead of fine-tuning every weight, run the pretrained encoder once per batch with dropout off,
take the hidden states of chosen layers for every token, combine them, and train only a linear
classifier on top:

    hidden states   L + 1 arrays (B, T, C): the embeddings' output and each layer's
    combine         "last" (B, T, C) | "second_to_last" | "embeddings" | "sum4" (sum of the last
                    four) | "concat4" (the last four side by side, (B, T, 4C): the paper's best)
                    | "concat_all" (every hidden state, (B, T, (L+1)C): for models under 3 layers)
    tagger          "linear": dropout -> linear (D, K)
                    "bilstm": BiLSTM (D -> 2 x C/2, finetune/bilstm.py) -> dropout -> linear (C, K)
    loss            softmax cross-entropy, -100 skipped

The paper put a randomly initialised two-layer BiLSTM on the features (`tagger="bilstm"` is one
layer of it); the linear tagger keeps the comparison about the features alone, but sees each
token's vector by itself, so it cannot use the context the encoder did not put there.
`FrozenFeatureTagger` has the interface the fine-tuning loop needs (params, loss_grads_metrics,
save_pretrained, read_params), so `python -m minibert finetune wnut17 --frozen concat4
[--frozen-tagger bilstm]` trains it with the same recipe, logging and resume as fine-tuning.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from minibert.finetune.bilstm import bilstm_backward, bilstm_forward, bilstm_params
from minibert.finetune.heads import classifier_backward, classifier_forward
from minibert.finetune.models import step_metrics
from minibert.io.tensorfile import load_tensors, save_tensors_atomic
from minibert.model import train_rng, truncated_normal

COMBINE = ("last", "second_to_last", "embeddings", "sum4", "concat4", "concat_all")
TAGGERS = ("linear", "bilstm")
HEAD_FILE = "frozen_head.safetensors"


def combine_layers(states: list, how: str) -> np.ndarray:
    """L + 1 hidden states (B, T, C) -> the token features (B, T, D)."""
    if how == "last":
        return states[-1]  # (B, T, C)
    if how == "second_to_last":
        return states[-2]
    if how == "embeddings":
        return states[0]
    if how == "sum4":
        return np.sum(states[-4:], axis=0)  # (B, T, C)
    if how == "concat4":
        return np.concatenate(states[-4:][::-1], axis=-1)  # (B, T, 4C): last layer first
    if how == "concat_all":
        return np.concatenate(states[::-1], axis=-1)  # (B, T, (L+1)C)
    raise ValueError(f"unknown combination {how!r}; choose one of {COMBINE}")


class FrozenFeatureTagger:
    """A token classifier on frozen encoder features. Only `params` (the head) is trained."""

    architecture = "FrozenFeatureTagger"
    head_shape = "token"

    def __init__(self, encoder, combine: str, num_labels: int, seed: int = 0, id2label=None, tagger: str = "linear"):
        """`encoder`: a loaded BertForTokenClassification (or any task model) whose encoder
        weights are used and never changed."""
        if combine not in COMBINE:
            raise ValueError(f"unknown combination {combine!r}; choose one of {COMBINE}")
        if tagger not in TAGGERS:
            raise ValueError(f"unknown tagger {tagger!r}; choose one of {TAGGERS}")
        if combine in ("sum4", "concat4") and encoder.config.num_hidden_layers + 1 < 4:
            raise ValueError(f"{combine} needs 4 hidden states; the model has {encoder.config.num_hidden_layers + 1}")
        self.encoder, self.combine, self.tagger, self.config = encoder, combine, tagger, encoder.config
        self.dtype, self.vocab_path, self.do_lower_case = encoder.dtype, encoder.vocab_path, encoder.do_lower_case
        C = encoder.config.hidden_size
        D = {"concat4": 4 * C, "concat_all": (encoder.config.num_hidden_layers + 1) * C}.get(combine, C)
        rng = np.random.default_rng([seed, 1])
        self.params = {}
        if tagger == "bilstm":  # D -> C/2 each way -> C
            H = max(1, C // 2)
            self.params.update(bilstm_params(rng, D, H, "lstm", self.dtype))
            D = 2 * H
        self.params.update({"cls.w": truncated_normal(rng, (D, num_labels), 0.02).astype(self.dtype),
                            "cls.b": np.zeros(num_labels, self.dtype)})
        self.id2label = id2label or {i: f"LABEL_{i}" for i in range(num_labels)}

    @property
    def ops(self):
        return self.encoder.ops

    @property
    def num_parameters(self) -> int:
        return sum(p.size for p in self.params.values())

    def features(self, input_ids, token_type_ids=None, attention_mask=None) -> np.ndarray:
        # the encoder's own hidden_states: BERT's layers, ALBERT's shared block, ELECTRA's projection
        return combine_layers(self.encoder.hidden_states(input_ids, token_type_ids, attention_mask), self.combine)

    def logits_and_cache(self, input_ids, token_type_ids, attention_mask, rng=None):
        x = self.features(input_ids, token_type_ids, attention_mask)  # (B, T, D)
        lstm = None
        if self.tagger == "bilstm":
            mask = np.ones(x.shape[:2]) if attention_mask is None else np.asarray(attention_mask)
            x, lstm = bilstm_forward(x, mask, self.params, "lstm")  # (B, T, C)
        B, T, D = x.shape
        logits, cache = classifier_forward(x.reshape(B * T, D), self.params["cls.w"], self.params["cls.b"],
                                           self.config.hidden_dropout_prob, rng, self.ops)  # (B*T, K)
        return logits.reshape(B, T, -1), (cache, lstm)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        return self.logits_and_cache(input_ids, token_type_ids, attention_mask)[0]  # (B, T, K)

    eval_logits = forward

    def loss_grads_metrics(self, batch, train=False, rng=None, compute_grads=True):
        """-> (loss, grads of the head, {name: (sum, count)}), as the task models (models.step_metrics)."""
        ops = self.ops
        logits, cache = self.logits_and_cache(batch["input_ids"], batch.get("segment_ids"), batch.get("input_mask"),
                                              train_rng(train, rng))
        loss, c_ce = ops.cross_entropy_forward(logits, np.asarray(batch["labels"], np.int64))
        if not compute_grads:
            return float(loss), None, step_metrics(float(loss), logits, batch)
        dlogits = ops.cross_entropy_backward(1.0, c_ce)  # (B, T, K)
        head, lstm = cache
        dx, dw, db = classifier_backward(dlogits.reshape(-1, dlogits.shape[-1]), head, ops)  # dx (B*T, D)
        grads = {"cls.w": dw, "cls.b": db}
        if lstm is not None:  # back through the BiLSTM to its six tensors (the features are frozen)
            grads.update(bilstm_backward(dx.reshape(*logits.shape[:2], -1), lstm)[1])
        return float(loss), {k: grads[k] for k in self.params}, step_metrics(float(loss), logits, batch)

    def save_pretrained(self, directory, vocab=None) -> Path:
        """The head only (the encoder is the --init model, unchanged)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        save_tensors_atomic(self.params, directory / HEAD_FILE, {"combine": self.combine, "tagger": self.tagger})
        return directory

    def read_params(self, directory) -> dict:
        tensors, _ = load_tensors(Path(directory) / HEAD_FILE)
        return tensors
