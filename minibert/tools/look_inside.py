"""The commands that look inside a trained run: `fill-mask`, `attention` and `nsp-baseline`.

    python -m minibert fill-mask runs/tiny "a [MASK] is an immutable sequence of characters"
    python -m minibert attention runs/tiny "the list is sorted in place"    # -> attention/tiny/
    python -m minibert nsp-baseline runs/tiny

The work is done by minibert/analysis/inspect.py (fill_mask, attention_maps, plot_attention) and
minibert/analysis/nsp_baseline.py; this module reads the run directory and prints."""
from __future__ import annotations

import contextlib
import dataclasses
import sys
from pathlib import Path

from minibert.io.cli import command_parser
from minibert.analysis.inspect import attention_maps, fill_mask, plot_attention
from minibert.io import outputs
from minibert.io.textio import check_argument, error_line, refuse_special_file
from minibert.analysis.nsp_baseline import FEATURES, nsp_overlap_baseline
from minibert.bert import load_pretrained
from minibert.checkpoint import model_tokenizer, read_config_json
from minibert.data.pretraining_data import FEATURE_NAMES
from minibert.data.shards import load_shards
from minibert.family.albert import AlbertForPreTraining
from minibert.finetune.registry import TASK_ARCHITECTURES
from minibert.loop.rundir import RunLock, read_run, run_state
from minibert.text.tokenizer import BertTokenizer
from minibert.train.config import DEFAULT_DATA_CACHE, check_data_cache
from minibert.train.data import run_data_dirs
from minibert.train.runs import resume_config


def load_model_and_tokenizer(run_dir: str | Path, verify: bool = True, encoder_of_task: bool = False):
    """A saved run (config.json, model.safetensors, vocab.txt) -> (model, tokenizer), checked
    (with `verify`: finite weights that match the digest recorded when they were saved). An
    ALBERT run (config.json model_type "albert") gives an AlbertForPreTraining. A fine-tuned BERT
    task model is refused, or with `encoder_of_task` read as its encoder (its task head left out)."""
    run_dir = Path(run_dir)
    for f in ("config.json", "model.safetensors", "vocab.txt"):
        refuse_special_file(run_dir / f)  # a FIFO or a device is named as such, not "not found"
        if not (run_dir / f).is_file():
            raise ValueError(f"{run_dir / f} not found; expected a saved model directory such as runs/tiny "
                             f"(train one with `make train-tiny`)")
    albert = read_config_json(run_dir / "config.json").get("model_type") == "albert"
    model = (AlbertForPreTraining.from_pretrained(run_dir, verify=verify) if albert
             else load_pretrained(run_dir, verify=verify, encoder_of_task=encoder_of_task))
    return model, model_tokenizer(run_dir, model.config, getattr(model, "do_lower_case", True))


# a fine-tuned head's task, as `predict` and minibert.pipeline name it
HEAD_TASKS = {"sequence": "text-classification", "token": "token-classification", "qa": "question-answering"}


def no_mlm_head(run_dir: str | Path) -> ValueError:
    """Why the model in `run_dir` (read, without an MLM head) cannot fill in [MASK], fitted to what
    it is: a fine-tuned task model (its task head in place of the MLM head: predict runs it, and
    the model it was fine-tuned from fills masks), or an encoder alone (a BertModel,
    sentence-transformers)."""
    run_dir = Path(run_dir)
    archs = read_config_json(run_dir / "config.json").get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    if arch in TASK_ARCHITECTURES:
        try:
            info = read_run(run_dir)
        except ValueError:  # an unreadable run.json: the init is not named
            info = None
        init = info.settings.get("init") if info is not None and info.command == "finetune" else None
        source = (f"the model it was fine-tuned from ({init}) can, if it was saved with its MLM head"
                  if isinstance(init, str) and init != "none" else "a pretrained model saved with its MLM head can")
        task = HEAD_TASKS.get(TASK_ARCHITECTURES[arch].head_shape)
        return ValueError(f"{run_dir} is a fine-tuned {arch}: fine-tuning put a {task or 'multiple-choice'} head on "
                          f"its encoder and left the MLM head out, so it cannot fill in [MASK]; {source}. Run this "
                          f"model on its task: python -m minibert predict {run_dir} ..."
                          + (f" (or minibert.pipeline({task!r}, model=...))" if task else ""))
    return ValueError(f"{run_dir} ({arch or 'no architecture given'}) has no MLM head (its checkpoint holds the "
                      f"encoder only, as a sentence-transformers model or a BertModel does), so it cannot fill in "
                      f"[MASK]: use a model saved with its MLM head, e.g. runs/tiny or a BertForMaskedLM")


