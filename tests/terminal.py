"""Run a command with its stdout on a terminal (a pseudo-terminal of a given width), as a
person at a shell runs it: the CLI fits its tables to a terminal only, and prints values
whole into a pipe."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios
from pathlib import Path


def run_at_terminal(args: list[str], *, env: dict[str, str], cwd: Path, columns: int = 80,
                    timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """``args`` with stdout on a terminal ``columns`` wide (stderr captured apart, stdin
    empty). TERM=dumb: no colours, so the text is what a person reads."""
    main, other = pty.openpty()
    fcntl.ioctl(other, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen(args, cwd=cwd, env={**env, "COLUMNS": str(columns), "TERM": "dumb"},
                            stdin=subprocess.DEVNULL, stdout=other, stderr=subprocess.PIPE)
    os.close(other)
    chunks: list[bytes] = []
    try:
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:  # EIO: every writer of the terminal has closed it
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(main)
    assert proc.stderr is not None
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    code = proc.wait(timeout_s)
    # The terminal turns each "\n" into "\r\n".
    stdout = b"".join(chunks).decode().replace("\r\n", "\n")
    return subprocess.CompletedProcess(args, code, stdout, stderr)
