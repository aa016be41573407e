"""The worker under test as a process: started with its environment, its output passed on
line by line (``worker| ...`` on the kit's stderr), signalled, and waited for.

It runs in a process group of its own, and signals go to the whole group, as a terminal's
Ctrl-C or a service manager's stop would: a worker started through a shell script (``bash
worker.sh``, ``npm start``) gets them in every process, the shell's children included.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TextIO


class WorkerProcess:
    def __init__(self, command: Sequence[str], env: Mapping[str, str], output: TextIO) -> None:
        self.command = list(command)
        self._env = dict(env)
        self._output = output
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self.started = 0.0

    def start(self) -> None:
        """Start it; ``OSError`` when the command cannot be run (no such program)."""
        self._proc = subprocess.Popen(self.command, env=self._env, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        self.started = time.monotonic()
        self._reader = threading.Thread(target=self._pass_output, name="conformance-worker-output",
                                        daemon=True)
        self._reader.start()

    def _pass_output(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for raw in self._proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            self._output.write(f"worker| {line}\n")
            self._output.flush()

    @property
    def exit_code(self) -> int | None:
        """None while it runs."""
        return self._proc.poll() if self._proc is not None else None

    def signal(self, sig: signal.Signals) -> None:
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, sig)

    def wait(self, timeout_s: float) -> int | None:
        """Its exit code once it has exited, or None if it still runs after ``timeout_s``."""
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace_s: float) -> None:
        """SIGTERM, then SIGKILL after ``grace_s``; whatever is left of its group is killed
        too, and its output is read to the end."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self.signal(signal.SIGTERM)
            if self.wait(grace_s) is None:
                self.signal(signal.SIGKILL)
                self._proc.wait()
        # Children it left behind (a shell's background job) would keep its output open.
        self.signal(signal.SIGKILL)
        if self._reader is not None:
            self._reader.join(2.0)
