"""--resume takes one form on every training command: the run's folder (io/cli.run_options)."""
from __future__ import annotations

import pytest

from minibert.__main__ import main


@pytest.mark.parametrize("command", ["train", "train-tiny", "train-t5", "train-xlnet", "finetune"])
def test_every_training_command_takes_resume_run_dir(command, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0 and "--resume RUN_DIR" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:  # the folder is not optional anywhere (train-tiny's was a flag)
        main([command, "--resume"])
    assert e.value.code == 2 and "--resume: expected one argument" in capsys.readouterr().err
    assert main([command, "--resume", str(tmp_path / "nothing")]) == 1  # no run there: one line naming it
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "nothing" in err[0]
