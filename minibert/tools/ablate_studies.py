"""The ablations' registry: the studies (their variants and the paper's claims) and the
downstream tasks `python -m minibert ablate` can score them on (minibert/tools/ablate.py runs them).

A variant is a preset plus TrainConfig settings; adding one, or a study, is an entry here. The
family study's variants are FAMILY_VARIANTS, one line per preset: a preset that minibert/train
does not have (yet) is skipped with a note when the study runs.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Variant:
    """One pretraining variant: a preset plus TrainConfig settings on top of the recipe."""

    name: str  # file-safe key: the cell files and directories use it
    label: str  # the table's row
    preset: str = "tiny"
    settings: tuple = ()  # ((key, value), ...): TrainConfig overrides (hashable, so frozen)
    paper: str = ""  # the paper's row it stands for
    fraction: float = 0.0  # `steps` study: the checkpoint at this fraction of the schedule
    finetune: tuple = ()  # ((key, value), ...): FinetuneConfig settings of this variant's cells
    pretrained_as: str = ""  # fine-tune another variant's pretrained model (its run is not repeated);
    # "none": no pretraining at all, the tiny architecture from a random init (SCRATCH)


@dataclasses.dataclass(frozen=True)
class Claim:
    """One of the paper's claims: `better` scores above `worse` on downstream tasks."""

    better: str
    worse: str
    text: str
    tasks: tuple = ()  # the downstream tasks the claim is about (() = every task of the study)


@dataclasses.dataclass(frozen=True)
class Study:
    name: str
    title: str
    variants: tuple  # every Variant the study knows
    default_variants: tuple  # the names run without --variants
    default_tasks: tuple
    claims: tuple = ()


def make_variant(name, label, preset="tiny", paper="", fraction=0.0, finetune=(), pretrained_as="", **settings) -> Variant:
    return Variant(name, label, preset, tuple(sorted(settings.items())), paper, fraction, tuple(finetune),
                   pretrained_as)


TABLE_8 = ((0.8, 0.1, 0.1), (1.0, 0.0, 0.0), (0.8, 0.0, 0.2), (0.8, 0.2, 0.0), (0.0, 0.2, 0.8), (0.0, 0.0, 1.0))


def _mix_name(shares) -> str:
    return "-".join(str(round(100 * s)) for s in shares)  # (0.8, 0.1, 0.1) -> "80-10-10"


