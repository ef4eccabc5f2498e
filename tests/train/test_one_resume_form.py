"""--resume takes one form on every training command: the run's folder (io/cli.run_options)."""
from __future__ import annotations

import pytest

from minibert.__main__ import main

COMMANDS = ("train", "train-tiny", "train-t5", "train-xlnet", "finetune")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_training_command_takes_resume_run_dir(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    assert "--resume RUN_DIR" in capsys.readouterr().out


@pytest.mark.parametrize("command", COMMANDS)
def test_resume_without_its_folder_is_refused_naming_the_option(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--resume"])
    assert e.value.code == 2
    assert "--resume: expected one argument" in capsys.readouterr().err


@pytest.mark.parametrize("command", COMMANDS)
def test_resume_of_a_folder_with_no_run_is_one_error_line(command, tmp_path, capsys):
    assert main([command, "--resume", str(tmp_path / "nothing")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "nothing" in err[0]
