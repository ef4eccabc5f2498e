"""`python -m minibert.tools.warm_kernels`: compile the Numba kernels of a tiny training step
ahead of the first run, into Numba's cache (minibert/__pycache__).

`make venv` runs it once after installing, so that `make train-tiny` and the lessons on a fresh
clone start in seconds instead of compiling for half a minute first (docs/speed.md, "Cold
start"). What it runs is one training step of the tiny config (the shapes of train-tiny's
recipe: B 32, T 64, 10 predictions; dropout on) through `loop.step.training_step`, the function the trainer calls, so it
compiles the kernels that train-tiny's first step would, with the same signatures, and the
dropout kernels (train-tiny's recipe has no dropout; the lessons and fine-tuning do). A filled
cache makes it a one-second no-op; MINIBERT_BACKEND=numpy makes it one too (nothing compiles).
"""
from __future__ import annotations

import sys
import time

import numpy as np

TINY = dict(vocab_size=8192, hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512,
            max_position_embeddings=128)  # train-tiny's model (train/config.py's recipe)


def tiny_training_step(B: int = 32, T: int = 64, P: int = 10) -> float:
    """One training step of a tiny BERT on a random batch (dropout on) -> its loss."""
    from minibert import optim
    from minibert.bert import BertForPreTraining
    from minibert.gradcheck import random_batch
    from minibert.loop.step import training_step
    from minibert.model import BertConfig

    cfg = BertConfig(**TINY)
    rng = np.random.default_rng(0)
    model = BertForPreTraining(cfg, seed=0, dtype=np.float32)
    opt = optim.AdamW(model.params, lr=1e-4)
    batch = random_batch(cfg, B, T, P, rng)
    return training_step(model, opt, batch, 0, lr=1e-4, warmup_steps=10, total_steps=100, rng=rng).loss


def main(argv: list[str] | None = None) -> int:
    t0 = time.perf_counter()
    print("warming Numba's cache with a tiny training step (compiles once, about 30 s of one core; "
          "a no-op when the cache is filled)", file=sys.stderr, flush=True)
    tiny_training_step()
    print(f"Numba kernels compiled or loaded in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
