"""Host-side deadlines: the clock a process inside a sandbox cannot stop.

Any deadline kept inside a sandbox (`timeout`, a shell's countdown) is a process there, and the candidate is
root there: a SIGSTOP to every process, the one keeping time included, and that deadline never comes. A
`Deadline` is a timer in the harness's own process. At its time it calls the sandbox's `kill` (for Docker,
`docker kill`: the kernel ends every process of the container, stopped and frozen ones too), whatever
happens inside; if the waiting call still has not returned a little later, it calls `close` (e.g. shuts the
exec stream the harness reads), so the harness's wait ends even when the engine never closes it.

So a command, a hidden-test run or a human session takes at most its limit plus `GRACE_S` plus the time
the engine takes to kill a container: the inside timeout normally ends it first, and the host's is the
one that cannot be stopped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

GRACE_S = 5.0  # after the limit, before the host kills the sandbox (the inside timeout normally acts first)
CLOSE_AFTER_S = 5.0  # after the kill, before the waiting call's stream is shut from the host


class Deadline:
    """Calls `kill` once `limit + grace` seconds have passed, unless the `with` block ended first; then `close`
    if the block is still running `close_after` seconds later. `fired` says whether the deadline came."""

    def __init__(self, limit: float, kill: Callable[[], None], close: Callable[[], None] | None = None,
                 grace: float = GRACE_S, close_after: float = CLOSE_AFTER_S, name: str = "deadline"):
        self.seconds = max(0.0, limit) + grace
        self.kill, self.close, self.close_after = kill, close, close_after
        self.fired = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Deadline:
        self._thread.start()
        return self

    def cancel(self) -> None:
        self._done.set()

    def _run(self) -> None:
        if self._done.wait(self.seconds):
            return
        self.fired = True
        _quietly(self.kill, "killing the sandbox at its deadline")
        if self.close is not None and not self._done.wait(self.close_after):
            _quietly(self.close, "closing the stream of a killed sandbox")

    def __enter__(self) -> Deadline:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.cancel()


def _quietly(action: Callable[[], None], what: str) -> None:
    """A failed kill must not end the watchdog's thread unseen: it is logged; the close still comes."""
    try:
        action()
    except Exception as exc:  # noqa: BLE001 - a watchdog thread has no caller to raise to
        log.warning("%s failed: %s: %s", what, exc.__class__.__name__, exc)
