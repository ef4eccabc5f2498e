"""The package imports one way, and its folders are its layers.

LAYERS lists every module of minibert from the bottom up. A module may import only modules
listed before it (function-level imports included), so there is no cycle and no upward import.
The modules at the package root are the ones the lessons import (`minibert.layers`,
`minibert.model`, ...): they are two layers, the reference "(reference)" below kernels/ and the
model "(root)" above it (FLOORS), above io/ and below family/; the command
line and the package's lazy re-exports (`__main__`, `__init__`) are the top layer, "(entry)".
Every layer's modules stand together in LAYERS, so a layer never imports a later one, and no two
layers import each other. docs/architecture.md draws the same order (tests/meta/test_docs.py keeps the two equal).
"""
from __future__ import annotations

import ast
from pathlib import Path
from minibert.io.paths import repo_root

ROOT = repo_root()
PACKAGE = ROOT / "minibert"

# bottom to top; a module may import any module of an earlier entry
LAYERS = [
    "native", "native.blas", "native.malloc",  # what talks to the machine: OpenBLAS, glibc's malloc
    "io", "io.paths", "io.textio", "io.escape", "io.jsonfile", "io.atomic", "io.outputs", "io.progress", "io.tensorfile", "io.hub", "io.cli",  # the repository's place, text, JSON, atomic writes, output paths, safetensors, every command's parser
    "text", "text.tokenizer", "text.wordpiece_trainer",  # BERT's tokenizer; learning a vocab.txt
    "philox", "layers",  # dropout's random stream, the layer math: the reference the kernels reproduce
    "kernels.runtime", "kernels.vector_math", "kernels.dropout", "kernels.attention", "kernels.elementwise",
    "kernels.normalisation", "kernels.embedding", "kernels.cross_entropy", "kernels.optimizer", "kernels",  # the Numba kernels by family
    "backend", "optim",  # the backend switch, AdamW
    "model", "checkpoint", "bert",  # BERT's forward and backward, no I/O; its transformers directories; the class
    "kernels.compile_ahead",  # the kernels compiled ahead of a step's first call, in several processes
    "dev", "dev.attention_v1", "dev.attention_v3",  # development versions of the kernels (attention v1, v3)
    "data", "data.corpus", "data.pretraining_data", "data.shards",  # the default corpus; the MLM/NSP generator; shards
    "analysis", "analysis.gradcheck", "analysis.inspect", "analysis.nsp_baseline",  # gradients; inside a model; NSP cue
    "family", "family.albert", "family.electra", "family.xlnet", "family.t5", "family.t5_data", "family.flops",
    "family.gradchecks",  # BERT's successors: the models only
    "taskdata", "taskdata.readers", "taskdata.tasks", "taskdata.squad_files", "taskdata.split",  # the tasks' files, below both halves
    "loop", "loop.rundir", "loop.settings", "loop.curves", "loop.step", "loop.budget", "loop.state", "loop.checkpoints", "loop.engine", "loop.launch",  # the one training loop every trainer runs, and the life of a run around it
    "finetune", "finetune.bilstm", "finetune.heads", "finetune.models", "finetune.albert_tasks",
    "finetune.electra_tasks", "finetune.registry", "finetune.frozen", "finetune.gradchecks", "finetune.metrics",
    "finetune.features", "finetune.task_data", "finetune.squad_eval", "finetune.squad", "finetune.run",
    "finetune.squad_run", "finetune.recipes", "finetune.evaluate", "finetune.model_card", "finetune.commands",  # BERT's second half, from the heads to the command
    "train", "train.config", "train.runs", "train.data", "train.task_corpus", "train.evaluation", "train.pretraining_step", "train.curves",
    "train.electra", "train.trainer", "train.pretrain", "train.commands", "train.t5", "train.t5_command",
    "train.xlnet", "train.xlnet_command",  # pretraining runs and their commands
    "tools", "tools.gradcheck_table", "tools.look_inside", "tools.pipelines", "tools.ablate_studies",
    "tools.ablate_report", "tools.ablate", "tools.export_data", "tools.bench_text", "tools.bench_data",
    "tools.bench_profile", "tools.bench_sst2", "tools.bench_common", "tools.bench_step", "tools.bench_attention",
    "tools.bench_finetune", "tools.bench_startup", "tools.bench_coldstart", "tools.bench_spam", "tools.bench",
    "tools.notebooks",  # the other commands
    "__main__", "",  # the command line; "" is the package root (lazy re-exports, no imports)
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


ENTRY = ("__main__", "")  # the command line and the package's lazy re-exports: the top layer


# Two floors are not a folder's. The root holds the reference the kernels reproduce (philox,
# layers) below kernels/ and the model that runs on them above it: the lessons import both by
# their short paths. And kernels/compile_ahead.py, in the kernels' room by what it is about (their
# registry and Numba's cache), runs a tiny model step to list the kernels it calls, so it stands
# above the model.
FLOORS = {"philox": "(reference)", "layers": "(reference)", "kernels.compile_ahead": "(compile-ahead)"}


def folder(name: str) -> str:
    """The layer a module belongs to: its subfolder (a package's own __init__ belongs to it),
    "(root)" for the modules at the package root, "(entry)" for ENTRY; FLOORS' own floors."""
    if name in ENTRY:
        return "(entry)"
    if name in FLOORS:
        return FLOORS[name]
    if "." in name:
        return name.split(".")[0]
    return name if (PACKAGE / name).is_dir() else "(root)"


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
        spans.setdefault(folder(name), []).append(i)
    split = {f: [LAYERS[j] for j in range(idx[0], idx[-1] + 1) if folder(LAYERS[j]) != f]
             for f, idx in spans.items()}
    assert not any(split.values()), {f: between for f, between in split.items() if between}


def test_no_two_folders_import_each_other():
    found = modules()
    edges = {(folder(name), folder(dep)) for name, path in found.items() for dep in imports(path, set(found))
             if folder(name) != folder(dep)}
    assert not [(a, b) for a, b in edges if (b, a) in edges]


def test_the_rules_catch_an_upward_import(tmp_path):
    source = (PACKAGE / "model.py").read_text(encoding="utf-8") + \
        "\n\ndef _f():\n    from minibert.checkpoint import save_pretrained\n"
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    assert "checkpoint" in imports(tmp_path / "m.py", {"checkpoint", "model"})
    assert LAYERS.index("checkpoint") > LAYERS.index("model")


def test_the_root_is_one_layer_and_every_module_has_one():
    assert all(folder(name) for name in LAYERS)
    for floor, member in (("(root)", "model"), ("(reference)", "layers")):
        root = [i for i, name in enumerate(LAYERS) if folder(name) == floor]
        assert root == list(range(root[0], root[-1] + 1)) and member in [LAYERS[i] for i in root]
    assert LAYERS.index("layers") < LAYERS.index("kernels") < LAYERS.index("backend")


def test_the_package_lists_every_root_module_and_folder():
    import minibert

    on_disk = {p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("__")} | \
        {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert set(minibert._SUBMODULES) == on_disk, sorted(set(minibert._SUBMODULES) ^ on_disk)


def test_only_the_kernels_room_imports_numba():
    """Numba is the kernels' business: kernels/ (compile_ahead.py included) and the development
    versions in dev/. The reference (layers.py) and everything else run on NumPy."""
    found = modules()
    users = set()
    for name, path in found.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n.split(".")[0] in ("numba", "llvmlite") for n in names):
                users.add(name)
    assert users and all(u.startswith(("kernels.", "dev.")) for u in users), sorted(users)
