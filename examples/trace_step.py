"""One training step traced, from the command line to the matmul: the files and functions a step
of `python -m minibert train` and of `python -m minibert finetune` runs, in the order they are
called (docs/architecture.md lists them).

    python examples/trace_step.py            # prints both traces (Markdown), about a minute

It makes a tiny synthetic corpus, pretrains a 1-layer BERT for 3 steps through `minibert.__main__`,
then fine-tunes it for 3 steps, and records the calls of the second step of each (the first
compiles Numba's kernels) with sys.setprofile: the frames above the step (the command down to
loop/engine.run), then every Python function of the package the step calls, each shown once, at
its first call, indented by its depth (comprehensions left out). The matmul itself is an operator (`x @ w`), not a call: the trace
ends in the function that holds it.
"""
from __future__ import annotations

import inspect
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from corpora import pretraining_files, topic_corpus, topic_vocab  # noqa: E402 (tests/corpora.py)

from minibert.__main__ import main  # noqa: E402
from minibert.loop import engine  # noqa: E402

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


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        traces = run_both(Path(tmp))
    for command, lines in traces.items():
        print(f"\n`{command}`, its second step:\n\n```")
        print("\n".join(lines))
        print("```")
