"""`python -m minibert ablate`: the studies' registry, resume (a finished cell never runs again),
the table and JSON, the verdict rule, clear errors for bad names; one real end-to-end run at the
smallest size (pretraining + fine-tuning on a synthetic corpus)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from corpora import SPECIALS, TOPICS, TRAIN_TOPICS, topic_corpus, write_vocab

from minibert.loop import rundir
from minibert.tools import ablate as A
from minibert.tools import ablate_report as R


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A tiny corpus, its vocabulary, and a data root whose nextsent/ holds the same corpus."""
    d = tmp_path_factory.mktemp("ablate")
    nextsent = d / "root" / "nextsent"
    nextsent.mkdir(parents=True)
    topic_corpus(nextsent / "train.txt", 40, 0, sentences=(4, 8))
    topic_corpus(nextsent / "heldout.txt", 12, 1, sentences=(4, 8))
    words = sorted({x for t in TRAIN_TOPICS for x in TOPICS[t]} | {"the", "a", "on", "with", "."})
    write_vocab(d / "vocab.txt", SPECIALS + words)
    return {"corpus": (str(nextsent / "train.txt"),), "heldout": (str(nextsent / "heldout.txt"),),
            "vocab": str(d / "vocab.txt"), "data_cache": str(d / "cache"), "root": str(d / "root")}


def _plan(files, out, **kw) -> A.Plan:
    settings = {k: files[k] for k in ("corpus", "heldout", "vocab", "data_cache")}
    base = dict(study="tasks", out=str(out), minutes=0.05, seeds=(0, 1), tasks=("nextsent",), data_root=files["root"],
                pretrain_settings=settings, verbose=False)
    if kw.get("study", "tasks") == "tasks":  # the three variants these tests were written for (not + BiLSTM)
        base["variants"] = ("bert", "no-nsp", "ltr")
    base.update(kw)
    return A.Plan(**base)


class Fake:
    """Stands in for pretraining and fine-tuning: records the calls, scores by a rule."""

    def __init__(self, scores):
        self.scores, self.pretrained, self.finetuned = scores, [], []

    def pretrain(self, plan, variant, seed, run_dir):
        self.pretrained.append((variant.name, seed))
        return {"steps": 10, "total_steps": 10, "status": "budget", "seconds": 1.0, "heldout_lm_acc": 0.1 + 0.01 * seed,
                "heldout_nsp_acc": 0.5}

    def finetune(self, plan, model_dir, d, seed, out, extra=()):
        variant = out.parent.parent.name  # OUT/finetune/VARIANT/seed-S/TASK
        self.finetuned.append((variant, seed, d.name))
        return {"metric": "accuracy", "score": self.scores(variant, seed, d.name), "scores": {},
                "best_step": 1, "steps": 1, "total_steps": 1, "status": "done", "seconds": 0.1, "frozen": None}


@pytest.fixture
def fake(monkeypatch):
    table = {"bert": 0.60, "no-nsp": 0.50, "ltr": 0.40, "ltr-bilstm": 0.45, "scratch": 0.30}
    f = Fake(lambda v, s, t: table[v] + 0.01 * s)
    monkeypatch.setattr(A, "pretrain", f.pretrain)
    monkeypatch.setattr(A, "finetune", f.finetune)
    monkeypatch.setattr(A, "constant_baseline", lambda plan, d, vocab: {"answer": "choice 0", "metric": "accuracy",
                                                                       "score": 0.25})
    return f