def fill_mask_cli(argv: list[str]) -> int:
    p = command_parser("fill-mask", "Top-k predictions for each [MASK] in a sentence.")
    p.add_argument("run_dir", help="saved model directory, e.g. runs/tiny")
    p.add_argument("text", nargs="+", help="text with one or more [MASK] markers")
    p.add_argument("-k", type=int, default=5, help="predictions per mask (default 5)")
    p.add_argument("--no-verify", dest="verify", action="store_false",
                   help="load weights that are not finite or do not match their recorded sha256")
    args = p.parse_args(argv)
    text = " ".join(args.text)
    try:
        check_argument(text)
        model, tokenizer = load_model_and_tokenizer(args.run_dir, args.verify, encoder_of_task=True)
        if "mlm" not in getattr(model, "heads", ("mlm",)):
            raise no_mlm_head(args.run_dir)
        results = fill_mask(model, tokenizer, text, args.k)
    except (ValueError, OSError) as e:
        print(error_line(e), file=sys.stderr)
        return 1
    print(text)
    for i, preds in enumerate(results):
        print(f"[MASK] #{i + 1}:")
        for tok, prob in preds:
            print(f"  {tok:<16} {prob:.3f}")
    return 0


def attention_cli(argv: list[str]) -> int:
    p = command_parser("attention", "Save attention maps (PNG) per layer and head for a sentence.")
    p.add_argument("run_dir", help="saved model directory, e.g. runs/tiny")
    p.add_argument("text", nargs="+", help="the sentence")
    p.add_argument("--pair", default=None, help="optional second segment")
    p.add_argument("--out", default=None, help="output directory (default attention/RUN_NAME under the current "
                                               "directory)")
    p.add_argument("--no-verify", dest="verify", action="store_false",
                   help="load weights that are not finite or do not match their recorded sha256")
    args = p.parse_args(argv)

    try:
        text = check_argument(" ".join(args.text))
        if not text.strip():  # maps of [CLS] [SEP] alone show nothing
            raise ValueError("attention needs the text (a sentence)")
        pair = None if args.pair is None else check_argument(args.pair, "--pair")
        # by default a folder under the current directory, named after the model: never beside the model
        out = Path(args.out) if args.out else Path("attention") / (Path(args.run_dir).resolve().name or "model")
        if out.exists() and not out.is_dir():
            raise ValueError(f"output directory {out} is a file; choose another --out")
        model, tokenizer = load_model_and_tokenizer(args.run_dir, args.verify, encoder_of_task=True)
        result = attention_maps(model, tokenizer, text, pair)
        run = Path(args.run_dir)  # the maps go into the run's own attention/ (the default) only under its lock
        with RunLock(run) if outputs.is_run_dir(run) and outputs.inside(out, run) else contextlib.nullcontext():
            outputs.check_output(out, inputs=[args.run_dir], kind="dir")
            paths = plot_attention(result, out)
    except (ValueError, OSError) as e:
        print(error_line(e), file=sys.stderr)
        return 1
    print(f"tokens: {' '.join(result.tokens)}")
    print(f"wrote {len(paths)} PNGs to {paths[0].parent}/ (layer<L>.png: all heads; layer<L>_head<H>.png)")
    return 0


def nsp_baseline_cli(argv: list[str]) -> int:
    p = command_parser("nsp-baseline", "How far word overlap alone goes on a run's NSP task.")
    p.add_argument("run_dir", help="a training run (runs/<name>): its data settings pick the shards")
    p.add_argument("--max-train", type=int, default=40_000, help="training pairs to fit on")
    p.add_argument("--data-cache", help="where the run's shards are generated again if they were deleted "
                                        "(default data/generated; never the directory the run file names)")
    args = p.parse_args(argv)

    try:
        if args.max_train < 1:  # 0 would fit nothing (a NaN accuracy); -N, as a slice, would drop the last N pairs
            raise ValueError(f"--max-train {args.max_train} must be at least 1")
        # the run file names the corpus and a data cache: shards are read where the run recorded them, and
        # generated again (from a corpus that hashes to the run's data) only into --data-cache
        if args.data_cache:  # shards are generated there: not inside a run, nor onto a file
            check_data_cache(args.data_cache, flag="--data-cache")
        cfg = dataclasses.replace(resume_config(args.run_dir, {}), data_cache=args.data_cache or DEFAULT_DATA_CACHE)
        dirs = run_data_dirs(Path(args.run_dir), cfg)
        if dirs.heldout is None:
            raise ValueError(f"{args.run_dir} was trained without held-out data")
        tok = BertTokenizer(cfg.vocab)
        specials = {tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id}
        r = nsp_overlap_baseline(load_shards(dirs.train, cfg.vocab, FEATURE_NAMES),
                                 load_shards(dirs.heldout, cfg.vocab, FEATURE_NAMES), len(tok),
                                 specials, args.max_train)
    except (ValueError, OSError) as e:
        print(error_line(e), file=sys.stderr)
        return 1
    print(f"NSP from word overlap alone (logistic regression on {len(FEATURES)} features and their "
          f"products, fit on {r.train_examples:,} training pairs):")
    print(f"  training pairs {r.train_acc:.2%}, held-out pairs {r.heldout_acc:.2%} "
          f"({r.heldout_examples:,} pairs; always answering the majority label: {r.heldout_majority:.2%})")
    last = (run_state(args.run_dir) or {}).get("last_eval")
    if last:
        print(f"  the model in {args.run_dir}: held-out NSP {last['nsp_acc']:.2%} at its last evaluation")
    return 0
