"""The lessons as notebooks (`python -m minibert notebooks`, minibert/tools/notebooks.py): every lesson
converts to valid nbformat-4 JSON, a generated notebook executes headless with its pictures in
its outputs, and the lessons leave figures to the notebook (no forced Agg backend, no figure
closed before it is shown). Also the library's pictures: colour bars on attention maps
(minibert/analysis/inspect.py) and baselines on curves.png (minibert/train/curves.py)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from corpora import REPO

from minibert.tools import notebooks

ROOT = REPO
LESSONS = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.py"))
LESSON_SOURCES = [*LESSONS, ROOT / "lessons" / "course.py"]


def test_split_cells_reads_the_percent_format():
    source = ("# %% [markdown]\n# # Title\n#\n# Some *text*.\n\n# %%\nimport math\nx = 1\n\n\n"
              "# %% [markdown]\n# ## Next\n# %%\nprint(x)\n")
    assert notebooks.split_cells(source) == [
        ("markdown", "# Title\n\nSome *text*."), ("code", "import math\nx = 1"),
        ("markdown", "## Next"), ("code", "print(x)")]


@pytest.mark.parametrize("path", LESSONS, ids=[p.name for p in LESSONS])
def test_every_lesson_converts_to_nbformat_4(path: Path):
    source = path.read_text(encoding="utf-8")
    nb = json.loads(json.dumps(notebooks.to_notebook(source)))  # plain JSON
    assert nb["nbformat"] == 4 and nb["nbformat_minor"] == 5
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    cells = nb["cells"]
    assert len({c["id"] for c in cells}) == len(cells)
    assert cells[0]["cell_type"] == "markdown" and cells[0]["source"][0].startswith("# Lesson ")
    code = [c for c in cells if c["cell_type"] == "code"]
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    assert len(code) == len(re.findall(r"^# %%$", source, re.M))
    # the code of the notebook is the code of the script, cell by cell
    script_code = [line for line in source.splitlines() if line.strip() and not line.startswith("# ")
                   and line.strip() != "# %%" and line.strip() != "#"]
    nb_code = [line.rstrip("\n") for c in code for line in c["source"] if line.strip()]
    nb_code = [line for line in nb_code if not line.startswith("# ")]
    assert nb_code == script_code


def test_notebook_executes_headless_with_its_pictures(tmp_path):
    """Lesson 09 as a notebook, run by `python -m minibert notebooks --execute` with MPLBACKEND=Agg
    in the environment (as in `make`): every figure the lesson shows is an image in the outputs."""
    lesson = ROOT / "lessons" / "09_mlm_nsp_data.py"
    env = dict(os.environ, MINIBERT_FAST="1", MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, "-m", "minibert", "notebooks", "--execute", "09", "--out", str(tmp_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    nb = json.loads((tmp_path / "09_mlm_nsp_data.ipynb").read_text(encoding="utf-8"))
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    assert not [o for o in outputs if o["output_type"] == "error"]
    shows = len(re.findall(r"^show\(fig, ", lesson.read_text(encoding="utf-8"), re.M))
    assert shows == 2
    assert notebooks.count_images(nb) == shows
    text = "".join(o.get("text", "") for o in outputs if o["output_type"] == "stream")
    assert "lesson 09 passed" in text and "exercise 1, my_num_predictions: not written yet" in text
    # the picture sits in the cell that drew it, after that cell's printed text
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code" and "09_mlm_nsp_example.png" in "".join(c["source"]))
    assert [o["output_type"] for o in cell["outputs"]][-2:] == ["stream", "display_data"]
    assert len(cell["outputs"][-1]["data"]["image/png"]) > 10_000


def test_notebooks_command_writes_every_lesson(tmp_path):
    assert notebooks.cli(["--out", str(tmp_path)]) == 0
    assert sorted(p.stem for p in tmp_path.glob("*.ipynb")) == [p.stem for p in LESSONS]
    with pytest.raises(ValueError, match="no lesson matches 99"):
        notebooks.cli(["99", "--out", str(tmp_path)])


@pytest.mark.parametrize("path", LESSON_SOURCES, ids=[p.name for p in LESSON_SOURCES])
def test_lessons_leave_figures_to_the_notebook(path: Path):
    """No backend forced (a forced Agg hides every figure in Jupyter) and no figure closed before
    it is shown (course.show closes it only outside a notebook)."""
    source = path.read_text(encoding="utf-8")
    assert not re.search(r"matplotlib\.use\(|switch_backend\(", source), path.name
    if path.name != "course.py":
        assert "plt.close(" not in source, f"{path.name}: use course.show(fig, name), which closes it after showing"
        assert "savefig(" not in source, f"{path.name}: use course.show(fig, name), which saves it too"


def test_makefile_has_the_notebooks_target():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^notebooks:.*\n\t\$\(PYTHON\) -m minibert notebooks", makefile, re.M)


def test_a_real_jupyter_kernel_shows_the_pictures_too(tmp_path, monkeypatch):
    """Optional (skipped unless nbclient and ipykernel are installed): the same notebook run by
    Jupyter's own machinery, with matplotlib's inline backend."""
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    import nbformat

    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel picks the inline backend itself
    monkeypatch.setenv("MINIBERT_FAST", "1")
    nb = nbformat.reads(json.dumps(notebooks.to_notebook((ROOT / "lessons" / "04_embedding_sum.py").read_text())),
                        as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "lessons")}}).execute()
    images = sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert images == 1


# ---------------------------------------------------------------------------------------------
# pictures drawn by the library: colour bars on attention maps, baselines on curves.png


def test_attention_maps_have_colour_bars_marking_uniform_attention():
    from matplotlib.figure import Figure

    from minibert.analysis.inspect import AttentionMaps, draw_layer

    T = 5
    maps = np.full((1, 2, T, T), 1.0 / T)  # (L, NH, T, T): uniform attention
    fig = Figure()
    draw_layer(fig, AttentionMaps([f"t{i}" for i in range(T)], maps), 0)
    heads = [ax for ax in fig.axes if ax.get_title()]
    bars = [ax for ax in fig.axes if not ax.get_title()]
    assert len(heads) == 2 and len(bars) == 2
    assert all(ax.get_ylabel() == "attention weight" for ax in bars)
    marks = [line.get_ydata()[0] for ax in bars for line in ax.get_lines()]
    assert np.allclose(marks, 1.0 / T)  # the 1/T line on each colour bar


def test_curves_draw_the_constant_answer_baselines(tmp_path):
    from minibert.loop.curves import plot_curves
    from minibert.train.curves import WALL, baselines, pretraining_panels

    feats = {"masked_lm_ids": np.array([[7, 7, 3], [7, 2, 0]]),
             "masked_lm_weights": np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]]),  # 5 real predictions
             "next_sentence_labels": np.array([1, 1, 0, 1])}
    vocab = ["[PAD]", "a", "b", "c", "d", "e", "f", "the"]
    b = baselines(feats, vocab)
    assert b.mlm_token == "the" and abs(b.mlm_acc - 3 / 5) < 1e-12
    assert b.nsp_label == "random-next" and abs(b.nsp_acc - 3 / 4) < 1e-12
    metrics = tmp_path / "metrics.jsonl"
    rows = [{"type": "train", "step": s, "time": s / 10, "loss": 5.0, "mlm_loss": 4.5, "nsp_loss": 0.5,
             "mlm_acc": 0.1, "nsp_acc": 0.6, "lr": 1e-3} for s in (10, 20)]
    rows.append({"type": "eval", "step": 20, "time": 2.0, "mlm_acc": 0.1, "mlm_loss": 4.4, "nsp_acc": 0.6})
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert plot_curves(metrics, tmp_path / "curves.png", pretraining_panels(b), WALL).stat().st_size > 10_000
    panels = pretraining_panels()  # no held-out set: the chance line only
    assert [len(p.lines) for p in panels] == [0, 0, 1, 0] and panels[2].lines[0][:2] == (0.5, "chance: 50%")
    assert plot_curves(metrics, tmp_path / "plain.png", panels, WALL).stat().st_size > 10_000