def test_ablate_run_writes_every_cell_and_the_table(fake, files, tmp_path):
    out = tmp_path / "abl"
    assert A.run(_plan(files, out)) == 0
    assert len(fake.finetuned) == 6 and sorted(set(fake.pretrained)) == sorted(
        (v, s) for v in ("bert", "no-nsp", "ltr") for s in (0, 1))
    assert len(list((out / "cells").glob("*.json"))) == 6
    r = json.loads((out / "results.json").read_text())
    bert = r["results"]["bert"]["nextsent"]
    assert bert["n"] == 2 and bert["scores"] == pytest.approx([0.60, 0.61])
    assert bert["mean"] == pytest.approx(0.605) and bert["min"] == pytest.approx(0.60)
    assert r["baselines"]["nextsent"]["score"] == pytest.approx(0.25)
    # differences of 0.10 against a seed spread of 0.01: both claims reproduced
    assert [c["verdict"] for c in r["claims"]] == [R.REPRODUCED, R.REPRODUCED]
    table = (out / "table.md").read_text()
    # no model file from the fake pretraining: parameters "-"; 1.0 s over 10 steps: 100 ms per step
    assert "| BERT (MLM + NSP) | - | 10 (10-10) | 100 | 10.5 (10.0-11.0) | 60.5 (60.0-61.0) |" in table
    assert "LTR: next token" in table
    assert "25.0 (always choice 0)" in table and (out / "plot.png").stat().st_size > 1000


def test_ltr_bilstm_fine_tunes_the_ltr_run_with_a_bilstm(fake, files, tmp_path, monkeypatch):
    """Table 5's "+ BiLSTM" row is the LTR model fine-tuned with a BiLSTM on top: its cells read
    the ltr variant's pretraining directory (no second run) and pass bilstm=True to fine-tuning."""
    calls = []
    real = fake.finetune

    def recording(plan, model_dir, d, seed, out, extra=()):
        calls.append((out.parent.parent.name, model_dir.parent.name, dict(extra)))
        return real(plan, model_dir, d, seed, out, extra)

    monkeypatch.setattr(A, "finetune", recording)
    out = tmp_path / "abl"
    assert A.run(_plan(files, out, seeds=(0,), variants=("ltr", "ltr-bilstm"))) == 0
    assert calls == [("ltr", "ltr", {}), ("ltr-bilstm", "ltr", {"bilstm": True})]
    # the paper's two BiLSTM claims are about different tasks: on nextsent only "hurts" is judged
    claims = json.loads((out / "results.json").read_text())["claims"]
    assert [(c["better"], c["worse"], c["task"]) for c in claims] == [("ltr", "ltr-bilstm", "nextsent")]
    assert A.STUDIES["tasks"].default_variants == ("bert", "no-nsp", "ltr", "ltr-bilstm", "scratch")


def test_every_study_has_the_random_init_control(fake, files, tmp_path, monkeypatch):
    """`scratch` fine-tunes `--init none` (no pretraining run) with the study's settings: a row
    whose pretraining columns are empty, the yardstick of what pretraining bought."""
    seen = []
    real = fake.finetune

    def recording(plan, model_dir, d, seed, out, extra=()):
        seen.append(str(model_dir))
        return real(plan, model_dir, d, seed, out, extra)

    monkeypatch.setattr(A, "finetune", recording)
    assert all(s.default_variants[-1] == "scratch" for s in A.STUDIES.values())
    out = tmp_path / "abl"
    assert A.run(_plan(files, out, seeds=(0,), variants=("bert", "scratch"))) == 0
    assert fake.pretrained == [("bert", 0)] and seen[1] == "none"
    row = next(line for line in (out / "table.md").read_text().splitlines() if line.startswith("| no pretraining"))
    assert row == "| no pretraining (random init) | - | 0 | - | - | 30.0 (1 seed) |"


def test_ablate_resume_skips_finished_cells(fake, files, tmp_path):
    out = tmp_path / "abl"
    A.run(_plan(files, out, seeds=(0,)))
    assert len(fake.finetuned) == 3
    fake.finetuned.clear()
    A.run(_plan(files, out, seeds=(0, 1)))  # one more seed: only its three cells run
    assert sorted(fake.finetuned) == [("bert", 1, "nextsent"), ("ltr", 1, "nextsent"), ("no-nsp", 1, "nextsent")]
    fake.finetuned.clear()
    A.run(_plan(files, out, seeds=(0, 1)))
    assert fake.finetuned == []


