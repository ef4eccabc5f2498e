"""examples/finetune_parity.py, the script behind docs/finetuning.md's table of minibert against
transformers: on a small model and a few steps it starts both sides from the same weights,
trains both on the same batches, and scores both, for a sequence task and a token task."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from corpora import tiny_pretrained  # noqa: E402
from minibert.io.paths import repo_root

ROOT = repo_root()
WORDS = ["good", "great", "fun", "bad", "awful", "dull", "film", "the", "was", "paris", "london", "@user"]


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    d = tmp_path_factory.mktemp("pre")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    tiny_pretrained(d, vocab)
    return d


def _sst2(root: Path) -> Path:
    rng = np.random.default_rng(0)
    d = root / "sst2"
    d.mkdir()
    for split, n in (("train", 48), ("dev", 16)):
        rows = ["sentence\tlabel"]
        for _ in range(n):
            label = int(rng.integers(2))
            rows.append(f"the film was {rng.choice(['good', 'great', 'fun'] if label else ['bad', 'awful', 'dull'])}\t{label}")
        (d / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return d


def _wnut(root: Path) -> Path:
    d = root / "wnut17"
    d.mkdir()
    sentence = "@user\tO\nthe\tO\nfilm\tO\nwas\tO\nin\tO\nparis\tB-location\n\n@user\tO\nlondon\tB-location\nwas\tO\ngood\tO\n\n"
    for split in ("train", "dev"):
        (d / f"{split}.conll").write_text(sentence * 8, encoding="utf-8")
    return d


@pytest.mark.parametrize("task,data", [("sst2", _sst2), ("wnut17", _wnut)])
def test_parity_script_trains_both_sides_from_the_same_start(task, data, pretrained, tmp_path):
    out = tmp_path / "parity.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "finetune_parity.py"), task, "--init", str(pretrained),
                           "--data", str(data(tmp_path)), "--lr", "1e-3", "--epochs", "2", "--batch-size", "8",
                           "--max-seq-length", "16", "--json", str(out)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["torch"]["encoder_load_max_abs_diff"] == 0.0  # transformers' from_pretrained = minibert's start
    steps = result["total_steps"]
    for side in ("minibert", "torch"):
        assert [e["step"] for e in result[side]["evals"]] == [steps // 2, steps]  # scored at the same steps
        assert 0.0 <= result[side]["final"] <= 1.0
    first_m, first_t = result["minibert"]["train_loss"][0][1], result["torch"]["train_loss"][0][1]
    assert abs(first_m - first_t) < 0.05 * abs(first_m)  # same start, same batches: the same first losses (dropout apart)
    assert "minibert: final" in proc.stdout and "torch: final" in proc.stdout
