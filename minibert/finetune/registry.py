"""Which class fine-tunes which model: one registry of every encoder's task classes, keyed by
(model_type, head shape). `finetune --init DIR` picks the class for DIR's model type and the
task's shape (`task_class`); `predict` picks a saved fine-tuned model's class by the architecture
its config.json names (`TASK_ARCHITECTURES`). A new encoder's classes (finetune/models.py's
`TaskModel` on its `Encoder`) join by being listed here."""
from __future__ import annotations

from minibert.finetune import albert_tasks, electra_tasks, models

# One registry of the task classes of every encoder, keyed by config.json's model_type and the
# head shape (heads.SHAPES): `finetune --init DIR` picks the class for DIR's model type, and
# `predict` a saved fine-tuned model's class by its config.json's architecture.
TASK_CLASSES = {(cls.encoder.model_type, cls.head_shape): cls
                for family in (models.CLASSES, albert_tasks.CLASSES, electra_tasks.CLASSES) for cls in family.values()}
TASK_ARCHITECTURES = {cls.architecture: cls for cls in TASK_CLASSES.values()}
HEAD_SHAPE_OF_KIND = {"classification": "sequence", "regression": "sequence", "token": "token", "choice": "choice",
                      "qa": "qa"}  # a task's kind (finetune/task_data.py) -> the head it needs


def task_class(model_type: str, kind: str):
    """The class that fine-tunes a `model_type` model on a task of this kind (TASK_CLASSES)."""
    key = (model_type, HEAD_SHAPE_OF_KIND[kind])
    if key not in TASK_CLASSES:
        raise ValueError(f"model_type {model_type!r} has no fine-tuning classes; minibert fine-tunes "
                         f"{sorted({t for t, _ in TASK_CLASSES})}")
    return TASK_CLASSES[key]