def test_ablate_interrupted_cell_loses_only_that_cell(fake, files, tmp_path, monkeypatch):
    out = tmp_path / "abl"
    real = fake.finetune

    def stop_at_third(plan, model_dir, d, seed, o, extra=()):
        if len(fake.finetuned) == 2:
            raise KeyboardInterrupt
        return real(plan, model_dir, d, seed, o)

    monkeypatch.setattr(A, "finetune", stop_at_third)
    with pytest.raises(KeyboardInterrupt):
        A.run(_plan(files, out, seeds=(0,)))
    assert len(list((out / "cells").glob("*.json"))) == 2
    monkeypatch.setattr(A, "finetune", real)
    fake.finetuned.clear()
    A.run(_plan(files, out, seeds=(0,)))
    assert [c[0] for c in fake.finetuned] == ["ltr"]


def test_ablate_refuses_other_settings_in_the_same_directory(fake, files, tmp_path):
    out = tmp_path / "abl"
    A.run(_plan(files, out, seeds=(0,)))
    with pytest.raises(ValueError, match="other settings.*minutes"):
        A.run(_plan(files, out, seeds=(0,), minutes=0.1))


def test_verdict_rule():
    s = R.summarize_scores
    a, b = s([0.60, 0.62], [0, 1]), s([0.50, 0.52], [0, 1])
    assert R.verdict(a, b)[0] == R.REPRODUCED
    assert R.verdict(b, a)[0] == R.REVERSED
    wide = s([0.40, 0.70], [0, 1])  # spread 0.30 > difference 0.04
    assert R.verdict(wide, b)[0] == R.NOT_DISTINGUISHABLE
    assert R.verdict(b, wide)[0] == R.NOT_DISTINGUISHABLE
    assert R.verdict(s([0.9], [0]), s([0.1], [0]))[0] == R.NOT_DISTINGUISHABLE  # one seed: no spread
    assert R.verdict(s([0.61, 0.62], [0, 1]), s([0.60, 0.61], [0, 1]))[0] == R.NOT_DISTINGUISHABLE  # equal to spread


@pytest.mark.parametrize("kw, message", [
    (dict(study="nsp"), "unknown study 'nsp'; choose one of tasks, masking, size, steps, family"),
    (dict(tasks=("nextsent", "mnli")), "unknown task\\(s\\) mnli"),
    (dict(variants=("bert", "gpt")), "study tasks: unknown variant\\(s\\) gpt"),
    (dict(tasks=("sst2",)), "task sst2 needs its data: a directory sst2 or SST-2"),
    (dict(minutes=0.0), "--minutes 0.0 must be > 0, or --steps"),
])
def test_ablate_bad_names_give_a_clear_error(files, tmp_path, kw, message):
    with pytest.raises(ValueError, match=message):
        A.run(_plan(files, tmp_path / "abl", **kw))
    assert not (tmp_path / "abl").exists()  # nothing written


def test_ablate_cli_bad_study_exits_1_with_one_line(capsys):
    from minibert.__main__ import main

    assert main(["ablate", "bogus", "--minutes", "1"]) == 1
    assert "unknown study 'bogus'" in capsys.readouterr().err
    assert main(["ablate", "tasks", "--minutes", "1", "--steps", "10"]) == 1
    assert "not both" in capsys.readouterr().err


def test_steps_mode_gives_every_variant_the_same_steps_and_its_warmup_share(files, tmp_path):
    plan = _plan(files, tmp_path, steps=400)
    for v in A.STUDIES["tasks"].variants:
        cfg = A.pretrain_config(plan, v, 1, tmp_path / "unused")
        assert (cfg.steps, cfg.minutes, cfg.warmup_steps, cfg.seed) == (400, 0.0, 28, 1)
    timed = A.pretrain_config(_plan(files, tmp_path, minutes=4.75), A.STUDIES["tasks"].variants[0], 0, tmp_path)
    assert timed.steps == 0 and timed.minutes == 4.75 and timed.warmup_steps == 100  # steps fitted to the
    # budget; half the recipe's 9.5 minutes: half its 200 warmup steps


