"""io/outputs' door for files inside an output folder: inside_output, make_dir, write_output with
`root`, save_arrays and replace_dir refuse a symbolic link or a special file on the way, and
write atomically (tests/e2e/test_one_door_commands.py has the commands' cases)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from minibert.io import outputs


def test_inside_output_refuses_links_on_the_way_and_special_files(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    assert outputs.inside_output(out, out / "a" / "b.txt") == out / "a" / "b.txt"  # missing folders are fine
    os.symlink(elsewhere, out / "a")
    with pytest.raises(ValueError, match=r"out/a is a symbolic link"):
        outputs.inside_output(out, out / "a" / "b.txt")
    os.mkfifo(out / "pipe")
    with pytest.raises(ValueError, match="is a special file"):
        outputs.inside_output(out, out / "pipe")
    (out / "dir").mkdir()
    with pytest.raises(ValueError, match="is a folder"):
        outputs.inside_output(out, out / "dir")
    with pytest.raises(ValueError, match="leaves"):
        outputs.inside_output(out, out / ".." / "x")
    with pytest.raises(ValueError, match="lies outside"):
        outputs.inside_output(out, elsewhere / "x")


def test_write_output_inside_a_root_writes_nothing_through_a_link(tmp_path):
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    out.mkdir()
    victim.write_text("keep", encoding="utf-8")
    os.symlink(victim, out / "f.txt")
    with pytest.raises(ValueError, match="is a symbolic link"):
        outputs.write_output(out / "f.txt", "new", root=out)
    with pytest.raises(ValueError, match="is a symbolic link"):
        outputs.write_output(out / "f.txt", "new")  # without a root too: the link itself is refused
    assert victim.read_text(encoding="utf-8") == "keep" and (out / "f.txt").is_symlink()
    outputs.write_output(out / "sub" / "g.txt", "made", root=out)  # its folder is made
    assert (out / "sub" / "g.txt").read_text(encoding="utf-8") == "made"


def test_make_dir_refuses_a_link(tmp_path):
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    with pytest.raises(ValueError, match="is a symbolic link"):
        outputs.make_dir(tmp_path / "link")
    with pytest.raises(ValueError, match="is a symbolic link"):
        outputs.make_dir(tmp_path / "link" / "x", root=tmp_path)
    assert not (tmp_path / "real" / "x").exists()


def test_save_arrays_and_replace_dir(tmp_path):
    out = tmp_path / "out"
    path = outputs.save_arrays(out / "a.npz", {"x": np.arange(3)}, root=tmp_path)
    with np.load(path) as f:
        assert f["x"].tolist() == [0, 1, 2]
    assert [p.name for p in out.iterdir()] == ["a.npz"]  # no temporary file left
    tmp = tmp_path / ".new.tmp"
    tmp.mkdir()
    (tmp / "b.txt").write_text("b", encoding="utf-8")
    outputs.replace_dir(tmp, out, root=tmp_path)
    assert sorted(p.name for p in out.iterdir()) == ["b.txt"] and not tmp.exists()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "linked")
    tmp.mkdir()
    with pytest.raises(ValueError, match="is a symbolic link"):
        outputs.replace_dir(tmp, tmp_path / "linked", root=tmp_path)
    assert (tmp_path / "linked").is_symlink() and tmp.is_dir()


def test_atomic_write_refuses_a_link_at_the_target(tmp_path):
    """The lowest writer too: whatever called it, a link is neither written through nor replaced."""
    from minibert.io.atomic import atomic_write, write_text_atomic

    victim = tmp_path / "victim.txt"
    victim.write_text("keep", encoding="utf-8")
    os.symlink(victim, tmp_path / "link.txt")
    with pytest.raises(ValueError, match="is a symbolic link"):
        write_text_atomic(tmp_path / "link.txt", "new")
    with pytest.raises(ValueError, match="is a symbolic link"):
        atomic_write(tmp_path / "link.txt", lambda tmp: tmp.write_bytes(b"new"))
    assert victim.read_text(encoding="utf-8") == "keep" and (tmp_path / "link.txt").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.txt", "victim.txt"]  # no temporary file
