"""The command line: `python -m minibert <command> [args]`.

Every Makefile target is one of these commands, so people without `make` can run the same
thing. Each command lives in the module that owns the work and is imported only when used,
so `python -m minibert --help` stays fast. A command that fails on bad input or a failing disk
(ValueError, OSError) prints one `error: ...` line and exits 1 (MINIBERT_TRACEBACK=1 shows the
traceback instead); Ctrl-C exits 130.
"""
from __future__ import annotations

import importlib
import os
import subprocess
import sys

from minibert.io.cli import command_parser
from minibert.io.textio import error_line
from minibert.io.paths import repo_root

ROOT = repo_root()

# command -> ("module:function", one-line help). Each function takes argv (list[str]) and
# returns an exit code.
COMMANDS: dict[str, tuple[str, str]] = {
    "train-tiny": ("minibert.train.commands:train_tiny_cli", "build data if needed, pretrain the tiny preset, evaluate, save"),
    "train": ("minibert.train.commands:cli", "pretrain with a preset and overrides (see --help)"),
    "train-t5": ("minibert.train.t5_command:train_t5_cli", "pretrain the t5-tiny encoder-decoder (span corruption) or fine-tune it on SST-2"),
    "train-xlnet": ("minibert.train.xlnet_command:train_xlnet_cli",
                    "pretrain xlnet-tiny: permutation LM with two-stream attention (see --help)"),
    "corpus": ("minibert.data.corpus:cli", "build the default corpus and vocabulary (make data)"),
    "vocab": ("minibert.text.wordpiece_trainer:cli", "train a WordPiece vocab.txt from text files"),
    "tokenize": ("minibert.text.tokenizer:cli", "tokenize text with a vocab.txt"),
    "data": ("minibert.data.shards:cli", "create MLM/NSP pretraining shards from a corpus"),
    "finetune": ("minibert.finetune.commands:cli", "fine-tune on a task: sst2, rte, wnut17, swag, nextsent, punct, squad1/2"),
    "predict": ("minibert.finetune.commands:predict_cli", "run a fine-tuned model on your own text (or a --file)"),
    "evaluate": ("minibert.finetune.evaluate:evaluate_cli", "a fine-tuned model's task metrics on a labelled file"),
    "squad-eval": ("minibert.finetune.squad_eval:cli", "the official SQuAD v1.1/v2.0 scores of a predictions file"),
    "ablate": ("minibert.tools.ablate:cli", "re-run a BERT ablation in small: tasks, masking, size, steps, family"),
    "fill-mask": ("minibert.tools.look_inside:fill_mask_cli", "top-5 predictions for each [MASK] in a sentence"),
    "attention": ("minibert.tools.look_inside:attention_cli", "save attention maps (PNG) for a sentence"),
    "nsp-baseline": ("minibert.tools.look_inside:nsp_baseline_cli", "how far word overlap alone goes on a run's NSP task"),
    "export-data": ("minibert.tools.export_data:cli", "write a run's MLM/NSP instances as JSON lines for PyTorch"),
    "compile-ahead": ("minibert.kernels.compile_ahead:cli",
                      "compile the Numba kernels ahead, in several processes at once (make venv runs it)"),
    "bench": ("minibert.tools.bench:cli", "benchmarks (kernels, training step, tokenizer, data)"),
    "gradcheck": ("minibert.tools.gradcheck_table:cli", "print the full gradient-check table"),
    "test": ("minibert.__main__:run_tests", "run the test suite, long checks left out (make test)"),
    "test-all": ("minibert.__main__:run_all_tests", "run the test suite with its long checks (make test-all)"),
    "test-interop": ("minibert.__main__:run_interop_tests", "parity tests against transformers"),
    "lessons": ("minibert.__main__:run_lessons", "run every lesson top to bottom (make lessons)"),
    "notebooks": ("minibert.tools.notebooks:cli", "write lessons/NN_*.ipynb from the lessons (make notebooks)"),
}


