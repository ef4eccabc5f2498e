"""One training step traced, from the command line to the matmul: the files and functions a step
of `python -m minibert train` and of `python -m minibert finetune` runs, in the order they are
called. docs/architecture.md shows both traces, and tests/meta/test_step_trace.py fails when they
are not today's code's:

    python tests/devtools/trace_step.py            # prints both traces (Markdown), about a minute
    python tests/devtools/trace_step.py --write    # writes them into docs/architecture.md
    python tests/devtools/trace_step.py --check    # exit 1, with the difference, if the page is not current

It makes a tiny synthetic corpus, pretrains a 1-layer BERT for 3 steps through `minibert.__main__`,
then fine-tunes it for 3 steps, and records the calls of the second step of each (the first
compiles Numba's kernels) with sys.setprofile: the frames above the step (the command down to
loop/engine.run), then every Python function of the package the step calls, each shown once, at
its first call, indented by its depth (comprehensions left out). The matmul itself is an operator
(`x @ w`), not a call: the trace ends in the function that holds it. The traces are of the
Numba backend (MINIBERT_BACKEND=numba is set here) with NumPy on OpenBLAS, the default install.
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
import inspect
import os
import re
import sys
import tempfile
from pathlib import Path

os.environ["MINIBERT_BACKEND"] = "numba"  # the trace the page shows: the kernels' (read once, at the first step)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for corpora.py

from corpora import pretraining_files, topic_corpus, topic_vocab  # noqa: E402 (tests/corpora.py)

from minibert.__main__ import main  # noqa: E402
from minibert.io.paths import repo_root  # noqa: E402
from minibert.loop import engine  # noqa: E402

ROOT = repo_root()
DOC = ROOT / "docs" / "architecture.md"
# a trace on the page: a fenced block that starts at the command line's entry
BLOCK = re.compile(r"^```\n(minibert/__main__\.py:main\n.*?)^```$", re.S | re.M)

COMPREHENSION = re.compile(r"<(listcomp|dictcomp|setcomp|genexpr|lambda)>$")


def where(code) -> str | None:
    """minibert/<file>:<function> of a code object, None outside the package."""
    try:
        path = Path(code.co_filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    return f"{path}:{code.co_qualname}" if path.parts[0] == "minibert" else None


def trace_second_step(argv: list[str]) -> list[str]:
    """Run the command `argv`; -> the lines of the trace of its second training step."""
    lines: list[str] = []
    original, count = engine.train_step, [0]

    def traced(run, state):
        count[0] += 1
        if count[0] != 2:
            return original(run, state)
        outer = [f for f in reversed(inspect.stack()[1:]) if where(f.frame.f_code)]
        lines.extend(f"{'  ' * i}{where(f.frame.f_code)}" for i, f in enumerate(outer))
        seen: set[str] = set()

        def depth(frame) -> int:
            """The package's functions on the stack below this frame (comprehensions not counted)."""
            n = 0
            while frame is not None:
                name = where(frame.f_code)
                n += bool(name) and not COMPREHENSION.search(name)
                frame = frame.f_back
            return n

        active: list[int] = [len(outer)]  # the depths of the frames now running (the step's caller first)

        def profile(frame, event, arg):
            if event == "call":
                # a Numba kernel's frame has no caller frame: it runs under the function on top
                d = depth(frame) if frame.f_back is not None else active[-1] + 1
                active.append(d)
                name = where(frame.f_code)
                if name and name not in seen and not COMPREHENSION.search(name):
                    seen.add(name)
                    lines.append(f"{'  ' * (d - 1)}{name}")
            elif event == "return" and len(active) > 1:
                active.pop()

        sys.setprofile(profile)
        try:
            return original(run, state)
        finally:
            sys.setprofile(None)

    engine.train_step = traced
    try:
        code = main(argv)
    finally:
        engine.train_step = original
    if code != 0:
        raise SystemExit(f"{argv[0]} exited with {code}")
    return lines


def run_both(work: Path) -> dict[str, list[str]]:
    d = work / "corpus"
    d.mkdir(parents=True)
    files = pretraining_files(d, topic_corpus(d / "train.txt", 80, 0), topic_corpus(d / "heldout.txt", 12, 1),
                              topic_vocab(d / "vocab.txt"))
    small = ["--set", "hidden_size=16", "--set", "num_hidden_layers=1", "--set", "num_attention_heads=2",
             "--set", "intermediate_size=32", "--set", "max_seq_length=32", "--set", "max_position_embeddings=32",
             "--set", "max_predictions_per_seq=5", "--batch-size", "8", "--set", "curves=false"]
    pretrained = work / "pretrained"
    train = trace_second_step(["train", "--out", str(pretrained), "--corpus", *files["corpus"], "--heldout",
                               *files["heldout"], "--vocab", files["vocab"], "--steps", "3",
                               "--set", f"data_cache={files['data_cache']}", *small])
    sst = work / "sst"
    sst.mkdir()
    rows = ["sentence\tlabel"] + [f"{w} film was {w}\t{int(w == 'good')}" for w in ("good", "bad") * 16]
    for split in ("train", "dev"):
        (sst / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    finetune = trace_second_step(["finetune", "custom", "--format", "glue-single", "--data", str(sst), "--init",
                                  str(pretrained), "--out", str(work / "ft"), "--steps", "3", "--batch-size", "8",
                                  "--quiet"])
    return {"python -m minibert train": train, "python -m minibert finetune": finetune}


def documented(text: str) -> list[str]:
    """The traces a page shows, in its order (pretraining, then fine-tuning)."""
    return [block.rstrip("\n") for block in BLOCK.findall(text)]


def rewrite(text: str, traces: dict[str, list[str]]) -> str:
    """`text` with its traces replaced by `traces`' (in the same order)."""
    blocks = iter(["\n".join(lines) for lines in traces.values()])
    new, n = BLOCK.subn(lambda m: "```\n" + next(blocks) + "\n```", text)
    if n != len(traces):
        raise ValueError(f"the page has {n} trace blocks, expected {len(traces)}")
    return new


def difference(text: str, traces: dict[str, list[str]]) -> str:
    """'' when the page shows `traces`, else a unified diff of the page's traces against them."""
    shown, made = documented(text), ["\n".join(lines) for lines in traces.values()]
    if shown == made:
        return ""
    return "\n".join(difflib.unified_diff("\n\n".join(shown).splitlines(), "\n\n".join(made).splitlines(),
                                         "docs/architecture.md", "today's code", lineterm="", n=1))


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--write", action="store_true", help="write the traces into docs/architecture.md")
    p.add_argument("--check", action="store_true", help="exit 1 if docs/architecture.md shows other traces")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, open(os.devnull, "w") as quiet:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):  # not a terminal, wherever it runs
            traces = run_both(Path(tmp))
    text = DOC.read_text(encoding="utf-8")
    if args.write:
        DOC.write_text(rewrite(text, traces), encoding="utf-8")
        print(f"wrote the traces into {DOC}")
    elif args.check:
        diff = difference(text, traces)
        if diff:
            print(f"docs/architecture.md's step traces are not today's code's; regenerate them with\n"
                  f"    python tests/devtools/trace_step.py --write\n{diff}")
            return 1
    else:
        for command, lines in traces.items():
            print(f"\n`{command}`, its second step:\n\n```")
            print("\n".join(lines))
            print("```")
    return 0


if __name__ == "__main__":
    sys.exit(cli())
