"""ELECTRA pretraining (Clark et al., 2020) on the training loop: `train-tiny --preset electra-tiny`.

The math is minibert/family/electra.py's (generator -> sampled replacements -> replaced-token
detection, loss = MLM + lam x RTD, electra_forward_backward). This module makes it a user of the
pretraining Trainer (train/trainer.py), through its family object, ElectraFamily:

    model       ElectraPretraining: the generator and the discriminator with shared embeddings as
                one model (params = the optimizer's one flat dict, family.electra.joint_params;
                loss_grads_metrics = the joint step), saved as two transformers directories: the
                discriminator (ElectraForPreTraining) at the top, the generator
                (ElectraForMaskedLM) in generator/
    batch source the Trainer's: the MLM data of objective "mlm" (Google's generator, dynamic
                masking, no NSP); the masks are the ones the generator fills
    evaluator   ElectraEvaluator (evaluate_electra): held-out generator MLM accuracy, loss and
                perplexity, discriminator accuracy, replaced-token recall and precision
    family      ElectraFamily: the model, the evaluator, the labels of its numbers, curves.png (the
                Trainer with family=ELECTRA_FAMILY)

The loop's dropout Generator (loop/state.LoopState.rng) also draws the generator's samples, so every step
takes it (dropout itself runs only where the config's probabilities are above 0) and a resume
restores it with the rest: a resumed run ends with the same bits. The held-out evaluation draws
its samples from a Generator seeded afresh at every evaluation, so it too is a function of the
parameters alone.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import numpy as np

from minibert.backend import get_ops
from minibert.family.electra import (SHARED, ElectraForMaskedLM, ElectraForPreTraining, ElectraMetrics, check_pair,
                                     electra_forward_backward, joint_params, tie_embeddings)
from minibert.loop.curves import Panel, Series
from minibert.loop.rundir import PUBLISHED_DIRS
from minibert.train.evaluation import fmt_perplexity

GENERATOR_DIR = PUBLISHED_DIRS[0]  # "generator": the generator's transformers directory inside a run or checkpoint


class MaskedLMOutput(NamedTuple):
    mlm_logits: np.ndarray  # (B, T, V)


class _GeneratorForFillMask:
    """The generator as inspect.fill_mask reads a model: .config and .forward(ids).mlm_logits."""

    def __init__(self, gen: ElectraForMaskedLM):
        self.gen, self.config = gen, gen.config

    def forward(self, input_ids, token_type_ids=None, attention_mask=None):
        return MaskedLMOutput(self.gen.forward(input_ids, token_type_ids, attention_mask))  # (B, T, V)


class ElectraPretraining:
    """ELECTRA's generator and discriminator, tied, as the one model the training loop trains."""

    def __init__(self, disc_config, gen_config, lam: float = 50.0, seed: int = 0, dtype=np.float32,
                 disc: ElectraForPreTraining | None = None, gen: ElectraForMaskedLM | None = None):
        check_pair(gen_config, disc_config)
        self.disc = disc if disc is not None else ElectraForPreTraining(disc_config, seed=seed, dtype=dtype)
        self.gen = gen if gen is not None else ElectraForMaskedLM(gen_config, seed=seed + 1, dtype=dtype)
        self.gen.params = tie_embeddings(self.gen.params, self.disc.params)  # one array each, two networks
        self.params = joint_params(self.gen.params, self.disc.params)  # disc names, "gen.<name>" for the rest
        self.lam = lam

    @property
    def config(self):
        """The discriminator's ElectraConfig (the model a run publishes)."""
        return self.disc.config

    @property
    def num_parameters(self) -> int:
        return sum(p.size for p in self.params.values())  # the shared tables once

    def loss_grads_metrics(self, batch, train=False, rng=None, compute_grads=True, objective=None,
                           loss_weights=None):
        """One joint step's (loss, grads keyed as self.params, ElectraMetrics) on a pretraining
        batch. `rng` draws the generator's samples (and with `train` the dropout masks): it is
        required. `objective` is accepted for the loop's call and must be "mlm" (or None)."""
        if rng is None:
            raise ValueError("ELECTRA samples the generator's replacements: loss_grads_metrics needs an rng")
        if objective not in (None, "mlm"):
            raise ValueError(f"objective={objective!r}: ELECTRA trains MLM + replaced-token detection ('mlm')")
        if loss_weights is not None:
            raise ValueError("ELECTRA takes one batch per step (no gradient accumulation)")
        return electra_forward_backward(self.gen.params, self.disc.params, self.gen.config, self.disc.config,
                                        batch, rng, self.lam, train, get_ops(), compute_grads)

    def loss_and_grads(self, batch, train=False, rng=None, objective=None, compute_grads=True):
        r = self.loss_grads_metrics(batch, train, rng, compute_grads, objective)
        return r.loss, r.grads

    def save_pretrained(self, directory, vocab=None) -> Path:
        """The discriminator in `directory` (transformers' ElectraForPreTraining) and the generator
        in directory/generator (ElectraForMaskedLM); each file written atomically."""
        directory = Path(directory)
        self.disc.save_pretrained(directory, vocab=vocab)
        self.gen.save_pretrained(directory / GENERATOR_DIR, vocab=vocab)
        return directory

    @classmethod
    def from_pretrained(cls, directory, dtype=np.float32, verify: bool = True) -> "ElectraPretraining":
        directory = Path(directory)
        disc = ElectraForPreTraining.from_pretrained(directory, dtype=dtype, verify=verify)
        if not (directory / GENERATOR_DIR).is_dir():
            raise ValueError(f"{directory} has no {GENERATOR_DIR}/ directory: an ELECTRA pretraining checkpoint "
                             f"holds the generator there")
        gen = ElectraForMaskedLM.from_pretrained(directory / GENERATOR_DIR, dtype=dtype, verify=verify)
        differ = [k for k in SHARED if not np.array_equal(gen.params[k], disc.params[k])]
        if differ:
            raise ValueError(f"{directory / GENERATOR_DIR}: {differ} differ from the discriminator's in {directory}; "
                             f"ELECTRA's two networks share them")
        return cls(disc.config, gen.config, disc=disc, gen=gen)

    def fill_mask_model(self) -> _GeneratorForFillMask:
        return _GeneratorForFillMask(self.gen)


