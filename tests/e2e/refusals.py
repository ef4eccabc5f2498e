"""What the e2e tests of bad input share: the words of the fixtures' vocabulary, the fine-tuning
command a paused run comes from, and the checks that a command refused its input in one `error:`
line and changed nothing it was not told to write (tests/e2e/conftest.py builds the fixtures)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from minibert.__main__ import main
from minibert.finetune.models import BertForQuestionAnswering
from minibert.model import BertConfig

WORDS = ["good", "great", "fun", "bad", "awful", "dull", "film", "plot", "the", "was", "paris", "john", "visited"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
FT = ["finetune", "custom", "--format", "glue-single", "--data", "{w}/sst", "--init", "{w}/pre", "--out", "{w}/ft",
      "--epochs", "1", "--batch-size", "8", "--max-seq-length", "16", "--quiet"]


def squad_json(questions):
    return {"version": "v2.0", "data": [{"title": "t", "paragraphs": [
        {"context": ctx, "qas": [{"id": qid, "question": q, "is_impossible": False,
                                  "answers": [{"text": a, "answer_start": s}]}]}
        for qid, q, ctx, a, s in questions]}]}


def listing(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def run_refused(work: Path, argv: list, expected: str, capsys, writes: str | None = None, code: int = 1):
    """Run `argv` (strings with {w} for the work folder): it must fail with one error line holding
    `expected`, and change nothing under `work` but the folder `writes` (relative to it)."""
    before = listing(work)
    rc = main([str(a).format(w=work) for a in argv])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == code, (rc, err)
    assert "Traceback" not in err
    assert len(lines) >= 1 and lines[-1].startswith("error:"), err
    assert expected in lines[-1], lines[-1]
    after = listing(work)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    if writes is not None:
        changed = {k for k in changed if not k.startswith(writes + "/")}
    assert not changed, sorted(changed)


def edit_json(path: Path, **changes) -> None:
    d = json.loads(path.read_text(encoding="utf-8"))
    d.update(changes)
    path.write_text(json.dumps(d), encoding="utf-8")


def read_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def refused(work: Path, decoy: Path, argv: list, expected: str, capsys, writes: str | None = None, code: int = 1):
    """run_refused (one error line, nothing changed in `work` but `writes`), and the decoy unchanged."""
    before = listing(decoy)
    run_refused(work, argv, expected, capsys, writes=writes, code=code)
    assert listing(decoy) == before
    assert sorted(p.name for p in decoy.iterdir()) == ["step-000001", "target.txt"]


def qa_model(directory: Path) -> None:
    """A SQuAD model on the tiny pretrained directory's config (untrained: predictions are noise)."""
    cfg = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=64)  # tiny_pretrained's shape
    BertForQuestionAnswering(cfg, seed=0).save_pretrained(directory, vocab=VOCAB)
