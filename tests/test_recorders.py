"""The in-sandbox recorders keep the whole failure message (bounded), so accelerator signs anywhere in it count.

Both recorders (grading's pytest plugin and unittest runner through sweserve_boot, which the exports run
too) run for real on the host over one test file whose failures
carry their sign early: a libcuda ImportError re-raised as a RuntimeError, a TPU assertion followed by
pytest's dict diff, a TPU assertion re-raised. A huge message stays bounded.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sweserve.evaluation.accelerators import accelerator_kind, accelerator_tests
from sweserve.evaluation.grading import TestRun, merge_events, parse_stream

IN_SANDBOX = Path(__file__).resolve().parent.parent / "harness"
BOUND = 2048 + 6144 + 100  # head + tail + the marker between them

FAILURES = textwrap.dedent('''\
    import unittest


    def _load_ops():
        raise ImportError("libcuda.so.1: cannot open shared object file: No such file or directory")


    def _make_mesh():
        assert False, "device tpu is not consistent with JAX_PLATFORMS cpu"


    class Case(unittest.TestCase):
        def test_ops(self):
            try:
                _load_ops()
            except ImportError as e:
                raise RuntimeError("the compiled ops failed to load") from e

        def test_mesh(self):
            mesh = {"data": 1, "tensor": 4, "expert": 1}
            assert mesh == {"data": 4, "tensor": 1, "expert": 2}, "device tpu is not consistent with JAX_PLATFORMS cpu"

        def test_mesh_reraised(self):
            try:
                _make_mesh()
            except AssertionError as e:
                raise RuntimeError("no device mesh") from e

        def test_huge(self):
            raise ValueError("x" * 200_000)
''')
FILE = "test_failures.py"
ID = f"{FILE}::Case::"


@pytest.fixture
def work(tmp_path):
    (tmp_path / FILE).write_text(FAILURES)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return tmp_path


def _boot(work: Path, runner: str) -> TestRun:
    nonce = "0123456789abcdef"
    (work / ".nonce").write_text(nonce)
    config = {"runner": runner, "paths": [str(work)], "files": [FILE], "nonce_file": str(work / ".nonce"),
              "args": ["-p", "no:cacheprovider", "-o", "addopts=", "-q", FILE]}
    (work / "run.json").write_text(json.dumps(config))
    proc = subprocess.run([sys.executable, "-I", str(IN_SANDBOX / "sweserve_boot.py"), str(work / "run.json")],
                          cwd=work, capture_output=True, text=True, timeout=120)
    events, _ = parse_stream(proc.stdout, nonce)
    assert any("end" in e for e in events), proc.stdout[-2000:] + proc.stderr[-2000:]
    outcomes, skips, messages = merge_events(events)
    return TestRun(outcomes, skips, messages)


@pytest.mark.parametrize("how", [_boot], ids=["grading"])  # the exports run the same boot script
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_recorded_messages_show_signs_anywhere_and_stay_bounded(work, how, runner):
    run = how(work, runner)
    raised = "failed" if runner == "pytest" else "error"  # unittest: only an AssertionError is a failure
    assert {t: run.outcomes[ID + t] for t in ("test_ops", "test_mesh", "test_mesh_reraised", "test_huge")} == \
        {"test_ops": raised, "test_mesh": "failed", "test_mesh_reraised": raised, "test_huge": raised}
    found = accelerator_tests([run])
    for test, kind in (("test_ops", "gpu"), ("test_mesh", "tpu"), ("test_mesh_reraised", "tpu")):
        assert ID + test in found, (test, run.messages.get(ID + test))
        assert accelerator_kind({test: found[ID + test]}) == kind, found[ID + test]
    assert ID + "test_huge" not in found
    huge = run.messages[ID + "test_huge"]
    assert 8192 <= len(huge) <= BOUND, len(huge)
    assert "ValueError" in huge


def test_installed_names_leave_out_the_repository_itself(tmp_path, monkeypatch):
    """An editable install's .pth puts the workdir itself on sys.path: its untracked leftovers (build/, a stray
    module) are the repository's, not installed packages the verifier should protect from the submission."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("boot_under_test", IN_SANDBOX / "sweserve_boot.py")
    boot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(boot)
    work, site = tmp_path / "testbed", tmp_path / "site"
    for d in (work / "build", work / "sub" / "leftover", site / "realpkg"):
        d.mkdir(parents=True)
    (site / "othermod.py").write_text("")
    monkeypatch.setattr(sys, "path", [str(site), str(work), str(work / "sub")])
    names = set(boot.installed_names(workdir=str(work) + "/"))
    assert {"realpkg", "othermod"} <= names
    assert not {"build", "sub", "leftover"} & names