# ---------------------------------------------------------------------------------------------
# the evaluator

class ElectraEvalResult(NamedTuple):
    mlm_acc: float  # the generator's argmax at the masked positions
    mlm_loss: float
    perplexity: float
    disc_acc: float  # the discriminator over every real token (logit > 0 = "replaced")
    rtd_loss: float
    replaced_recall: float  # replaced tokens it flagged / replaced tokens
    replaced_precision: float  # replaced tokens it flagged / tokens it flagged
    replaced_share: float  # replaced / real tokens: 1 - this is the accuracy of always answering "original"
    examples: int


def evaluate_electra(model: ElectraPretraining, feats: dict[str, np.ndarray], seed: int = 0,
                     batch_size: int = 64) -> ElectraEvalResult:
    """The held-out numbers of both networks, dropout off. The generator's samples come from a
    Generator seeded with (seed, 3) at every call: the same parameters give the same numbers."""
    rng = np.random.default_rng([seed, 3])
    N = feats["input_ids"].shape[0]
    mlm_loss_sum = rtd_loss_sum = 0.0
    counts = np.zeros(7, dtype=np.int64)  # mlm_correct, mlm_count, disc_correct, disc_count, flagged&replaced, ...
    for start in range(0, N, batch_size):
        batch = {k: v[start:start + batch_size] for k, v in feats.items()}
        m = model.loss_grads_metrics(batch, train=False, rng=rng, compute_grads=False).metrics
        mlm_loss_sum += m.mlm_loss * m.mlm_count  # the batch losses are means over predictions / real tokens
        rtd_loss_sum += m.rtd_loss * m.disc_count
        counts += np.array(m[3:], dtype=np.int64)
    mlm_correct, mlm_count, disc_correct, disc_count, hits, replaced, flagged = (int(c) for c in counts)
    mlm_loss = mlm_loss_sum / max(mlm_count, 1)
    return ElectraEvalResult(mlm_correct / max(mlm_count, 1), mlm_loss, math.exp(min(mlm_loss, 700.0)),
                             disc_correct / max(disc_count, 1), rtd_loss_sum / max(disc_count, 1),
                             hits / max(replaced, 1), hits / max(flagged, 1), replaced / max(disc_count, 1), N)