def test_family_registry_skips_a_missing_preset_with_a_note(files, tmp_path, monkeypatch):
    monkeypatch.setattr(A, "STUDIES", {**A.STUDIES, "family": A.Study(
        "family", "t", A.STUDIES["family"].variants + (A.make_variant("nope", "Nope", preset="nope-tiny"),),
        ("bert", "nope"), ("nextsent",))})
    _, variants, _, notes = A.resolve(_plan(files, tmp_path / "x", study="family"))
    assert [v.name for v in variants] == ["bert"] and notes == ["Nope: skipped, minibert has no preset 'nope-tiny' yet"]


def test_every_study_resolves_with_its_defaults(files, tmp_path):
    for name, study in A.STUDIES.items():
        _, variants, downstream, _ = A.resolve(_plan(files, tmp_path / name, study=name, tasks=()))
        assert variants and [d.name for d in downstream] == list(study.default_tasks)
        for v in variants:  # every variant's settings are valid TrainConfig settings
            A.pretrain_config(_plan(files, tmp_path, study=name), v, 0, tmp_path / "unused").validate()


# ---------------------------------------------------------------------------------------------
# one real run, smallest size: pretrain two variants, fine-tune on nextsent, resume

SMALL = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
             max_position_embeddings=32, max_seq_length=32, max_predictions_per_seq=5, batch_size=8, dupe_factor=1,
             heldout_dupe_factor=1, warmup_steps=2, eval_examples=32, log_interval=5, eval_interval=1000,
             checkpoint_interval=1000)
FINETUNE = dict(epochs=1.0, max_train_examples=16, batch_size=8, max_seq_length=32)


def test_ablate_end_to_end_smallest(files, tmp_path):
    out = tmp_path / "abl"
    plan = _plan(files, out, seeds=(0,), variants=("bert", "ltr"), finetune_minutes=0.0, steps=6,
                 pretrain_settings={**_plan(files, out).pretrain_settings, **SMALL}, finetune_settings=FINETUNE)
    assert A.run(plan) == 0
    r = json.loads((out / "results.json").read_text())
    for v in ("bert", "ltr"):
        s = r["results"][v]["nextsent"]
        assert s["n"] == 1 and 0.0 <= s["mean"] <= 1.0
        cell = json.loads(A.cell_path(out, v, 0, "nextsent").read_text())
        assert cell["pretrain"]["status"] == "done" and cell["pretrain"]["steps"] == 6  # --steps: exactly
        assert (out / "pretrain" / v / "seed-0" / "model.safetensors").is_file()
    assert 0.0 < r["baselines"]["nextsent"]["score"] < 1.0
    assert "Pretraining 6 steps per variant and seed (equal steps)" in (out / "table.md").read_text()
    stamp = A.cell_path(out, "bert", 0, "nextsent").stat().st_mtime_ns
    assert A.run(plan) == 0  # everything done: nothing runs again
    assert A.cell_path(out, "bert", 0, "nextsent").stat().st_mtime_ns == stamp


