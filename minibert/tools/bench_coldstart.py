"""`python -m minibert bench --only coldstart`: how long a learner waits before anything runs.

Two figures, each cold (a fresh copy of the repository, so Numba's cache in its __pycache__ is
empty and every kernel compiles) and warm (the same copy again, the cache filled), and both again
in a third copy after `make venv`'s warm-up (minibert.compile_ahead), what a fresh clone that
ran `make venv` or any make target first sees:
    train-tiny   seconds from the start of `python -m minibert train-tiny` to the end of its first
                 training step (--fast: the same pipeline on a slice of the corpus, so
                 the data it builds first takes seconds, as on a fresh clone)
    lesson 06    seconds to run lessons/06_attention_numba.py to its end (MINIBERT_FAST=1)
Each also gives the process's CPU time (user + sys of the child), the figure to trust on a
shared machine, and the machine's load average when it ran.

The copy is the working tree's tracked and untracked (not ignored) files, so what is measured is
what a fresh clone of this tree would run (outside a git work tree, an unpacked `git archive`:
every file .gitignore's patterns leave); NUMBA_CACHE_DIR is removed from the child's
environment so the cache is the copy's own. `python -m minibert.tools.bench_coldstart` lists what
a tiny training step compiles (or loads from the cache), kernel by kernel, with its CPU seconds
(`compile_ahead.record_compiles`); run it with NUMBA_CACHE_DIR set to an empty directory to see it cold.
"""
from __future__ import annotations

import fnmatch
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from minibert import compile_ahead
from minibert.io import outputs

ROOT = Path(__file__).resolve().parents[2]  # the repository

# The child for train-tiny: the command itself, stopped after its first training step.
FIRST_STEP_SCRIPT = """
import os, sys
from minibert.loop import engine
from minibert.train.commands import train_tiny_cli

first_step = engine.train_step


def train_step_then_stop(run, state):
    first_step(run, state)
    print("COLDSTART: the first step is done", flush=True)
    os._exit(0)


engine.train_step = train_step_then_stop
sys.exit(train_tiny_cli(sys.argv[1:]))
"""


def ignored(relative: str, patterns: list[str]) -> bool:
    """Whether a path (relative to the repository, with /; a folder's ends with /) matches one of
    .gitignore's patterns, read the simple way this repository writes them: `name/` a folder
    anywhere, `name` or `*.ext` a file or folder anywhere, `dir/pattern` from the root."""
    parts = relative.rstrip("/").split("/")
    whole = len(parts) if relative.endswith("/") else len(parts) - 1  # the parts that are folders
    for pattern in patterns:
        folder = pattern.endswith("/")
        pattern = pattern.rstrip("/")
        if "/" in pattern:  # anchored at the root: dir/sub or dir/*.ext
            if any(fnmatch.fnmatchcase("/".join(parts[:i]), pattern.lstrip("/"))
                   for i in range(1, (whole if folder else len(parts)) + 1)):
                return True
        elif any(fnmatch.fnmatchcase(part, pattern) for part in (parts[:whole] if folder else parts)):
            return True
    return False


def tree_files(root: Path = ROOT) -> list[str]:
    """The files of the repository a fresh clone has: git's tracked and untracked-but-not-ignored
    files in a git work tree; else (an unpacked `git archive`, a copy without .git) every file
    that .gitignore's patterns leave, read by `ignored`."""
    if (root / ".git").exists():  # (a folder, or a file in a worktree): not a git repository around the copy
        try:
            listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                    cwd=root, capture_output=True, check=True).stdout.decode().split("\0")
            return [name for name in listed if name]
        except (OSError, subprocess.CalledProcessError):  # no git installed, or a damaged .git
            pass
    return walked_files(root)


def walked_files(root: Path) -> list[str]:
    """Every file under `root` that .gitignore's patterns leave (an ignored folder is not entered:
    a .venv is thousands of files), relative, with /."""
    gitignore = root / ".gitignore"
    patterns = [line.strip() for line in (gitignore.read_text(encoding="utf-8").splitlines() if gitignore.is_file()
                                          else []) if line.strip() and not line.startswith(("#", "!"))]
    found = []
    for folder, dirs, names in os.walk(root):
        at = Path(folder).relative_to(root).as_posix()
        at = "" if at == "." else at + "/"
        dirs[:] = [d for d in dirs if d != ".git" and not ignored(at + d + "/", patterns)]
        found += [at + n for n in names if n != ".git" and not ignored(at + n, patterns)]  # (a worktree's .git)
    return sorted(found)


