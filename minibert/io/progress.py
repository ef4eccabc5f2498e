"""Progress of long work, written for where it goes: one line updated in place on a terminal, and
whole lines at most every `log_every` seconds in a log file or a pipe (where `\\r` would join
every update into one unreadable line).

    progress = Progress("export", total=4020, unit="batches")
    for i in range(4020):
        ...
        progress.update(i + 1, f"{lines:,} sequences")   # "export: 50/4020 batches, 1,600 sequences, 1,336/s, ETA 2m58s"
    progress.done("wrote 128,640 sequences")
"""
from __future__ import annotations

import sys
import time
from typing import TextIO


def fmt_seconds(s: float) -> str:
    """12 -> 0m12s, 3725 -> 1h02m."""
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class Progress:
    """Counts `done` of `total` (0: unknown) units of work; see the module docstring.

    On a terminal (stream.isatty()) the line is redrawn at most `every` seconds apart; elsewhere
    a full line is written at most `log_every` seconds apart. The first and the last update are
    always shown. `clock` is time.perf_counter (a test passes a fake one)."""

    def __init__(self, what: str, total: int = 0, unit: str = "", stream: TextIO | None = None,
                 every: float = 0.25, log_every: float = 10.0, clock=time.perf_counter):
        self.what, self.total, self.unit = what, int(total), unit
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = every if self.tty else log_every
        self.clock = clock
        self.t0 = clock()
        self.last = -float("inf")
        self._open = False  # a terminal line was drawn and not yet ended

    def line(self, done: int, note: str = "") -> str:
        elapsed = self.clock() - self.t0
        count = f"{done:,}/{self.total:,}" if self.total else f"{done:,}"
        parts = [f"{count} {self.unit}".rstrip()]
        if note:
            parts.append(note)
        if elapsed > 0 and done:
            parts.append(f"{done / elapsed:,.0f} {self.unit or 'units'}/s")
        if self.total and done and done < self.total:
            parts.append(f"ETA {fmt_seconds(elapsed * (self.total - done) / done)}")
        else:
            parts.append(f"{fmt_seconds(elapsed)}")
        return f"{self.what}: " + ", ".join(parts)

    def update(self, done: int, note: str = "") -> None:
        now = self.clock()
        final = self.total and done >= self.total
        if not (final or done <= 1 or now - self.last >= self.every):
            return
        self.last = now
        text = self.line(done, note)
        if self.tty:
            self.stream.write("\r\033[K" + text)
            self._open = not final
            if final:
                self.stream.write("\n")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def done(self, message: str = "") -> None:
        """End the terminal line (if one is open) and print `message`, if any."""
        if self._open:
            self.stream.write("\n")
            self._open = False
        if message:
            self.stream.write(message + "\n")
        self.stream.flush()
