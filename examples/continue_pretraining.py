"""Continue pretraining a minibert run with transformers' Trainer: on a CPU, one GPU or several.

    python -m minibert export-data runs/tiny --out runs/tiny/export/train.jsonl
    python examples/continue_pretraining.py runs/tiny runs/tiny/export/train.jsonl --out runs/tiny-hf

    # one GPU: the same command (Trainer uses the GPU when PyTorch sees one)
    # several GPUs on one machine, either launcher:
    torchrun --nproc_per_node 4 examples/continue_pretraining.py runs/tiny runs/tiny/export/train.jsonl --out runs/tiny-hf
    accelerate launch --num_processes 4 examples/continue_pretraining.py runs/tiny runs/tiny/export/train.jsonl --out runs/tiny-hf

This script is not part of minibert (minibert never imports torch): it needs the `interop`
extra (torch, transformers, accelerate). The model is transformers' own BertForPreTraining,
loaded from the run's config.json + model.safetensors; the data is minibert's MLM/NSP
instances (Google's generator) exported as JSON lines, with the names the model's forward
takes (input_ids, token_type_ids, attention_mask, labels, next_sentence_label). The loss is
the same as minibert's: mean MLM cross-entropy over the predicted positions + NSP cross-entropy.

The optimizer is BERT's recipe as far as Trainer offers it: AdamW with eps 1e-6, weight decay
0.01 (Trainer skips biases and LayerNorm weights, as BERT does), linear warm-up then linear decay,
gradient clipping at 1.0. The result is a transformers directory that minibert opens again:

    python -m minibert fill-mask runs/tiny-hf "a [MASK] is an immutable sequence of characters"
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch
from transformers import BertForPreTraining, BertTokenizer, Trainer, TrainingArguments

FIELDS = ("input_ids", "token_type_ids", "attention_mask", "labels", "next_sentence_label")


class JsonlDataset(torch.utils.data.Dataset):
    """One exported sequence per line -> a dict of int64 tensors (every line has the same length,
    so the default collator stacks them into a batch)."""

    def __init__(self, path: str | Path):
        self.rows = []
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, start=1):
                row = json.loads(line)
                missing = [k for k in FIELDS if k not in row]
                if missing:
                    raise ValueError(f"{path} line {n} lacks {missing}; write it with `python -m minibert export-data`")
                self.rows.append({k: torch.tensor(row[k], dtype=torch.long) for k in FIELDS})
        if not self.rows:
            raise ValueError(f"{path} holds no sequences")

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return self.rows[i]


def main(argv: list[str] | None = None) -> Path:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", help="a minibert run or any transformers BERT directory (config.json, "
                                   "model.safetensors, vocab.txt)")
    p.add_argument("data", help="JSON lines from `python -m minibert export-data`")
    p.add_argument("--out", required=True, help="where to save the continued model (a transformers directory)")
    p.add_argument("--max-steps", type=int, default=1000)
    p.add_argument("--batch-size", type=int, default=32, help="per device")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--warmup-steps", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    model = BertForPreTraining.from_pretrained(args.run_dir)
    training_args = TrainingArguments(
        output_dir=args.out, max_steps=args.max_steps, per_device_train_batch_size=args.batch_size,
        learning_rate=args.lr, warmup_steps=args.warmup_steps, lr_scheduler_type="linear",
        weight_decay=0.01, adam_epsilon=1e-6, max_grad_norm=1.0, seed=args.seed,
        logging_steps=max(1, min(50, args.max_steps // 10)), save_strategy="no", report_to=[],
        dataloader_drop_last=True, dataloader_pin_memory=torch.cuda.is_available())
    trainer = Trainer(model=model, args=training_args, train_dataset=JsonlDataset(args.data))
    trainer.train()
    trainer.save_model(args.out)  # config.json + model.safetensors (rank 0 only)
    if trainer.is_world_process_zero():  # the tokenizer, for transformers, and vocab.txt, for minibert
        BertTokenizer.from_pretrained(args.run_dir).save_pretrained(args.out)
        shutil.copyfile(Path(args.run_dir) / "vocab.txt", Path(args.out) / "vocab.txt")
    return Path(args.out)


if __name__ == "__main__":
    main()
