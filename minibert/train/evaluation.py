"""Held-out evaluation: MLM accuracy, loss and perplexity over every real prediction, NSP
accuracy and loss over every pair, and NSP accuracy on each class."""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from minibert.bert import BertForPreTraining


class EvalResult(NamedTuple):
    mlm_acc: float
    mlm_loss: float
    perplexity: float
    nsp_acc: float
    nsp_loss: float
    examples: int
    nsp_acc_isnext: float  # NSP accuracy on the IsNext pairs (label 0) ...
    nsp_acc_random: float  # ... and on the random-next pairs (label 1): where the errors are


def evaluate(model: BertForPreTraining, feats: dict[str, np.ndarray], batch_size: int = 64,
             objective: str = "mlm_nsp") -> EvalResult:
    """MLM accuracy and loss over every real prediction (weights > 0), perplexity = exp(MLM loss),
    NSP accuracy and loss over every example, and NSP accuracy on each class. Dropout off. Fixed
    data in, same numbers out.
    objective "ltr": the mlm_* numbers are the left-to-right model's next-token accuracy and loss
    (over every real token with a real successor) and the NSP numbers 0 (it has no NSP). A run
    with objective "mlm" is evaluated with "mlm_nsp": the same MLM numbers, and the NSP numbers of
    its untrained NSP head (the chance level, for comparison)."""
    N = feats["input_ids"].shape[0]
    mlm_loss_sum = nsp_loss_sum = 0.0
    mlm_correct = mlm_count = nsp_correct = isnext_correct = isnext_count = 0
    for start in range(0, N, batch_size):
        batch = {k: v[start:start + batch_size] for k, v in feats.items()}
        _, _, m = model.loss_grads_metrics(batch, train=False, compute_grads=False,
                                           objective="ltr" if objective == "ltr" else "mlm_nsp")
        mlm_loss_sum += m.mlm_loss * m.mlm_count  # the batch loss is a mean over its predictions
        nsp_loss_sum += m.nsp_loss * m.nsp_count
        mlm_correct += m.mlm_correct
        mlm_count += m.mlm_count
        nsp_correct += m.nsp_correct
        isnext_correct += m.nsp_isnext_correct
        isnext_count += m.nsp_isnext_count
    mlm_loss = mlm_loss_sum / max(mlm_count, 1)
    random_count = N - isnext_count
    return EvalResult(mlm_correct / max(mlm_count, 1), mlm_loss, math.exp(min(mlm_loss, 700.0)),
                      nsp_correct / N, nsp_loss_sum / N, N, isnext_correct / max(isnext_count, 1),
                      (nsp_correct - isnext_correct) / max(random_count, 1))


def fmt_perplexity(p: float) -> str:
    return f"{p:.1f}" if p < 1e6 else f"{p:.2e}"  # exp(loss) of a diverged model has 300 digits
