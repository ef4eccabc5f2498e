"""minibert: BERT built from scratch in NumPy, with every gradient written by hand.

    from minibert import BertConfig, BertForPreTraining, BertTokenizer
    from minibert import BertForSequenceClassification, BertForTokenClassification
    from minibert import BertForMultipleChoice, BertForQuestionAnswering
    from minibert import pipeline       # pipeline("text-classification", model="runs/sst2")(["a witty film"])

The public names below are imported lazily (PEP 562 `__getattr__`): `import minibert` loads
neither NumPy nor Numba, so `python -m minibert --help` stays fast, and the OpenBLAS setting
below is still in place when something first needs NumPy. Submodules (`minibert.layers`,
`minibert.analysis.gradcheck`, ...) load on first attribute access too.

`train.pretrain.train` is exported as `pretrain`: `minibert.train` is the submodule, and after any
`import minibert.train` Python binds that name to the module, so a function of the same name
at the package root would be one or the other depending on import order.
"""
import importlib
import os

# OpenBLAS's idle threads spin for 2**28 cycles (~0.1 s) after each matmul before they sleep,
# and in a training step every matmul is followed by a Numba kernel that wants the same cores:
# with 2**4 cycles the tiny training step took 0.40-0.41 s instead of 0.44-0.48 s (2 cores).
# Read by OpenBLAS when NumPy loads it; if NumPy was imported first, `minibert.kernels.setup()` has
# OpenBLAS read it again (minibert.native.blas.apply_thread_timeout). An explicit setting
# in the environment wins.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

__version__ = "0.1.0"

# public name -> "submodule" or "submodule:attribute" (when the names differ)
_EXPORTS = {
    # the model and its checkpoints (transformers-readable directories)
    "BertConfig": "model", "BertForPreTraining": "bert",
    "load_pretrained": "bert", "save_pretrained": "checkpoint",
    # fine-tuning: the four task shapes, named as in transformers
    "BertForSequenceClassification": "finetune.models", "BertForTokenClassification": "finetune.models",
    "BertForMultipleChoice": "finetune.models", "BertForQuestionAnswering": "finetune.models",
    # the BERT family
    "AlbertConfig": "family.albert", "AlbertForPreTraining": "family.albert",
    "AlbertForSequenceClassification": "finetune.albert_tasks",
    "AlbertForTokenClassification": "finetune.albert_tasks",
    "AlbertForMultipleChoice": "finetune.albert_tasks", "AlbertForQuestionAnswering": "finetune.albert_tasks",
    "ElectraConfig": "family.electra", "ElectraForPreTraining": "family.electra",
    "ElectraForMaskedLM": "family.electra",
    "ElectraForSequenceClassification": "finetune.electra_tasks",
    "ElectraForTokenClassification": "finetune.electra_tasks",
    "ElectraForMultipleChoice": "finetune.electra_tasks", "ElectraForQuestionAnswering": "finetune.electra_tasks",
    # text
    "BertTokenizer": "text.tokenizer", "basic_tokenize": "text.tokenizer", "load_vocab": "text.tokenizer",
    "save_vocab": "text.tokenizer", "train_wordpiece": "text.wordpiece_trainer",
    "read_text": "io.textio", "iter_lines": "io.textio",
    # pretraining data
    "build_pretraining_data": "data.shards", "create_training_instances": "data.pretraining_data",
    "BatchIterator": "data.shards", "load_shards": "data.shards",
    "build_default_corpus": "data.corpus",
    # training
    "TrainConfig": "train.config", "make_config": "train.config", "pretrain": "train.pretrain:train",
    "Trainer": "train.trainer", "resume_config": "train.runs", "AdamW": "optim", "lr_at": "optim", "clip_by_global_norm": "optim",
    # looking inside
    "fill_mask": "analysis.inspect", "attention_maps": "analysis.inspect", "plot_attention": "analysis.inspect",
    "load_model_and_tokenizer": "tools.look_inside",
    # a saved model on your own text, as transformers' pipelines
    "pipeline": "tools.pipelines",
    # gradient checking
    "numerical_grad": "analysis.gradcheck", "compare": "analysis.gradcheck", "check_model": "analysis.gradcheck",
}
# every module and folder at the package root (tests/meta/test_package.py keeps this list whole)
_SUBMODULES = ("analysis", "backend", "bert", "checkpoint", "data", "dev", "family", "finetune",
               "io", "kernels", "layers", "loop", "model", "native", "optim", "philox", "taskdata", "text", "tools",
               "train")

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """Import the submodule that defines `name` on first use, and cache the result."""
    if name in _EXPORTS:
        module, _, attr = _EXPORTS[name].partition(":")
        value = getattr(importlib.import_module(f"{__name__}.{module}"), attr or name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _SUBMODULES:  # importing a submodule already binds it here
        globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS, *_SUBMODULES})