def test_ablate_steps_study_snapshots_one_run_at_each_fraction(files, tmp_path, monkeypatch):
    """`steps`: one real pretraining run per seed, paused at 25/50/75/100% of its schedule; each
    snapshot is fine-tuned (faked here) from the model of its own step."""
    seen = []

    def fake_finetune(plan, model_dir, d, seed, out, extra=()):
        seen.append(json.loads((model_dir / A.SNAPSHOT_FILE).read_text())["steps"])
        assert (model_dir / "model.safetensors").is_file() and (model_dir / "vocab.txt").is_file()
        return {"metric": "accuracy", "score": 0.5, "scores": {}, "best_step": 1, "steps": 1, "total_steps": 1,
                "status": "done", "seconds": 0.1, "frozen": None}

    monkeypatch.setattr(A, "finetune", fake_finetune)
    monkeypatch.setattr(A, "constant_baseline", lambda plan, d, vocab: None)
    out = tmp_path / "steps"
    plan = _plan(files, out, study="steps", seeds=(0,), minutes=0.01, variants=("at-25", "at-50", "at-75", "at-100"),
                 pretrain_settings={**_plan(files, out).pretrain_settings, **SMALL, "steps": 8})
    assert A.run(plan) == 0
    total = json.loads(A.cell_path(out, "at-100", 0, "nextsent").read_text())["pretrain"]["total_steps"]
    assert total >= 4 and seen == sorted(seen) and len(set(seen)) == 4  # four different checkpoints, in order
    assert seen[-1] == total and seen[1] == round(total / 2)


def test_steps_study_snapshots_each_preset_in_its_own_run_and_plots_against_time(files, tmp_path, monkeypatch):
    """BERT's and ELECTRA's fractions of the `steps` study come from two runs per seed (one per
    preset), and the plot puts each preset's scores against its pretraining minutes."""
    runs = []

    def fake_snapshots(plan, v, seed, run_dir):
        runs.append((v.name, v.preset, run_dir.parent.name))
        snap = run_dir / v.name
        snap.mkdir(parents=True, exist_ok=True)
        minutes = 4 * v.fraction
        (snap / A.SNAPSHOT_FILE).write_text(json.dumps({"steps": round(100 * v.fraction), "total_steps": 100,
                                                         "status": "done", "seconds": 60 * minutes,
                                                         "heldout_lm_acc": 0.1, "heldout_nsp_acc": None}))
        return snap

    def fake_finetune(plan, model_dir, d, seed, out, extra=()):
        score = 0.3 + 0.1 * json.loads((model_dir / A.SNAPSHOT_FILE).read_text())["steps"] / 100
        return {"metric": "accuracy", "score": score + 0.01 * seed, "scores": {}, "best_step": 1, "steps": 1,
                "total_steps": 1, "status": "done", "seconds": 0.1, "frozen": None}

    monkeypatch.setattr(A, "pretrain_with_snapshots", fake_snapshots)
    monkeypatch.setattr(A, "finetune", fake_finetune)
    monkeypatch.setattr(A, "constant_baseline", lambda plan, d, vocab: None)
    out = tmp_path / "steps"
    plan = _plan(files, out, study="steps", variants=("at-50", "at-100", "electra-at-50", "electra-at-100"))
    assert A.run(plan) == 0
    assert {(p, d) for _, p, d in runs} == {("tiny", "steps"), ("electra-tiny", "steps-electra-tiny")}
    r = json.loads((out / "results.json").read_text())
    assert r["results"]["electra-at-50"]["_seconds"]["mean"] == pytest.approx(120.0)
    # both at 100% score 0.40 (+0.01 per seed): not distinguishable within the seed spread
    electra = next(c for c in r["claims"] if c["better"] == "electra-at-100")
    assert electra["verdict"] == R.NOT_DISTINGUISHABLE
    assert (out / "plot.png").stat().st_size > 1000


def test_an_ltr_model_is_fine_tuned_left_to_right(tmp_path, monkeypatch):
    """The paper fine-tuned its LTR model with the causal mask: a cell whose pretraining run
    recorded objective 'ltr' in run.json fine-tunes with causal=True, the others without."""
    import minibert.finetune.commands as C

    seen = []

    class Stop(Exception):
        pass

    def fake_build_run(cfg, *args, **kwargs):
        seen.append(cfg.causal)
        raise Stop

    monkeypatch.setattr(C, "build_run", fake_build_run)
    for objective in ("ltr", "mlm"):
        run = tmp_path / objective
        run.mkdir()
        rundir.write_run(run, "train", {"objective": objective})
        plan = A.Plan(study="tasks", out=str(tmp_path / "out"), minutes=1.0, seeds=(0,), tasks=("nextsent",))
        with pytest.raises(Stop):
            A.finetune(plan, run, A.DOWNSTREAM["nextsent"], 0, tmp_path / "ft" / objective)
    assert seen == [True, False]


