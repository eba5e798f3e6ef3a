"""The one heartbeat: a thread that calls `beat` every SWESERVE_HEARTBEAT_S seconds (default 30) while a long
step runs, so a silent step (a 7-minute pip install inside a build, a validation) never looks like a hang;
and the one clock that prints the time so far.

Used by the CLI's line progress (cli/common.py) and by image builds (environment/images.py).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

DEFAULT_INTERVAL_S = 30.0


def interval_s() -> float:
    """SWESERVE_HEARTBEAT_S, or 30 when it is unset or not a number."""
    try:
        return max(0.01, float(os.environ.get("SWESERVE_HEARTBEAT_S", DEFAULT_INTERVAL_S)))
    except ValueError:
        return DEFAULT_INTERVAL_S


def clock(seconds: float, hours: bool = True) -> str:
    """h:mm:ss (a run's progress); m:ss without hours (a build's lines, minutes long)."""
    m, s = divmod(int(seconds), 60)
    if not hours:
        return f"{m}:{s:02d}"
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}"


class Heartbeat:
    """`beat()` every `interval` seconds between entering and leaving the context, on a daemon thread."""

    def __init__(self, beat: Callable[[], None], interval: float | None = None, name: str = "sweserve-heartbeat"):
        self.beat = beat
        self.interval = interval_s() if interval is None else interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.beat()
