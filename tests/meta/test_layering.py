"""The package imports one way, and its folders are its layers.

LAYERS lists every module of minibert from the bottom up. A module may import only modules
listed before it (function-level imports included), so there is no cycle and no upward import.
The modules at the package root are the ones the lessons import (`minibert.layers`,
`minibert.model`, ...); they are placed one by one. Every subfolder is a layer: its modules stand
together in LAYERS, so a folder never imports a later folder, and no two folders import each
other. docs/architecture.md draws the same order (tests/meta/test_docs.py keeps the two equal).
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "minibert"

# bottom to top; a module may import any module of an earlier entry
LAYERS = [
    "native", "native.blas", "native.malloc",  # what talks to the machine: OpenBLAS, glibc's malloc
    "layers", "kernels", "backend", "optim",  # the layer math, its Numba kernels, the backend switch, AdamW
    "model",  # BERT's forward and backward, no I/O
    "io", "io.textio", "io.jsonfile", "io.atomic", "io.outputs", "io.progress", "io.tensorfile", "io.hub", "io.checkpoint",  # text, atomic writes, safetensors, HF dirs
    "tokenizer", "wordpiece_trainer", "bert", "corpus",  # text; the model with its files; the default corpus
    "pretraining_data", "shards",  # the MLM/NSP generator; its shards on disk and the batches drawn from them
    "gradcheck", "inspect", "nsp_baseline",  # numerical gradients; looking inside a model; NSP's word-overlap cue
    "family", "family.albert", "family.electra", "family.xlnet", "family.t5", "family.t5_data", "family.flops",
    "family.gradchecks",  # BERT's successors: the models only
    "loop", "loop.rundir", "loop.settings", "loop.curves", "loop.step", "loop.budget", "loop.engine",  # the one training loop every trainer runs
    "finetune", "finetune.bilstm", "finetune.heads", "finetune.models", "finetune.albert_tasks",
    "finetune.electra_tasks", "finetune.registry", "finetune.frozen", "finetune.gradchecks", "finetune.metrics", "finetune.readers",
    "finetune.features", "finetune.tasks", "finetune.squad_eval", "finetune.squad", "finetune.run",
    "finetune.squad_run", "finetune.recipes", "finetune.evaluate", "finetune.commands",  # BERT's second half, from the heads to the command
    "train", "train.config", "train.runs", "train.data", "train.task_corpus", "train.evaluation", "train.curves",
    "train.trainer", "train.electra", "train.pretrain", "train.commands", "train.t5", "train.t5_command",
    "train.xlnet", "train.xlnet_command",  # pretraining runs and their commands
    "tools", "tools.attention_v1", "tools.gradcheck_table", "tools.look_inside", "tools.ablate_studies",
    "tools.ablate_report", "tools.ablate", "tools.export_data", "tools.bench_text", "tools.bench_data",
    "tools.bench_profile", "tools.bench_sst2", "tools.bench", "tools.notebooks",  # the other commands
    "__main__", "",  # the command line; "" is the package root (lazy re-exports, no imports)
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def folder(name: str) -> str | None:
    """The subfolder a module lives in (a package's own __init__ belongs to it); None at the root."""
    if "." in name:
        return name.split(".")[0]
    return name if (PACKAGE / name).is_dir() else None


def imports(path: Path, known: set[str]) -> set[str]:
    """minibert modules imported anywhere in the file (top level or inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "minibert":
            base = node.module[len("minibert"):].lstrip(".")
            for alias in node.names:  # `from minibert.loop import engine` imports a module
                sub = f"{base}.{alias.name}".lstrip(".")
                found.add(sub if sub in known else base)
        elif isinstance(node, ast.Import):
            found |= {a.name[len("minibert"):].lstrip(".") for a in node.names if a.name.split(".")[0] == "minibert"}
    return found


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def test_every_module_is_placed_and_imports_only_from_below():
    found = modules()
    assert set(found) == set(LAYERS), (sorted(set(found) - set(LAYERS)), sorted(set(LAYERS) - set(found)))
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = [f"minibert.{name or '(root)'} imports minibert.{dep}" for name, path in found.items()
              for dep in sorted(imports(path, set(found))) if dep != name and rank[dep] >= rank[name]]
    assert not upward, "\n".join(upward)


def test_each_folder_is_one_layer():
    """A folder's modules stand together in LAYERS: no folder reaches above itself and back."""
    spans: dict[str, list[int]] = {}
    for i, name in enumerate(LAYERS):
        if folder(name):
            spans.setdefault(folder(name), []).append(i)
    split = {f: [LAYERS[j] for j in range(idx[0], idx[-1] + 1) if folder(LAYERS[j]) != f]
             for f, idx in spans.items()}
    assert not any(split.values()), {f: between for f, between in split.items() if between}


def test_no_two_folders_import_each_other():
    found = modules()
    edges = {(folder(name), folder(dep)) for name, path in found.items() for dep in imports(path, set(found))
             if folder(name) and folder(dep) and folder(name) != folder(dep)}
    assert not [(a, b) for a, b in edges if (b, a) in edges]


def test_the_rules_catch_an_upward_import(tmp_path):
    source = (PACKAGE / "model.py").read_text(encoding="utf-8") + \
        "\n\ndef _f():\n    from minibert.io.checkpoint import save_pretrained\n"
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    assert "io.checkpoint" in imports(tmp_path / "m.py", {"io.checkpoint", "model"})
    assert LAYERS.index("io.checkpoint") > LAYERS.index("model")


def test_a_module_over_500_lines_says_why_at_its_top():
    """A long module is a choice, written down where a reader meets it (its docstring)."""
    unexplained = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > 500:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if "over 500 lines" not in doc:
                unexplained.append(f"{path.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    assert not unexplained, "modules over 500 lines without 'Why this module is over 500 lines' in their docstring: " + ", ".join(unexplained)
