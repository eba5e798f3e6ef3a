"""The package as a user gets it: a wheel holding its data, installed outside the checkout, runs the demo."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAPPED = {"harness/": "sweserve/harness/", "images/": "sweserve/images/"}  # pyproject's package-dir


def in_wheel(tracked: str) -> str:
    """Where a tracked file lands in the wheel: harness/ and images/ are mapped under sweserve/."""
    for folder, target in MAPPED.items():
        if tracked.startswith(folder):
            return target + tracked[len(folder):]
    return tracked


def package_files() -> list[str]:
    """Every tracked file the wheel must carry, under its name in the wheel: each module and data file of the
    package, and of harness/ and images/ at the root. Built from git, so a file or subpackage added later is
    checked too."""
    staged = subprocess.run(["git", "ls-files", "-s", "sweserve", *MAPPED], cwd=ROOT, check=True, capture_output=True,
                            text=True).stdout.splitlines()
    # the links sweserve/harness and sweserve/images (mode 120000) are not files: the wheel holds what they point at
    files = [in_wheel(line.split("\t", 1)[1]) for line in staged if not line.startswith("120000 ")]
    assert "sweserve/images/task/sweserve-tree" in files and "sweserve/harness/sweserve_boot.py" in files
    return files


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
                   check=True, capture_output=True, text=True)
    (path,) = out.glob("sweserve-*.whl")
    return path


def test_wheel_holds_the_package_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [d for d in package_files() if d not in names]
    assert missing == []


@pytest.mark.docker
@pytest.mark.slow
def test_installed_wheel_runs_the_demo_from_an_empty_folder(wheel, docker_client, tmp_path):
    venv = tmp_path / "venv"
    # nothing of the checkout on the path: with PYTHONPATH on it, pip finds the checkout's sweserve.egg-info,
    # calls sweserve "already installed" and installs no `sweserve` script
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], check=True, capture_output=True,
                   env=env)
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = subprocess.run([str(venv / "bin" / "sweserve"), "demo", "--runs", "1"], cwd=empty, env=env,
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "demo OK" in proc.stdout
    assert not (empty / "sweserve").exists()  # nothing of the checkout was needed