def copy_tree(dest: Path) -> Path:
    """The files a fresh clone of the working tree holds (`tree_files`), copied to dest/minibert-copy."""
    out = dest / "minibert-copy"
    for name in tree_files(ROOT):
        src = ROOT / name
        if src.is_file():
            outputs.write_output(out / name, lambda tmp, src=src: shutil.copy2(src, tmp), root=dest)
    return out


def _child_env(copy: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(copy), MINIBERT_FAST="1", MPLBACKEND="Agg", MINIBERT_BACKEND="numba")
    return env


def run_child(cmd: list[str], copy: Path, marker: str | None = None) -> dict:
    """Run cmd in the copy -> {"wall_s", "cpu_s" (user + sys of the child), "load" (1-minute load
    average at the start), "ok" (exit status 0, and `marker` in the output if given), "tail" (the
    output's end)}."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=copy, env=_child_env(copy), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out = res.stdout + res.stderr
    ok = res.returncode == 0 and (marker is None or marker in out)
    return {"wall_s": wall, "cpu_s": cpu, "load": load, "ok": ok, "tail": out[-4000:]}


def train_tiny_first_step(copy: Path) -> dict:
    out = copy / "runs-coldstart"
    return run_child([sys.executable, "-c", FIRST_STEP_SCRIPT, "--fast", "--overwrite", "--set", f"out={out}"], copy,
                     marker="COLDSTART")


def lesson_06(copy: Path) -> dict:
    return run_child([sys.executable, "lessons/06_attention_numba.py"], copy)


def warm_kernels(copy: Path) -> dict:
    """What `make venv` runs after installing (minibert.compile_ahead)."""
    return run_child([sys.executable, "-m", "minibert", "compile-ahead"], copy)


PLAN = (  # (what, the runs in one fresh copy, in order)
    ("train-tiny, to its first step", (("cold", train_tiny_first_step), ("warm", train_tiny_first_step))),
    ("lesson 06, to its end", (("cold", lesson_06), ("warm", lesson_06))),
    ("after make venv's warm-up", (("warm-up (make venv)", warm_kernels), ("train-tiny", train_tiny_first_step),
                                   ("lesson 06", lesson_06))),
)


def bench_coldstart(report: dict, fmt_table) -> None:
    """Each plan's runs in a fresh copy of the tree; the figures into report["coldstart"]."""
    rows, res = [], {}
    for what, runs in PLAN:
        with tempfile.TemporaryDirectory(prefix="minibert-coldstart-") as tmp:
            copy = copy_tree(Path(tmp))
            for cache, fn in runs:
                r = fn(copy)
                res[f"{what}: {cache}"] = {k: v for k, v in r.items() if k != "tail"}
                if not r["ok"]:
                    print(f"coldstart: {what} ({cache}) failed:\n{r['tail']}", file=sys.stderr)
                rows.append([what, cache, f"{r['wall_s']:.1f}", f"{r['cpu_s']:.1f}", f"{r['load']:.1f}",
                             "" if r["ok"] else "FAILED"])
        report["coldstart"] = res
    print("\n== cold start: each block in a fresh copy of the repository (cold = Numba's cache empty, warm = "
          "the same copy again); MINIBERT_FAST=1")
    print(fmt_table(["run", "cache", "wall s", "CPU s", "load", ""], rows))
    print("target: train-tiny cold at most 20 s on 2 cores. CPU s (user + sys of the process) is the figure to "
          "trust on a shared machine; wall s is the wait, load the 1-minute load average when it started")


def compiles_of_tiny_step() -> list[dict]:
    """record_compiles around one tiny training step (minibert.compile_ahead's)."""
    with compile_ahead.record_compiles() as records:
        compile_ahead.tiny_training_step()
    return records


def print_compiles(records: list[dict]) -> None:
    """Per kernel: CPU seconds of its compilations, how many signatures, compiled or loaded."""
    by = {}
    for r in records:
        n, t, c = by.get(r["name"], (0, 0.0, 0))
        by[r["name"]] = (n + 1, t + r["cpu_s"], c + r["compiled"])
    for name, (n, t, c) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        print(f"{t:7.2f} s  {n} signature(s), {c} compiled  {name}")
    print(f"{sum(r['cpu_s'] for r in records):7.2f} s  in all ({len(records)} compilations or loads)")


if __name__ == "__main__":  # python -m minibert.tools.bench_coldstart: what a tiny step compiles, kernel by kernel
    print_compiles(compiles_of_tiny_step())
