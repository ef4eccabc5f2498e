"""One repository root, worked out in one place (io/paths.repo_root), and one rule for where runs
go: `runs/NAME` under the current directory, whichever command made the run."""
import re
import subprocess
import sys

import pytest

from minibert.io.paths import repo_root

# a path worked out from a module's own place: Path(__file__)... climbing one folder or more
CLIMB = re.compile(r"__file__\)(?:\.resolve\(\))?\.(?:parents\[\d+\]|parent\.parent)")


def test_the_root_is_the_repository():
    root = repo_root()
    assert (root / "minibert" / "__init__.py").is_file() and (root / "pyproject.toml").is_file()
    assert (root / "data").is_dir() and (root / "lessons").is_dir() and (root / "tests").is_dir()


def test_no_other_module_of_the_package_works_the_root_out():
    climbing = [p.relative_to(repo_root()).as_posix() for p in (repo_root() / "minibert").rglob("*.py")
                if CLIMB.search(p.read_text(encoding="utf-8"))]
    assert climbing == ["minibert/io/paths.py"], climbing


def test_the_climb_pattern_sees_the_usual_spellings():
    for line in ("ROOT = Path(__file__).resolve().parents[2]", "R = Path(__file__).parent.parent / 'data'",
                 "X = Path(__file__).resolve().parent.parent.parent"):
        assert CLIMB.search(line), line
    assert not CLIMB.search("HERE = Path(__file__).resolve().parent  # its own folder")


@pytest.mark.parametrize("command, run", [("train", None), ("train-t5", "t5-tiny"), ("train-xlnet", "xlnet-tiny")])
def test_a_run_without_out_goes_to_runs_under_the_current_directory(command, run, tmp_path):
    """Every command's default --out is runs/NAME relative to where it is started (train-xlnet's
    was <repository>/runs/NAME). The vocabulary is missing, so each stops before training, after
    taking its run folder's place."""
    (tmp_path / "c.txt").write_text("one sentence.\n", encoding="utf-8")
    before = set((repo_root() / "runs").glob("*")) if (repo_root() / "runs").is_dir() else set()
    out = subprocess.run([sys.executable, "-m", "minibert", command, "--corpus", "c.txt", "--heldout", "c.txt",
                          "--vocab", "missing.txt", "--steps", "1"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 1 and "missing.txt" in out.stderr, out.stderr
    assert (tmp_path / "runs").is_dir()
    if run is not None:
        assert f"-> runs/{run}" in out.stdout + out.stderr
    after = set((repo_root() / "runs").glob("*")) if (repo_root() / "runs").is_dir() else set()
    assert after == before  # nothing written beside the package