class ElectraEvaluator:
    """The Trainer's evaluator for ELECTRA (train/trainer.py's HeldoutEvaluator has the same methods)."""

    result_type = ElectraEvalResult

    def __init__(self, seed: int, heldout: dict[str, np.ndarray]):
        self.seed, self.heldout = seed, heldout

    def evaluate(self, model: ElectraPretraining) -> ElectraEvalResult:
        return evaluate_electra(model, self.heldout, seed=self.seed)

    def summary(self, r: ElectraEvalResult) -> str:
        return (f"generator MLM accuracy {r.mlm_acc:.2%}, MLM loss {r.mlm_loss:.3f} (perplexity "
                f"{fmt_perplexity(r.perplexity)}), discriminator accuracy {r.disc_acc:.2%} (always 'original' "
                f"{1 - r.replaced_share:.2%}), replaced-token recall {r.replaced_recall:.1%}, precision "
                f"{r.replaced_precision:.1%}")


# ---------------------------------------------------------------------------------------------
# ELECTRA's parts of the pretraining Trainer

class ElectraFamily:
    """ELECTRA's model, evaluator, the labels of its numbers and its curves for the pretraining
    Trainer (train/trainer.py's BertFamily has the same methods)."""

    published_dirs = f"{GENERATOR_DIR}/, "  # what the final report adds to the files it names

    def build_model(self, cfg, vocab_size: int) -> ElectraPretraining:
        return ElectraPretraining(cfg.model_config(vocab_size), cfg.generator_config(vocab_size), lam=cfg.rtd_weight,
                                  seed=cfg.seed)

    def model_note(self, cfg, model: ElectraPretraining) -> str:
        g = model.gen.config
        return (f", ELECTRA: generator hidden {g.hidden_size}, {g.num_attention_heads} head(s), intermediate "
                f"{g.intermediate_size}, embeddings {g.embedding_size} shared, RTD weight {cfg.rtd_weight:g}")

    def dropout_on(self, cfg) -> bool:
        return True  # the Trainer's rng draws the generator's samples at every step (module docstring)

    def evaluator(self, cfg, heldout: dict) -> ElectraEvaluator:
        return ElectraEvaluator(cfg.seed, heldout)

    def labels(self, cfg) -> tuple[dict, dict]:
        """The numbers the progress line and the evaluation line show, with their labels."""
        return ({"loss": "loss", "mlm_acc": "gen MLM acc", "disc_acc": "disc acc", "replaced_recall": "replaced recall"},
                {"mlm_acc": "generator MLM acc", "mlm_loss": "MLM loss", "perplexity": "perplexity",
                 "disc_acc": "discriminator acc", "replaced_recall": "replaced recall",
                 "replaced_precision": "precision", "replaced_share": "replaced share"})

    def curve_panels(self, cfg, base) -> list[Panel]:
        """The two losses, the generator's MLM accuracy, the discriminator's accuracy and
        replaced-token recall, and the lr. Dashed: always the most frequent token (MLM) and always
        "original" (discriminator, from the last evaluation's share of replaced tokens)."""
        return [Panel(f"losses (MLM + {cfg.rtd_weight:g} x RTD)",
                      (Series("mlm_loss", label="train MLM"), Series("mlm_loss", "eval", "held-out MLM"),
                       Series("rtd_loss", label="train RTD"), Series("rtd_loss", "eval", "held-out RTD"))),
                Panel("generator MLM accuracy", (Series("mlm_acc"), Series("mlm_acc", "eval")),
                      ((base.mlm_acc, f"always {base.mlm_token!r}: {base.mlm_acc:.1%}", "--"),) if base else ()),
                Panel("discriminator", (Series("disc_acc", label="train accuracy"),
                                        Series("disc_acc", "eval", "held-out accuracy"),
                                        Series("replaced_recall", label="train replaced recall"),
                                        Series("replaced_recall", "eval", "held-out replaced recall")),
                      always_original),
                Panel("learning rate", (Series("lr", label=""),))]


def always_original(records: list[dict]) -> tuple:
    """The discriminator's dashed line: the accuracy of always answering "original", from the
    last evaluation's share of replaced tokens (none before the first evaluation)."""
    evals = [r for r in records if r.get("type") == "eval" and "replaced_share" in r]
    if not evals:
        return ()
    always = 1 - evals[-1]["replaced_share"]
    return ((always, f"always 'original': {always:.1%}", "--"),)


ELECTRA_FAMILY = ElectraFamily()
