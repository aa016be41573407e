"""Stopping the embedded PostgreSQL when the process is told to stop by a signal.

A signal whose default action is to terminate skips atexit, and PostgreSQL is not our child
(pg_ctl detaches it), so without this it would outlive us. Install before ``uvicorn.run``:
uvicorn replaces the handlers while it serves, and after its graceful shutdown puts the
previous ones back and raises the signal again, so ours runs last, once the app has closed
its connections."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterable
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobq.embedded.server import EmbeddedPostgres

# SIGHUP: the terminal went away. (Windows has no SIGHUP.)
DEFAULT_STOP_SIGNALS: tuple[signal.Signals, ...] = tuple(
    s for s in (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", None)) if s is not None)

Handler = Callable[[int, FrameType | None], object] | int | None


def install_stop_on_signals(
    server: EmbeddedPostgres,
    signals: Iterable[signal.Signals] = DEFAULT_STOP_SIGNALS,
    *,
    exit_code: int | None = None,
) -> Callable[[], None]:
    """Make these signals stop ``server`` first. Then the previous handler runs (SIGINT's
    default raises KeyboardInterrupt), a default action is carried out (the process dies of
    the signal, which systemd and Docker count as a clean stop), or, with ``exit_code``,
    ``SystemExit(exit_code)`` is raised. Signals that are ignored (``nohup``, ``&`` in a
    script) stay ignored. Main thread only; call before ``uvicorn.run``. Returns a function
    that puts the previous handlers back."""
    previous: dict[int, Handler] = {}

    def handler(signum: int, frame: FrameType | None) -> None:
        if server.stopping:
            # A second signal while this thread is stopping the server: let that finish, the
            # process is already on its way out.
            return
        server.stop()
        if exit_code is not None:
            raise SystemExit(exit_code)
        before = previous.get(signum)
        if callable(before):
            before(signum, frame)
            return
        # SIG_DFL, or a handler not installed from Python (None): do what the signal would
        # have done without us.
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)

    for sig in signals:
        before = signal.getsignal(sig)
        if before == signal.SIG_IGN:
            continue
        previous[sig] = before
        signal.signal(sig, handler)

    def uninstall() -> None:
        for sig, before in previous.items():
            if signal.getsignal(sig) is handler:
                signal.signal(sig, before if before is not None else signal.SIG_DFL)

    return uninstall
