"""io/progress.py: one line redrawn on a terminal, whole lines at most every log_every seconds
elsewhere (a log file must not receive `\\r`-joined counters)."""
from __future__ import annotations

import io

from minibert.io.progress import Progress, fmt_seconds


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_a_log_file_gets_whole_lines_at_most_every_log_every_seconds():
    out, clock = io.StringIO(), Clock()
    bar = Progress("export", total=100, unit="batches", stream=out, log_every=10.0, clock=clock)
    for done in range(1, 101):
        clock.now = done * 0.5  # 0.5 s per batch: 50 s in all
        bar.update(done, f"{done * 32:,} sequences")
    bar.done("wrote 3,200 sequences")
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert lines[0] == "export: 1/100 batches, 32 sequences, 2 batches/s, ETA 0m50s"
    assert lines[-2] == "export: 100/100 batches, 3,200 sequences, 2 batches/s, 0m50s"
    assert lines[-1] == "wrote 3,200 sequences"
    assert len(lines) == 1 + 4 + 1 + 1  # the first, one per 10 s (10.5, 20.5, 30.5, 40.5 s), the last, the done line


def test_a_terminal_gets_one_line_redrawn_in_place_and_ended_once():
    out, clock = Tty(), Clock()
    bar = Progress("data", total=0, unit="documents", stream=out, every=0.25, clock=clock)
    for done in range(1, 11):
        clock.now = done * 0.1
        bar.update(done)
    bar.done()
    text = out.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n")  # one line, ended by done()
    assert text.count("\r\033[K") == 1 + 3  # the first update, then every 0.25 s (0.4, 0.7, 1.0 s)
    assert text.rsplit("\r\033[K", 1)[1] == "data: 10 documents, 10 documents/s, 0m01s\n"


def test_fmt_seconds():
    assert (fmt_seconds(12), fmt_seconds(75), fmt_seconds(3725)) == ("0m12s", "1m15s", "1h02m")
