"""The package imports one way: every module of minibert imports only modules below it in
LAYERS, the order the README's file map draws (no cycle, no upward import, function-level
imports included)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# bottom to top; a module may import any module of an earlier entry
LAYERS = [
    # the layer math (blas: OpenBLAS via ctypes; malloc: glibc's settings), the optimizer
    "textio", "layers", "blas", "malloc", "kernels", "backend", "optim",
    "model",  # BERT's forward and backward, no I/O
    "finetune.bilstm",  # the BiLSTM (the feature-based tagger's and the LTR + BiLSTM ablation's)
    "finetune.heads",  # the fine-tuning heads' forward and backward
    "checkpoint", "run_dir",  # file formats: safetensors, config.json, atomic writes; run directories
    "tokenizer", "wordpiece_trainer", "corpus", "pretraining_data",  # text and pretraining data
    "bert",  # BertForPreTraining: the model with its checkpoints and tokenizer
    "finetune.models", "finetune.frozen",  # the fine-tuning classes; the feature-based tagger
    "family.albert",  # ALBERT: factorised embedding, one shared block, SOP
    "family.albert_finetune",  # ALBERT's encoder under transformers' four Albert* task heads (BERT's head math)
    "family.electra",  # ELECTRA: generator and discriminator with shared embeddings, replaced-token detection
    "family.t5", "family.t5_data",  # T5: encoder-decoder math (cross-attention, causal decoder); span corruption
    "family.electra_finetune",  # ELECTRA's discriminator under transformers' four Electra* task heads
    "family.flops",  # training FLOPs per step of BERT and of ELECTRA (generator + discriminator), from configs
    "family.xlnet",  # XLNet: factorisation orders as masks, two-stream attention, the permutation LM
    "finetune.metrics", "finetune.readers", "finetune.features", "finetune.tasks",  # task data and scoring
    "finetune.squad_eval", "finetune.squad",
    "gradcheck",  # numerical gradients for layers and the whole model
    "train.config", "train.data", "train.evaluation", "train.step", "train.engine", "train.curves",
    "train.calibrate", "train.runs", "train.loop", "train.electra", "inspect", "train.commands", "train",  # training, and looking inside
    "finetune.train", "finetune.squad_train", "finetune.commands",  # the fine-tuning loop and its commands
    "family.t5_loop",  # T5 on train/engine's loop: its model, batch source, held-out evaluation, budget fit
    "family.t5_train",  # train-t5: span-corruption pretraining and text-to-text SST-2
    "family.xlnet_loop",  # XLNet on train/engine's loop: its data windows, batch source, held-out evaluation, budget fit
    "family.xlnet_train",  # train-xlnet: the xlnet-tiny preset, its run directory and the command
    "ablate_studies", "ablate_report", "ablate",  # the ablations: the registry; table and verdicts; the cells
    "nsp_baseline", "export_data", "bench_text", "bench_data", "bench_profile", "bench", "notebooks",  # the other commands
    "finetune", "family",  # package docstrings only
    "__main__", "",  # the command line; "" is the package root (lazy re-exports, no imports)
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT / "minibert").with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, known: set[str]) -> set[str]:
    """minibert modules imported anywhere in the file (top level or inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "minibert":
            base = node.module[len("minibert"):].lstrip(".")
            for alias in node.names:  # `from minibert.train import calibrate` imports a module
                sub = f"{base}.{alias.name}".lstrip(".")
                found.add(sub if sub in known else base)
        elif isinstance(node, ast.Import):
            found |= {a.name[len("minibert"):].lstrip(".") for a in node.names if a.name.split(".")[0] == "minibert"}
    return found


def test_every_module_is_placed_and_imports_only_from_below():
    modules = {_module_name(p): p for p in (ROOT / "minibert").rglob("*.py")}
    assert set(modules) == set(LAYERS), (sorted(set(modules) - set(LAYERS)), sorted(set(LAYERS) - set(modules)))
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = [f"minibert.{name or '(root)'} imports minibert.{dep}" for name, path in modules.items()
              for dep in sorted(_imports(path, set(modules))) if dep != name and rank[dep] >= rank[name]]
    assert not upward, "\n".join(upward)


def test_the_rule_catches_an_upward_import(tmp_path):
    fake = ROOT / "minibert" / "model.py"
    source = fake.read_text(encoding="utf-8") + "\n\ndef _f():\n    from minibert.checkpoint import save_pretrained\n"
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    assert "checkpoint" in _imports(tmp_path / "m.py", {"checkpoint", "model"})