def _size(L: int, H: int) -> Variant:
    """L layers of hidden size H, heads of size 64 (as the tiny preset), FF = 4H."""
    return make_variant(f"L{L}-H{H}", f"L={L}, H={H}", num_hidden_layers=L, hidden_size=H,
              num_attention_heads=max(1, H // 64), intermediate_size=4 * H)


# The family study's registry: adding a preset is one line. A preset that minibert/train does not
# (yet) have is skipped with a note.
FAMILY_VARIANTS = (
    ("bert", "BERT (tiny)", "tiny"),
    ("roberta", "RoBERTa (roberta-tiny)", "roberta-tiny"),
    ("albert", "ALBERT (albert-tiny)", "albert-tiny"),
    ("electra", "ELECTRA (electra-tiny)", "electra-tiny"),
)
STEP_FRACTIONS = (0.25, 0.5, 0.75, 1.0)
# Every study's control: the tiny architecture fine-tuned from a random init with the same
# fine-tuning settings, so a score can be read as "what pretraining bought" (its pretraining
# columns are empty; in `steps` it is the point at 0 minutes).
SCRATCH = Variant("scratch", "no pretraining (random init)", paper="-", pretrained_as="none")

STUDIES: dict[str, Study] = {s.name: s for s in (
    Study("tasks", "the pretraining tasks (the paper's Table 5)",
          (make_variant("bert", "BERT (MLM + NSP)", paper="BERT-Base", objective="mlm_nsp"),
           make_variant("no-nsp", "No NSP (MLM only)", paper="No NSP", objective="mlm"),
           make_variant("ltr", "LTR & No NSP (causal LM)", paper="LTR & No NSP", objective="ltr"),
           # the LTR model again, fine-tuned with a new BiLSTM on top (minibert/finetune/bilstm.py)
           make_variant("ltr-bilstm", "+ BiLSTM (on LTR, fine-tuned)", paper="+ BiLSTM", objective="ltr",
              finetune=(("bilstm", True),), pretrained_as="ltr")),
          ("bert", "no-nsp", "ltr", "ltr-bilstm"), ("nextsent", "punct"),
          (Claim("bert", "no-nsp", "NSP helps: BERT above No NSP"),
           Claim("no-nsp", "ltr", "bidirectional helps: No NSP above LTR & No NSP"),
           Claim("ltr-bilstm", "ltr", "a BiLSTM on the LTR model helps a token task (the paper: SQuAD)",
                 ("punct", "wnut17", "squad2")),
           Claim("ltr", "ltr-bilstm", "a BiLSTM on the LTR model hurts a sentence-level task (the paper: GLUE)",
                 ("nextsent", "sst2", "rte")))),
    Study("masking", "the masking mix MASK/SAME/RND (the paper's Table 8)",
          tuple(make_variant(_mix_name(m), f"{_mix_name(m).replace('-', '/')}", paper=_mix_name(m).replace('-', '/'),
                   mask_shares=m) for m in TABLE_8),
          tuple(_mix_name(m) for m in TABLE_8), ("punct", "punct-feature"),
          (Claim("80-10-10", "0-0-100", "80/10/10 above RND only (0/0/100)"),
           Claim("80-10-10", "100-0-0", "80/10/10 above MASK only (100/0/0), most of all feature-based"))),
    Study("size", "model size at the same budget (the paper's Table 6)",
          tuple(_size(L, H) for L in (1, 2, 4) for H in (64, 128, 256)),
          ("L1-H128", "L2-H128", "L4-H128", "L2-H64", "L2-H256"), ("nextsent", "punct"),
          (Claim("L4-H128", "L2-H128", "more layers help: L=4 above L=2"),
           Claim("L2-H128", "L1-H128", "more layers help: L=2 above L=1"),
           Claim("L2-H128", "L2-H64", "a wider model helps: H=128 above H=64"),
           Claim("L2-H256", "L2-H128", "a wider model helps: H=256 above H=128"))),
    Study("steps", "downstream score against pretraining steps (the paper's Appendix C.1)",
          tuple(make_variant(f"at-{round(100 * f)}", f"{round(100 * f)}% of the schedule", fraction=f) for f in STEP_FRACTIONS)
          # ELECTRA's run of the same budget, snapshotted alike: its score against time beside BERT's
          + tuple(make_variant(f"electra-at-{round(100 * f)}", f"ELECTRA, {round(100 * f)}% of the schedule",
                     preset="electra-tiny", fraction=f) for f in STEP_FRACTIONS),
          tuple(f"at-{round(100 * f)}" for f in STEP_FRACTIONS), ("nextsent",),
          (Claim("at-100", "at-50", "more pretraining helps: the whole schedule above half of it"),
           Claim("electra-at-100", "at-100", "ELECTRA above BERT at the same pretraining time (ELECTRA's claim)"))),
    Study("family", "BERT and its successors at the same budget",
          tuple(make_variant(name, label, preset=preset) for name, label, preset in FAMILY_VARIANTS),
          tuple(name for name, _, _ in FAMILY_VARIANTS), ("nextsent", "punct"),
          (Claim("roberta", "bert", "RoBERTa's recipe above BERT's (the RoBERTa paper)"),
           Claim("electra", "bert", "ELECTRA above BERT at the same pretraining time (the ELECTRA paper)"),
           Claim("albert", "scratch", "ALBERT's pretraining helps: above no pretraining"))),
)}


# every study with its random-init control, and the claim that its reference variant beats it
REFERENCE = {"tasks": "bert", "masking": "80-10-10", "size": "L2-H128", "steps": "at-100", "family": "bert"}
STUDIES = {name: dataclasses.replace(
    s, variants=s.variants + (SCRATCH,), default_variants=s.default_variants + (SCRATCH.name,),
    claims=(Claim(REFERENCE[name], SCRATCH.name, f"pretraining helps: "
                  f"{next(v.label for v in s.variants if v.name == REFERENCE[name])} above no pretraining"), *s.claims))
    for name, s in STUDIES.items()}


@dataclasses.dataclass(frozen=True)
class Downstream:
    """A downstream task of the ablations: a fine-tuning task, fine-tuned or feature-based."""

    name: str
    task: str  # minibert.finetune task name
    frozen: bool = False  # feature-based: the frozen encoder's features, a linear tagger
    data_dirs: tuple = ()  # directory names looked for under --data-root
    needs_data: bool = False  # no copy ships with minibert: --data-root must hold it


DOWNSTREAM: dict[str, Downstream] = {d.name: d for d in (
    Downstream("nextsent", "nextsent", data_dirs=("nextsent",)),
    Downstream("wnut17", "wnut17", data_dirs=("wnut17",)),
    Downstream("wnut17-feature", "wnut17", frozen=True, data_dirs=("wnut17",)),
    Downstream("punct", "punct", data_dirs=("punct",)),
    Downstream("punct-feature", "punct", frozen=True, data_dirs=("punct",)),
    Downstream("sst2", "sst2", data_dirs=("sst2", "SST-2"), needs_data=True),
    Downstream("rte", "rte", data_dirs=("rte", "RTE"), needs_data=True),
    Downstream("squad2", "squad2", data_dirs=("squad2",)),
)}
