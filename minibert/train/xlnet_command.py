"""`python -m minibert train-xlnet`: pretrain the xlnet-tiny preset on the default corpus.

The data: every document of the corpus is tokenized with the corpus's WordPiece vocab, the
documents are joined by [SEP] into one stream of ids, and a training sequence is a window of
`max_seq_length` consecutive ids at a random offset (new windows every step). Each window gets its own
factorisation order (xlnet.sample_orders) and its targets, the last 1/K of the order
(xlnet.partial_targets). The held-out set is the held-out documents cut into consecutive windows,
with orders drawn once from a fixed seed, so every evaluation scores the same tokens.

The run is minibert's one training loop with XLNet plugged in (train/xlnet.py's XLNetRun on
loop/engine.py): the same progress line, metrics.jsonl, curves.png, atomic checkpoints, Ctrl-C
save (a second Ctrl-C stops at once), NaN stop and bit-exact `--resume RUN_DIR` as every other
run. This module is the command: the preset and its settings (`--set KEY=VALUE`), the run
directory's checks (an unfinished run is refused unless --resume or --overwrite), and the summary
at the end. `--minutes` is a budget the step count is fitted to; `--steps N` fixes the count
instead (then `--minutes`, if given too, only limits the time); `--max-steps-this-run N` pauses
after N steps.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np

from minibert.io.cli import CommandParser, build_settings, command_parser, given_settings, resume_changes, run_options
from minibert.data.corpus import ensure_default_corpus
from minibert.family.xlnet import XLNetConfig
from minibert.io.jsonfile import Field, check_fields, text_field
from minibert.loop import rundir
from minibert.loop.launch import Job, launch
from minibert.loop.settings import RunSettings
from minibert.text.tokenizer import BertTokenizer
from minibert.train.xlnet import WindowBatches, XLNetRun, heldout_batches, token_stream

ROOT = Path(__file__).resolve().parents[2]
COMMAND = "train-xlnet"  # run.json's "command"
# run.json's "data" of a run on files given (null: the default corpus, found again on --resume)
DATA_FIELDS = {name: Field(str, "the path of the file the run read", text_field(), required=True)
               for name in ("corpus", "heldout", "vocab")}


@dataclasses.dataclass(kw_only=True)
class XLNetTrainConfig(RunSettings):
    """The xlnet-tiny preset: BERT-tiny's model and train-tiny's recipe (sequence 64, batch 32,
    lr 1e-3 with bias-corrected AdamW, 200 warmup steps, no dropout), K = 6."""

    # XLNet's position table is made as long as its windows: bounded by BERT's 512 (a 4096-token
    # window's two-stream attention ran until killed on 2 cores)
    ranges = {**RunSettings.ranges, "max_seq_length": (2, 512, "BERT's position table, 512; longer windows' "
                                                                "two-stream attention runs for days on a laptop")}

    out: str = ""  # the run directory (default runs/<preset>)
    hidden_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    intermediate_size: int = 512
    pred_k: int = 6
    max_seq_length: int = 64
    batch_size: int = 32
    lr: float = 1e-3
    warmup_steps: int = 200  # at most half of the steps
    weight_decay: float = 0.01
    minutes: float = 9.5  # the budget steps 0 is fitted to; with steps > 0 a limit (the command sets 0 for --steps N)
    steps: int = 0  # 0: fit the steps to `minutes`
    seed: int = 0
    log_interval: int = 10
    eval_interval: int = 250
    checkpoint_interval: int = 250
    eval_examples: int = 512
    max_train_examples: int = 0  # >0: the first N lines of the corpus (--fast takes a slice)

    def validate(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "out":
                continue
            if f.name in ("steps", "minutes", "max_train_examples", "seed", "warmup_steps", "weight_decay"):  # 0: off
                if v < 0:
                    raise ValueError(f"{f.name}={v} must be >= 0")
            elif not v > 0:
                raise ValueError(f"{f.name}={v} must be > 0")
        if not self.steps and not self.minutes > 0:
            raise ValueError(f"steps 0 fits the steps to the time budget: give minutes > 0 (minutes={self.minutes:g}), "
                             f"or steps >= 1")
        if self.max_seq_length < 2:
            raise ValueError(f"max_seq_length={self.max_seq_length}: a sequence needs at least 2 tokens to predict one")
        if self.pred_k > self.max_seq_length:
            raise ValueError(f"pred_k={self.pred_k} predicts the last 1/{self.pred_k} of a {self.max_seq_length}-token window: "
                             f"less than one token; choose pred_k <= max_seq_length (the paper's 6 or 7)")
        self.model_config(vocab_size=1)  # the model's sizes (and their limits), before any data is read

    def model_config(self, vocab_size: int) -> XLNetConfig:
        return XLNetConfig(vocab_size=vocab_size, hidden_size=self.hidden_size,
                           num_hidden_layers=self.num_hidden_layers, num_attention_heads=self.num_attention_heads,
                           intermediate_size=self.intermediate_size, max_position_embeddings=max(self.max_seq_length, 64),
                           pred_k=self.pred_k)


PRESETS = {"xlnet-tiny": {}}
FAST = dict(minutes=0.4, max_train_examples=3000, eval_examples=32, log_interval=5, eval_interval=25,
            checkpoint_interval=50, warmup_steps=10)


def mlm_perplexity_by_input(model, feats: dict[str, np.ndarray], mask_id: int, batch_size: int = 128) -> dict:
    """A BERT model's held-out MLM perplexity and accuracy, split by what the input holds at the
    predicted position: "[MASK]" (80%: the target is hidden, as it always is from XLNet's query
    stream), "same" (10%: the target itself is in the input) and "random" (10%); "all" is the
    number train-tiny reports. `model` is a BertForPreTraining, `feats` held-out features.
    -> {kind: {"count", "perplexity", "acc"}}"""
    nll: dict[str, list] = {"all": [], "[MASK]": [], "same": [], "random": []}
    hit: dict[str, list] = {k: [] for k in nll}
    for s in range(0, feats["input_ids"].shape[0], batch_size):
        f = {k: v[s:s + batch_size] for k, v in feats.items()}
        logits = model.forward(f["input_ids"], f["segment_ids"], f["input_mask"]).mlm_logits  # (B, T, V)
        b, j = np.nonzero(f["masked_lm_weights"] > 0)  # (M,) each
        pos, y = f["masked_lm_positions"][b, j], f["masked_lm_ids"][b, j]  # (M,) each
        z = logits[b, pos].astype(np.float64)  # (M, V)
        zmax = z.max(-1)  # (M,)
        logp = z[np.arange(y.size), y] - zmax - np.log(np.exp(z - zmax[:, None]).sum(-1))  # (M,)
        x = f["input_ids"][b, pos]  # (M,) what the input holds there
        kind = np.where(x == mask_id, "[MASK]", np.where(x == y, "same", "random"))  # (M,)
        for k in nll:
            sel = np.ones(y.size, dtype=bool) if k == "all" else kind == k
            nll[k].append(-logp[sel])
            hit[k].append(z[sel].argmax(-1) == y[sel])
    out = {}
    for k in nll:
        v, h = np.concatenate(nll[k]), np.concatenate(hit[k])
        out[k] = {"count": int(v.size), "perplexity": float(np.exp(v.mean())) if v.size else float("nan"),
                  "acc": float(h.mean()) if h.size else float("nan")}
    return out




# ---------------------------------------------------------------------------------------------
# the run

def build_run(cfg: XLNetTrainConfig, out: Path, vocab: Path, train_path: Path, heldout_path: Path,
              record: dict | None = None, fast: bool = False) -> XLNetRun:
    """Tokenizer, training stream, held-out batches and the run on them (nothing is written).
    `record`: what run.json keeps beside the settings (the preset, the data files)."""
    tokenizer = BertTokenizer(vocab)
    tokenizer.check_special_tokens(("[SEP]",), "XLNet pretraining")
    stream = token_stream(train_path, tokenizer, cfg.max_train_examples)
    if stream.size < cfg.max_seq_length:
        raise ValueError(f"{train_path}: {stream.size} tokens, fewer than one sequence of {cfg.max_seq_length}")
    heldout = heldout_batches(token_stream(heldout_path, tokenizer), cfg)
    return XLNetRun(cfg, out, tokenizer, WindowBatches(stream, cfg, np.random.default_rng(cfg.seed)), heldout,
                    record, fast)


def _resumed(p: CommandParser, args) -> tuple[XLNetTrainConfig, Path, tuple[Path, Path, Path]]:
    """--resume RUN_DIR: the settings and data run.json saved; only the budget and the pause may be
    given anew. -> (settings, run directory, (training text, held-out text, vocab))."""
    out = Path(args.resume)
    budget = resume_changes(p, args)  # the one rule of --resume (refuse what changes the run)
    info = rundir.resumable_run(out, COMMAND)
    cfg = XLNetTrainConfig.from_run(info, str(out / rundir.RUN_FILE), out=str(out), **budget)
    cfg.validate()
    data = info.extra.get("data")  # read_run checked it is an object of paths, or absent (the default corpus)
    if data is not None:
        check_fields(data, DATA_FIELDS, str(out / rundir.RUN_FILE), prefix="data.")
    paths = ((Path(data["corpus"]), Path(data["heldout"]), Path(data["vocab"])) if data is not None
             else tuple(ensure_default_corpus()))
    return cfg, out, paths


# ---------------------------------------------------------------------------------------------
# the command

def train_xlnet_cli(argv: list[str]) -> int:
    """python -m minibert train-xlnet [--minutes M] [--steps N] [--out DIR] [--set KEY=VALUE] [--resume DIR]"""
    p = command_parser("train-xlnet", "Pretrain the xlnet-tiny preset (permutation LM, two-stream attention) on the "
                       "default corpus; --fast: a slice, ~1 min.", settings=XLNetTrainConfig, fast="a slice of the corpus "
                       "and a few steps (FAST): a check of the plumbing",
                       helps={"minutes": "wall-clock budget of the whole run (default 9.5)",
                              "steps": "a fixed number of steps instead of fitting them to the budget"})
    p.add_argument("--preset", default="xlnet-tiny", choices=sorted(PRESETS))
    p.setting("--out", help="run directory (default runs/<preset>)")
    p.add_argument("--corpus", help="training text, one sentence per line, blank line between documents")
    p.add_argument("--heldout", help="held-out text (with --corpus)")
    p.add_argument("--vocab", help="vocab.txt (with --corpus)")
    run_options(p)
    args = p.parse_args(argv)
    fast = args.fast
    if args.steps is not None and args.steps < 1:  # 0 meant "fit the budget": 9.5 minutes, unasked
        raise ValueError(f"--steps must be at least 1, got {args.steps}")
    if args.resume:
        cfg, out, (train_path, heldout_path, vocab) = _resumed(p, args)
        data = None
    else:
        base = {**PRESETS[args.preset], **(FAST if fast else {})}
        if given_settings(args, p).get("steps") and args.minutes is None:
            base["minutes"] = 0.0  # --steps N: N steps, however long they take (unless --minutes too)
        base["out"] = str(ROOT / "runs" / args.preset)
        cfg = build_settings(args, p, base)
        if args.corpus:
            if not (args.heldout and args.vocab):
                raise ValueError("--corpus needs --heldout and --vocab too")
            train_path, heldout_path, vocab = Path(args.corpus), Path(args.heldout), Path(args.vocab)
            data = {"corpus": str(train_path.resolve()), "heldout": str(heldout_path.resolve()),
                    "vocab": str(vocab.resolve())}
        else:
            train_path, heldout_path, vocab = ensure_default_corpus()
            data = None  # the default corpus: --resume finds it again
        out = Path(cfg.out)
    budget = f"{cfg.steps} steps" if cfg.steps else f"budget {cfg.minutes:g} min"
    print(f"train-xlnet{' (--fast: small slice)' if fast else ''}: {budget} on {os.cpu_count()} cores "
          f"-> {out}", flush=True)
    job = Job(out, COMMAND, resume=bool(args.resume), overwrite=args.overwrite, replaceable=True,
              max_steps=args.max_steps_this_run, resume_command=f"python -m minibert train-xlnet --resume {out}",
              inputs=(("--corpus", train_path), ("--heldout", heldout_path), ("--vocab", vocab)))
    record = {"preset": args.preset, "data": data}
    return launch(job, lambda where: build_run(cfg, where, vocab, train_path, heldout_path, record, fast)).code
