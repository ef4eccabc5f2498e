"""Every setting of a training run: TrainConfig (checked by `validate` before anything is
written), the model/batch presets, `--set key=value` parsing, and the train-tiny recipes.

The model's shape is not copied here: `TrainConfig.model` is a BertConfig (its vocab_size comes
from the vocab file when the run starts). Its fields are set like any other setting, by name:
`make_config("tiny", hidden_size=256)`, `--set num_hidden_layers=4`."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from minibert.io import outputs
from minibert.family.albert import AlbertConfig
from minibert.family.electra import ElectraConfig
from minibert.io.textio import shown_value
from minibert.loop.settings import RunSettings, check_range, check_value, names_shown
from minibert.model import MODEL_SIZES, OBJECTIVES, BertConfig
from minibert.optim import SCHEDULES
from minibert.data.pretraining_data import DEFAULT_FLAGS, check_mask_shares, check_packing

PRESETS: dict[str, dict[str, Any]] = {
    # the sizes; vocab 8192 comes from the default corpus's vocab.txt
    "tiny": dict(**MODEL_SIZES["tiny"], max_seq_length=128, batch_size=32),
    "mini": dict(**MODEL_SIZES["mini"], max_seq_length=128, batch_size=32),
}
# The BERT family at the tiny size: what each preset changes in the `tiny` preset and, for
# `train-tiny --preset NAME`, in TINY_RECIPE (these settings win over the recipe's). Why each
# value: docs/bert-notes.md §10.2 (RoBERTa), §10.1 (ALBERT).
FAMILY_PRESETS: dict[str, dict[str, Any]] = {
    # RoBERTa: no NSP; FULL-SENTENCES packing (RoBERTa's own choice for its later experiments:
    # every sequence full, so a batch always holds the same number of tokens, and no padding is
    # computed on 2 cores); dynamic masking; Adam beta2 0.98; a larger batch by accumulating 2
    # micro-batches of 32 (64 sequences per step, with the lr and warmup of the recipe's measured
    # batch-64 run, docs/recipe.md)
    "roberta-tiny": dict(objective="mlm", packing="full_sentences", masking="dynamic", beta2=0.98,
                         accumulation_steps=2, lr=1.5e-3, warmup_steps=100),
    # ALBERT: factorised embedding E = 64 < H = 128, one block shared by the layers, SOP pairs.
    # BERT's exact GELU is kept (ALBERT's default is the tanh form), so only ALBERT's three
    # changes differ from `tiny`
    "albert-tiny": dict(model_type="albert", embedding_size=64, sentence_order=True),
    # ELECTRA: a discriminator of the `tiny` size (E = H = 128: no projection) and a generator a
    # quarter as wide (generator_size), sharing the embeddings; MLM + 50 x replaced-token
    # detection on the generator's masks; no NSP (docs/bert-notes.md §10.3)
    "electra-tiny": dict(model_type="electra", objective="mlm", embedding_size=128, generator_size=0.25,
                         rtd_weight=50.0),
}
PRESETS.update({name: {**PRESETS["tiny"], **changes} for name, changes in FAMILY_PRESETS.items()})
TRAIN_TINY_PRESETS = ("tiny", *FAMILY_PRESETS)  # what `train-tiny --preset` takes
MODEL_TYPES = ("bert", "albert", "electra")  # BertForPreTraining, AlbertForPreTraining, train/electra.py

# BertConfig's fields a run may set by name (vocab_size comes from the vocab), and the values a
# training run starts from where they differ from BertConfig's own defaults (BERT-base)
MODEL_KEYS = tuple(f.name for f in dataclasses.fields(BertConfig) if f.name != "vocab_size")
MODEL_DEFAULTS = dict(**MODEL_SIZES["tiny"],
                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)

ROOT = Path(__file__).resolve().parent.parent.parent  # the repository
DEFAULT_DATA_CACHE = str(ROOT / "data" / "generated")  # git-ignored, shared by all runs


def check_data_cache(path: str | Path, flag: str = "data_cache") -> Path:
    """The folder pretraining shards (and a CORPUS= or task corpus) are generated into, checked as
    every output folder is (io/outputs.check_output): not another run nor a folder inside one,
    not a file, not a symbolic link. The one rule of train, train-tiny, ablate, export-data and
    nsp-baseline, whether the folder came from --set, --data-cache or a run.json on --resume."""
    return outputs.check_output(path, kind="dir", flag=flag)


@dataclasses.dataclass(kw_only=True)
class TrainConfig(RunSettings):
    """Every hyperparameter of a run. `python -m minibert train --set key=value` sets any field."""

    # the preset is the base the options change (train --preset, train-tiny --preset; ablate's study
    # picks its own): `--set preset=mini` would name mini beside tiny's sizes
    chosen_by = {"preset": "--preset NAME"}

    name: str = "tiny"
    preset: str = "tiny"
    out: str = ""  # default runs/<name>
    # data
    corpus: tuple = ()  # training text files (one sentence per line, blank line between documents)
    heldout: tuple = ()  # held-out text files (never used for training)
    vocab: str = ""
    data_cache: str = DEFAULT_DATA_CACHE
    # the generator's flags, with its own defaults (pretraining_data.DEFAULT_FLAGS) but dupe_factor
    max_seq_length: int = DEFAULT_FLAGS["max_seq_length"]
    max_predictions_per_seq: int = DEFAULT_FLAGS["max_predictions_per_seq"]
    masked_lm_prob: float = DEFAULT_FLAGS["masked_lm_prob"]
    short_seq_prob: float = DEFAULT_FLAGS["short_seq_prob"]
    dupe_factor: int = 5  # half the generator's 10: dynamic masking redraws the masks every epoch
    heldout_dupe_factor: int = 5  # passes over the held-out documents (different pairs and masks)
    data_seed: int = DEFAULT_FLAGS["random_seed"]  # generator seed (also the held-out set's masking seed)
    masking: str = "dynamic"  # static | dynamic
    # what a token chosen for prediction becomes: (MASK, SAME, RND) shares of [MASK] / itself /
    # a random token, in the generator and in dynamic masking (BERT's 80/10/10; the paper's Table 8)
    mask_shares: tuple = DEFAULT_FLAGS["mask_shares"]
    # the pretraining loss (model.OBJECTIVES): "mlm_nsp" (BERT), "mlm" (No NSP: MLM loss only,
    # pooler and NSP head left untrained) or "ltr" (LTR & No NSP: causal attention, next-token
    # prediction on the unmasked pairs through the MLM head); the paper's Table 5
    objective: str = "mlm_nsp"
    # sequence-length warm-up, as BERT did it (90% of its steps at length 128, then 512): the first
    # short_seq_fraction of the steps train on sequences of short_seq_length tokens (0 = off), with
    # the batch scaled up so a step holds as many tokens; the rest, and every evaluation, use
    # max_seq_length
    short_seq_length: int = 0
    short_seq_fraction: float = 0.0
    max_train_examples: int = 0  # >0: use only the first N lines of the corpus (and N/4 held out; --fast)
    # what a training sequence is (pretraining_data.PACKINGS): "segment_pair" (BERT: two segments,
    # an NSP or SOP label), or RoBERTa's single segment of whole sentences, "full_sentences"
    # (crossing documents, a [SEP] between them) or "doc_sentences" (within one document; a
    # document's last sequence is shorter, and a batch then holds fewer real tokens: its loss is
    # the mean over its predictions, 15% of its real tokens, and tokens/s counts real tokens)
    packing: str = "segment_pair"
    sentence_order: bool = False  # ALBERT's SOP pairs (label 1 = swapped) instead of NSP pairs
    # the model: a BertConfig (see the module docstring); model_type "albert" builds an
    # AlbertForPreTraining from it plus the two ALBERT settings below
    model: BertConfig = dataclasses.field(default_factory=lambda: BertConfig(**MODEL_DEFAULTS))
    model_type: str = "bert"  # MODEL_TYPES
    embedding_size: int = 128  # ALBERT's / ELECTRA's E (the papers' 128); read only with those model_types
    classifier_dropout_prob: float = 0.0  # ALBERT's dropout before the SOP classifier (off, as the others)
    # ELECTRA (model_type "electra"): the generator's hidden size as a share of the discriminator's
    # (the paper's 1/4), and lambda, the weight of the replaced-token-detection loss (the paper's 50)
    generator_size: float = 0.25
    rtd_weight: float = 50.0
    # optimisation
    batch_size: int = 32  # sequences per micro-batch
    # micro-batches per optimizer step (gradient accumulation): one step averages the gradients of
    # accumulation_steps x batch_size sequences, each micro-batch weighted by its share of the
    # step's predictions (MLM) and pairs (NSP/SOP), which equals one batch of them all
    accumulation_steps: int = 1
    lr: float = 1e-3
    warmup_steps: int = 100
    steps: int = 1000  # the run's (and its schedule's) length; 0: fitted to `minutes` from measured speed
    minutes: float = 0.0  # wall-clock limit of the loop (0 = none)
    schedule: str = "bert"
    bias_correction: bool = False
    weight_decay: float = 0.01
    beta1: float = 0.9  # AdamW's moment decays (docs/bert-notes.md §6.3: 0.9, 0.999)
    beta2: float = 0.999
    clip_norm: float = 1.0
    # loop
    seed: int = 0  # init, data order, dropout
    log_interval: int = 10
    eval_interval: int = 200
    eval_examples: int = 1024  # held-out examples per evaluation (0 = all)
    checkpoint_interval: int = 200
    control_shuffle_labels: bool = False  # control run: MLM targets shuffled within each batch
    curves: bool = True  # draw curves.png (matplotlib costs ~1-2 s per drawing)

    def short_phase(self) -> tuple[int, int, int]:
        """(sequence length, batch size, max predictions per sequence) of the short phase: the
        batch holds as many tokens as a full-length one, predictions scale with the length."""
        T = self.short_seq_length
        return (T, max(1, round(self.batch_size * self.max_seq_length / T)),
                max(1, round(self.max_predictions_per_seq * T / self.max_seq_length)))

    def model_config(self, vocab_size: int) -> BertConfig | AlbertConfig:
        """The run's BertConfig with the vocab's size (an AlbertConfig for model_type "albert")."""
        bert = dataclasses.replace(self.model, vocab_size=vocab_size)
        if self.model_type == "electra":
            return ElectraConfig.from_dict({**bert.to_dict(), "embedding_size": self.embedding_size})
        if self.model_type != "albert":
            return bert
        return AlbertConfig.from_dict({**bert.to_dict(), "embedding_size": self.embedding_size,
                                       "classifier_dropout_prob": self.classifier_dropout_prob})

    def generator_config(self, vocab_size: int) -> ElectraConfig:
        """ELECTRA's generator: the discriminator's layers and embedding, hidden size scaled by
        generator_size, one head per 64 hidden units (at least one), intermediate 4 x hidden, as
        google-research/electra sizes it (docs/bert-notes.md §10.3)."""
        disc = self.model_config(vocab_size)
        C = max(1, int(round(disc.hidden_size * self.generator_size)))
        return dataclasses.replace(disc, hidden_size=C, num_attention_heads=max(1, C // 64), intermediate_size=4 * C)

    def pair_task(self) -> tuple[str | None, str, str]:
        """(name, label-0 class, label-1 class) of the sentence-pair task the data's
        next_sentence_labels hold: NSP, SOP (sentence_order), or None (packed single segments)."""
        if self.packing != "segment_pair" or self.model_type == "electra":  # ELECTRA has no pair head
            return None, "", ""
        return ("SOP", "in order", "swapped") if self.sentence_order else ("NSP", "IsNext", "random-next")

    @property
    def run_dir(self) -> Path:
        return Path(self.out or f"runs/{self.name}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with the model's settings under "model" (run.json)."""
        d = dataclasses.asdict(self)
        d["corpus"], d["heldout"] = list(self.corpus), list(self.heldout)
        d["mask_shares"] = list(self.mask_shares)
        d["model"] = {k: v for k, v in d["model"].items() if k in MODEL_KEYS}
        return d

    def flat(self) -> dict[str, Any]:
        """Every setting by its own name, the model's beside the others: what --set and
        make_config take, and what a comparison of two runs lists."""
        return flatten(self.to_dict())

    @classmethod
    def settable_fields(cls) -> dict[str, dataclasses.Field]:
        """Every setting by its flat name (the model's beside the others), with its field."""
        model = {f.name: f for f in dataclasses.fields(BertConfig) if f.name in MODEL_KEYS}
        return {**model, **{k: f for k, f in cls.fields().items() if k != "model"}}

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "") -> "TrainConfig":
        """From to_dict's form, or from flat names (make_config, --set); every
        value of its field's type (a wrong one is an error naming the setting)."""
        if not isinstance(d, dict) or not isinstance(d.get("model") or {}, dict):
            raise ValueError(f"{where + ': ' if where else ''}the settings must be a JSON object with an object "
                             f"\"model\"")
        d = dict(d)
        model = dict(d.pop("model", None) or {})
        model.update({k: d.pop(k) for k in list(d) if k in MODEL_KEYS})
        model.pop("vocab_size", None)
        fields = cls.settable_fields()
        unknown = sorted(set(d) - set(fields)) + sorted(set(model) - set(MODEL_KEYS))
        if unknown:
            raise ValueError(f"unknown training settings {names_shown(unknown)}; known: {sorted(fields)}")
        if "mask_shares" in d and isinstance(d["mask_shares"], (list, tuple)):  # floats (validate() names a bad value)
            d["mask_shares"] = tuple(float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else x
                                     for x in d["mask_shares"])
        d = {k: check_value(k, v, fields[k], where) for k, v in d.items()}
        model = {k: check_value(k, v, fields[k], where) for k, v in model.items()}
        for k, v in {**d, **model}.items():
            check_range(k, v, cls.ranges, where)
        return cls(**d, model=BertConfig(**{**MODEL_DEFAULTS, **model}))

    def validate(self, require_files: bool = True) -> None:
        """Every setting checked before anything is written, so that a bad one never leaves a
        directory claimed by run.json for a run that cannot take a step. `require_files=False`
        skips the corpus and vocab, for a check before they are prepared."""
        for key, v in self.flat().items():
            if isinstance(v, float) and not math.isfinite(v):
                raise ValueError(f"{key}={v} must be a finite number")
        if not self.name.strip() or self.name in (".", "..") or any(c in self.name for c in "/\\\0"):
            # runs/<name> of '' or '.' is runs/ itself (a fresh run would clear what it holds), '../x' is outside
            raise ValueError(f"--name {shown_value(self.name)} must be a plain folder name (the run goes to runs/<name>): not "
                             f"empty, '.', '..' or a path; give --out DIR for a directory elsewhere")
        if self.masking not in ("static", "dynamic"):
            raise ValueError(f"masking={shown_value(self.masking)} must be 'static' or 'dynamic'")
        if not isinstance(self.data_cache, (str, Path)) or not str(self.data_cache).strip():
            raise ValueError(f"data_cache={shown_value(self.data_cache)} must name a directory (empty, the shards would be "
                             f"written into the current directory)")
        if not outputs.inside(self.data_cache, self.run_dir):  # inside the run: checked under its lock (prepare_data)
            check_data_cache(self.data_cache)
        check_mask_shares(self.mask_shares)
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective={self.objective!r} is not one of {OBJECTIVES}")
        if self.objective == "ltr" and self.control_shuffle_labels:
            raise ValueError("control_shuffle_labels shuffles MLM targets; objective 'ltr' has none "
                             "(its targets are the next tokens)")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule={self.schedule!r} is not one of {SCHEDULES}")
        check_packing(self.packing, self.sentence_order)
        if self.packing != "segment_pair" and self.objective == "mlm_nsp":
            raise ValueError(f"packing={self.packing!r} makes single-segment sequences without NSP labels; "
                             f"use objective 'mlm' (RoBERTa) or 'ltr', or packing 'segment_pair'")
        if self.model_type not in MODEL_TYPES:
            raise ValueError(f"model_type={self.model_type!r} is not one of {MODEL_TYPES}")
        if self.model_type == "albert":
            if self.objective != "mlm_nsp":
                raise ValueError(f"objective={self.objective!r}: model_type 'albert' trains MLM + its "
                                 f"sentence-pair head (SOP with sentence_order), objective 'mlm_nsp'")
            self.model_config(vocab_size=1)  # AlbertConfig checks embedding_size, classifier_dropout_prob
        if self.model_type == "electra":
            if self.objective != "mlm" or self.sentence_order:
                raise ValueError(f"objective={self.objective!r}, sentence_order={self.sentence_order}: model_type "
                                 f"'electra' trains its generator's MLM + replaced-token detection, objective "
                                 f"'mlm' without sentence_order")
            if self.accumulation_steps != 1:
                raise ValueError(f"accumulation_steps={self.accumulation_steps}: model_type 'electra' takes one "
                                 f"batch per step (raise batch_size instead)")
            if not (0 < self.generator_size <= 1 and self.rtd_weight > 0):
                raise ValueError(f"generator_size={self.generator_size} must be in (0, 1] and "
                                 f"rtd_weight={self.rtd_weight} > 0")
            self.generator_config(vocab_size=1)  # ElectraConfig checks the sizes
        for k in ("batch_size", "accumulation_steps", "max_seq_length", "max_predictions_per_seq",
                  "log_interval", "eval_interval", "checkpoint_interval", "dupe_factor"):
            if getattr(self, k) < 1:
                raise ValueError(f"{k}={getattr(self, k)} must be >= 1")
        if self.warmup_steps < 0 or self.minutes < 0 or self.eval_examples < 0:
            raise ValueError("warmup_steps, minutes and eval_examples must be >= 0")
        if self.max_seq_length > self.model.max_position_embeddings:
            raise ValueError(f"max_seq_length {self.max_seq_length} exceeds max_position_embeddings "
                             f"{self.model.max_position_embeddings}")
        if not self.lr > 0:
            raise ValueError(f"lr={self.lr} must be > 0")
        if not self.clip_norm > 0:
            raise ValueError(f"clip_norm={self.clip_norm} must be > 0 (the largest global gradient norm)")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay={self.weight_decay} must be >= 0")
        if self.heldout_dupe_factor < 1:
            raise ValueError(f"heldout_dupe_factor={self.heldout_dupe_factor} must be >= 1")
        if not 0.0 < self.masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob={self.masked_lm_prob} must be in (0, 1] (BERT: 0.15)")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"short_seq_prob={self.short_seq_prob} must be in [0, 1] (BERT: 0.1)")
        if self.max_seq_length < 8:
            raise ValueError(f"max_seq_length={self.max_seq_length} must be >= 8 ([CLS] A [SEP] B [SEP] "
                             f"needs room for two segments)")
        if self.max_predictions_per_seq > self.max_seq_length - 3:
            raise ValueError(f"max_predictions_per_seq={self.max_predictions_per_seq} must be at most "
                             f"max_seq_length - 3 = {self.max_seq_length - 3} (a sequence has at most that "
                             f"many maskable tokens besides [CLS] and two [SEP])")
        if self.max_train_examples < 0:
            raise ValueError(f"max_train_examples={self.max_train_examples} must be >= 0")
        if self.short_seq_length and not 8 <= self.short_seq_length < self.max_seq_length:
            raise ValueError(f"short_seq_length={self.short_seq_length} must be 0 (off) or in "
                             f"[8, max_seq_length={self.max_seq_length})")
        if not 0.0 <= self.short_seq_fraction < 1.0 or (self.short_seq_fraction > 0) != (self.short_seq_length > 0):
            raise ValueError(f"short_seq_fraction={self.short_seq_fraction} must be in (0, 1) with a "
                             f"short_seq_length, and 0 without one (short_seq_length={self.short_seq_length})")
        if self.steps < 0 or not self.steps and not self.minutes > 0:
            raise ValueError(f"steps={self.steps}: give steps >= 1, or steps 0 (fitted to the time budget) with "
                             f"minutes > 0 (minutes={self.minutes:g})")
        if not require_files:
            return
        if not self.corpus:
            raise ValueError("no training corpus given (--corpus FILE ...)")
        if not self.vocab:
            raise ValueError("no vocabulary given (--vocab vocab.txt)")


