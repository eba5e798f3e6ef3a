import stat
import threading
import time

import pytest

from sweserve.environment.docker_sandbox import run_kwargs
from sweserve.environment.gpus import GpuPool, detect_gpus, device_requests, skip_reason
from sweserve.models import Resources


def test_env_override_and_fake_nvidia_smi(tmp_path):
    assert detect_gpus({"SWESERVE_GPUS": "0, 3"}) == ["0", "3"]
    assert detect_gpus({"SWESERVE_GPUS": ""}) == []
    assert detect_gpus({}, nvidia_smi=str(tmp_path / "absent")) == []
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\n[ \"$1\" = --query-gpu=index ] && printf '0\\n1\\n'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    assert detect_gpus({}, nvidia_smi=str(fake)) == ["0", "1"]
    broken = tmp_path / "broken"
    broken.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2; exit 9\n")
    broken.chmod(0o755)
    assert detect_gpus({}, nvidia_smi=str(broken)) == []


def test_skip_reason_names_the_need():
    assert skip_reason(0, []) is None
    assert skip_reason(2, ["0", "1"]) is None
    assert skip_reason(2, ["0"]) == "needs 2 GPUs (host has 1)"


def test_device_requests_pin_devices():
    assert device_requests([]) == []
    (req,) = device_requests(["1", "3"])
    assert req["DeviceIDs"] == ["1", "3"] and req["Capabilities"] == [["gpu"]] and req["Count"] == 0
    kw = run_kwargs(Resources(gpus=2, cpus=64, memory_gb=8), ["1", "3"], host_cpus=2)
    assert kw["device_requests"][0]["DeviceIDs"] == ["1", "3"]
    assert kw["nano_cpus"] == 2_000_000_000 and kw["mem_limit"] == "8192m"
    assert run_kwargs(Resources(), [], host_cpus=2)["device_requests"] == []


def test_pool_hands_out_distinct_devices_and_blocks():
    pool = GpuPool(["0", "1", "2"])
    a = pool.acquire(2)
    with pytest.raises(TimeoutError):
        pool.acquire(2, timeout=0.05)
    got = []
    t = threading.Thread(target=lambda: got.append(pool.acquire(2)))
    t.start()
    time.sleep(0.05)
    assert not got
    pool.release(a)
    t.join(2)
    assert len(got[0]) == 2 and pool.acquire(0) == []
    with pytest.raises(ValueError):
        pool.acquire(4)