def run_tests(argv: list[str]) -> int:
    """Run pytest on tests/ (tests/interop excluded; see run_interop_tests), without the tests
    marked slow (pyproject.toml's addopts deselects them), naming the 15 slowest."""
    # lazy: pytest is optional (not in pyproject.toml's dependencies)
    import pytest

    os.environ.setdefault("MPLBACKEND", "Agg")
    return int(pytest.main(["-q", "--durations=15", str(ROOT / "tests"), *argv]))


def run_all_tests(argv: list[str]) -> int:
    """run_tests with the tests marked slow too (`-m ""` lifts the default `-m 'not slow'`)."""
    return run_tests(["-m", "", *argv])


def run_interop_tests(argv: list[str]) -> int:
    """Run tests/interop, which need torch and transformers (the `interop` extra)."""
    # lazy: pytest is optional (not in pyproject.toml's dependencies)
    import pytest

    os.environ.setdefault("MPLBACKEND", "Agg")
    return int(pytest.main(["-q", "-o", "addopts=-ra", str(ROOT / "tests" / "interop"), *argv]))


def run_lessons(argv: list[str]) -> int:
    """Run lessons/NN_*.py in order, each in its own process; stop at the first failure."""
    p = command_parser("lessons", run_lessons.__doc__)
    p.add_argument("only", nargs="*", metavar="NN", help="run only these lessons, by number (e.g. 06 11); default: all")
    args = p.parse_args(argv)  # --help prints the help and runs nothing (it once ran every lesson)
    env = dict(os.environ, MPLBACKEND="Agg")
    lessons = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.py"))
    if not lessons:
        print("no lessons found in", ROOT / "lessons", file=sys.stderr)
        return 1
    if args.only:
        numbers = {path.name[:2] for path in lessons}
        if unknown := [n for n in args.only if n.zfill(2) not in numbers]:
            p.error(f"no lesson {', '.join(unknown)}; the lessons are {', '.join(sorted(numbers))}")
        lessons = [path for path in lessons if path.name[:2] in {n.zfill(2) for n in args.only}]
    for path in lessons:
        print(f"=== {path.name}", flush=True)
        rc = subprocess.call([sys.executable, str(path)], cwd=ROOT, env=env)
        if rc != 0:
            print(f"lesson {path.name} failed (exit {rc})", file=sys.stderr)
            return rc
    print(f"all {len(lessons)} lessons passed")
    return 0


# `train-tiny --preset NAME` for the family members that are not BERT encoders: their own command
ROUTED_PRESETS = {"xlnet-tiny": "train-xlnet", "t5-tiny": "train-t5"}


def route(name: str, rest: list[str]) -> str:
    """train-tiny --preset xlnet-tiny | t5-tiny -> the command that trains that model."""
    if name != "train-tiny":
        return name
    for i, arg in enumerate(rest):
        preset = rest[i + 1] if arg == "--preset" and i + 1 < len(rest) else \
            arg.split("=", 1)[1] if arg.startswith("--preset=") else None
        if preset in ROUTED_PRESETS:
            return ROUTED_PRESETS[preset]
    return name


def _usage() -> str:
    width = max(map(len, COMMANDS))
    rows = "\n".join(f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items())
    return f"usage: python -m minibert <command> [args]\n\ncommands:\n{rows}\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    name, rest = argv[0], argv[1:]
    name = route(name, rest)
    if name not in COMMANDS:
        print(f"unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module_name, func_name = COMMANDS[name][0].split(":")
    func = getattr(importlib.import_module(module_name), func_name)
    try:
        return int(func(rest) or 0)
    except KeyboardInterrupt:
        print(f"\n{name}: interrupted", file=sys.stderr)
        return 130
    except MemoryError:  # an input larger than this machine: one line too (the traceback says no more)
        if os.environ.get("MINIBERT_TRACEBACK"):
            raise
        print(f"error: {name} ran out of memory; the input or the model is larger than this machine holds",
              file=sys.stderr)
        return 1
    except (ValueError, OSError) as e:  # bad input or a failing disk: one line, not a traceback
        if os.environ.get("MINIBERT_TRACEBACK"):
            raise
        print(error_line(e), file=sys.stderr)  # a value nobody capped: not a 30 MB line
        return 1


if __name__ == "__main__":
    sys.exit(main())