def test_parameters_are_counted_from_the_pretrained_files(tmp_path):
    from safetensors.numpy import save_file

    run = tmp_path / "pretrain" / "electra" / "seed-1"
    (run / "generator").mkdir(parents=True)
    save_file({"a": np.zeros((3, 4), np.float32), "b": np.zeros(5, np.float32)}, str(run / "model.safetensors"))
    save_file({"g": np.zeros((2, 3), np.float32)}, str(run / "generator" / "model.safetensors"))
    by_name = {v.name: v for v in A.STUDIES["family"].variants}
    variants = [by_name["electra"], by_name["bert"]]  # bert has no files here
    assert R.parameters(tmp_path, variants, (0, 1)) == {"electra": {"model": 17, "generator": 6}}
    assert R._count({"model": 1_234_567, "generator": 300_000}) == "1.23M (+0.30M generator)"


def test_finetune_set_is_typed_and_refuses_what_the_ablation_owns():
    assert A.parse_finetune_set(["max_seq_length=64", "epochs=0.5"]) == pytest.approx({"max_seq_length": 64, "epochs": 0.5})
    with pytest.raises(ValueError, match="KEY one of epochs"):
        A.parse_finetune_set(["seed=3"])  # the ablation's seeds are its own
    with pytest.raises(ValueError, match="'x' is not a valid int"):
        A.parse_finetune_set(["batch_size=x"])


def test_a_failing_cell_is_recorded_and_the_others_run(fake, files, tmp_path, monkeypatch):
    real = fake.finetune

    def broken_for_ltr(plan, model_dir, d, seed, out, extra=()):
        if model_dir.parent.name == "ltr":
            raise KeyError("h0.attn.qkv.w")  # e.g. a model the fine-tuning code cannot read
        return real(plan, model_dir, d, seed, out)

    monkeypatch.setattr(A, "finetune", broken_for_ltr)
    out = tmp_path / "abl"
    assert A.run(_plan(files, out, seeds=(0,))) == 1  # one cell failed
    assert sorted(p.name for p in (out / "cells").iterdir()) == ["bert.seed-0.nextsent.json",
                                                                 "no-nsp.seed-0.nextsent.json"]
    failed = json.loads((out / "failed" / "ltr.seed-0.nextsent.json").read_text())
    assert failed["error"] == "KeyError: 'h0.attn.qkv.w'" and "broken_for_ltr" in failed["traceback"]
    assert "Failed cells" in (out / "table.md").read_text()
    monkeypatch.setattr(A, "finetune", real)
    assert A.run(_plan(files, out, seeds=(0,))) == 0  # the next run retries it
    assert not (out / "failed" / "ltr.seed-0.nextsent.json").exists()


def test_an_ablations_own_json_files_that_are_not_objects_are_one_error(tmp_path):
    """plan.json and a cell's record were read with json.loads and used as objects: a list was an
    AttributeError (issue 56's probe); they go through io/jsonfile like every run file."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "plan.json").write_text("[1]", encoding="utf-8")
    plan = A.Plan(study="tasks", out=str(out), minutes=1.0, seeds=(0,), tasks=("nextsent",))
    with pytest.raises(ValueError, match="plan.json must hold a JSON object, not list"):
        A._check_plan(plan, out)
    (out / "cells").mkdir()
    (out / "cells" / "a.json").write_text("[1]", encoding="utf-8")
    with pytest.raises(ValueError, match="a.json: not a cell record"):
        R.read_cells(out)