def flatten(d: dict[str, Any]) -> dict[str, Any]:
    """A TrainConfig dict (to_dict's, or an already flat one) -> flat names."""
    d = dict(d)
    return {**{k: v for k, v in (d.pop("model", None) or {}).items() if k in MODEL_KEYS}, **d}


def preset_settings(preset: str) -> dict[str, Any]:
    """The settings a preset starts from (its name is the run's, unless `name` is given)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    return {"preset": preset, "name": preset, **PRESETS[preset]}


def make_config(preset: str = "tiny", /, **overrides) -> TrainConfig:
    """TrainConfig from a preset plus overrides, the way every command builds its settings
    (`TrainConfig.build`), not yet validated; ValueError for an unknown preset or key."""
    if overrides.get("preset", preset) != preset:  # the preset is the base, chosen once: not an override
        raise ValueError(f"preset {overrides['preset']!r} given beside preset {preset!r}: the preset is chosen once "
                         f"(--preset NAME)")
    return TrainConfig.build(preset_settings(preset), {k: v for k, v in overrides.items() if k != "preset"},
                             validate=False)


# ---------------------------------------------------------------------------------------------
# make train-tiny

# The recipe on the default corpus. Why each setting, what else was tried and what every run
# measured: docs/recipe.md ("How the train-tiny recipe was chosen").
TINY_RECIPE = dict(lr=1e-3, warmup_steps=200, bias_correction=True, masking="dynamic",
                   dupe_factor=20, max_seq_length=64, max_predictions_per_seq=10,
                   hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, eval_interval=500,
                   checkpoint_interval=250, eval_examples=2048, minutes=9.5, steps=0)
# --fast: the same pipeline and files on a slice of the corpus, in about a minute
FAST_RECIPE = dict(minutes=0.75, dupe_factor=1, heldout_dupe_factor=1, max_train_examples=3000, eval_examples=256, eval_interval=25,
                   checkpoint_interval=50, warmup_steps=10, log_interval=5)
FILL_MASK_EXAMPLES = ("a [MASK] is an immutable sequence of characters.",
                      "the [MASK] statement is used to leave a loop early.",
                      "open the file and [MASK] its contents into a string.")
