"""GPU requirements: what the host has, pinning devices to sandboxes, and docker device requests.

Docker is imported only to make a device request: the GPU pool and the skip rule serve any backend.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import docker.types


def detect_gpus(env: Mapping[str, str], nvidia_smi: str = "nvidia-smi") -> list[str]:
    """Device ids of the host's GPUs. SWESERVE_GPUS ("0,1", or "" for none) overrides detection."""
    if "SWESERVE_GPUS" in env:
        return [g.strip() for g in env["SWESERVE_GPUS"].split(",") if g.strip()]
    try:
        out = subprocess.run(
            [nvidia_smi, "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        )
    except (FileNotFoundError, PermissionError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def skip_reason(gpus_needed: int, host_gpus: list[str]) -> str | None:
    """Why a task cannot run on this host, or None when it can."""
    if gpus_needed > len(host_gpus):
        return f"needs {gpus_needed} GPUs (host has {len(host_gpus)})"
    return None


def device_requests(device_ids: list[str]) -> list[docker.types.DeviceRequest]:
    """What `docker run --gpus '"device=0,1"'` sends; nothing for a CPU-only sandbox."""
    if not device_ids:
        return []
    import docker.types

    return [docker.types.DeviceRequest(device_ids=list(device_ids), capabilities=[["gpu"]])]


class GpuPool:
    """Hands out distinct device ids to concurrent sandboxes; acquire blocks until enough are free."""

    def __init__(self, device_ids: list[str]):
        self._free = list(device_ids)
        self._size = len(device_ids)
        self._cond = threading.Condition()

    def acquire(self, n: int, timeout: float | None = None) -> list[str]:
        if n > self._size:
            raise ValueError(f"needs {n} GPUs, pool has {self._size}")
        if n == 0:
            return []
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._free) >= n, timeout=timeout):
                raise TimeoutError(f"no {n} free GPUs within {timeout}s")
            taken, self._free = self._free[:n], self._free[n:]
            return taken

    def release(self, ids: list[str]) -> None:
        if not ids:
            return
        with self._cond:
            self._free.extend(ids)
            self._cond.notify_all()
