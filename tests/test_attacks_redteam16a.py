"""Red team 16a: the verdict at grading, in `sweserve run` and in the exports' in-box verifier
(`harness/sweserve_verify.py`, SWE-bench's eval_script and Harbor's tests/). Each test asserts the defended
behaviour: it FAILS while the attack (or the discrepancy) wins.

The in-box verifier runs here on a small git work tree (no container): its module with WORKDIR and HERE pointed
at temporary folders, the harness copied beside it, the tests' interpreter this virtual environment's, no
privilege drop (`user` empty) and `kill_all` a no-op (it would reach every `nobody` process of this machine).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


def _git(cwd, *args):
    return subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=a", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout


def _verify(monkeypatch, tmp_path: Path):
    """The in-box verifier's module, with its harness folder (HERE) a copy in `tmp_path/harness`."""
    from tests.test_attacks_redteam11 import _verify_module

    verify = _verify_module()
    here = tmp_path / "harness"
    here.mkdir()
    for src in (ROOT / "harness").glob("sweserve_*.py"):
        shutil.copy(src, here / src.name)
    shutil.copy(ROOT / "sweserve" / "evaluation" / "resets.py", here / "sweserve_resets.py")
    monkeypatch.setattr(verify, "HERE", str(here))
    monkeypatch.setattr(verify.sweserve_drop, "kill_all", lambda uid: None)
    monkeypatch.delenv("GIT_DIR", raising=False)
    return verify, here


def _tree(tmp_path: Path, files: dict[str, str]) -> tuple[Path, str]:
    tree = tmp_path / "testbed"
    tree.mkdir()
    _git(tree, "init", "-q")
    for path, text in files.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(text)
    _git(tree, "add", "-A")
    _git(tree, "commit", "-qm", "base")
    return tree, _git(tree, "rev-parse", "HEAD").strip()


def _diff(tree: Path, base: str, change) -> str:
    """The patch `change(tree)` makes against base (the tree put back at base after)."""
    change(tree)
    _git(tree, "add", "-A")
    patch = _git(tree, "diff", "--cached", "--binary", "--full-index", base)
    _git(tree, "reset", "-q", "--hard", base)
    _git(tree, "clean", "-qfdx")
    return patch


def _cfg(tree: Path, here: Path, base: str, patch: str, test_file: str, f2p: list[str], plugins: list[str],
         **extra) -> dict:
    (here / "model.patch").write_text(patch)
    return {"format": "harbor", "base_commit": base, "patch": str(here / "model.patch"),
            "FAIL_TO_PASS": f2p, "PASS_TO_PASS": [], "runner": "pytest", "test_files": [test_file],
            "test_paths": ["tests/*"], "plugins": plugins, "workdir": str(tree), "env": {}, "timeout_s": 120,
            "python": PYTHON, "user": "", **extra}


def _inbox_grade(monkeypatch, tmp_path, base_files, tests_patch_of, change, test_file, f2p, plugins=()):
    """The in-box verifier's `grade` of the patch `change` makes (a function of the tree), or of `change(base)`
    when it is a function of the base commit returning patch text (`patch_text`)."""
    verify, here = _verify(monkeypatch, tmp_path)
    tree, base = _tree(tmp_path, base_files)
    tests_patch = _diff(tree, base, tests_patch_of)
    (here / "tests.patch").write_text(tests_patch)
    patch = change.text(base) if hasattr(change, "text") else _diff(tree, base, change)
    monkeypatch.setattr(verify, "WORKDIR", str(tree))
    cfg = _cfg(tree, here, base, patch, test_file, f2p, list(plugins))
    try:
        status, reason, graded, details, output = verify.grade(cfg)
    except verify.Verdict as v:
        return v.status, v.reason, {}, ""
    return status, reason, graded, output


def _image_plugins() -> list[str]:
    """The pytest plugins this interpreter has installed, as `sweserve run`'s first look lists them."""
    out = subprocess.run([PYTHON, "-I", str(ROOT / "harness" / "sweserve_boot.py"), "--plugins"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# --- R16a-1: the exports never load the image's pytest plugins; `sweserve run` does -------------------------------

ASYNC_BASE = {"pkg/__init__.py": "", "pkg/core.py": "async def value():\n    return 1\n",
              "tests/__init__.py": "", "tests/test_core.py": "def test_sync():\n    assert True\n"}
ASYNC_TEST = ("import pytest\n\nfrom pkg.core import value\n\n\n@pytest.fixture\ndef anyio_backend():\n"
              "    return 'asyncio'\n\n\n@pytest.mark.anyio\nasync def test_value():\n"
              "    assert await value() == 2\n\n\ndef test_sync():\n    assert True\n")


def _add_async_test(tree):
    (tree / "tests" / "test_core.py").write_text(ASYNC_TEST)


def _fix(tree):
    (tree / "pkg" / "core.py").write_text("async def value():\n    return 2\n")


def test_the_export_verifier_loads_the_images_pytest_plugins_as_sweserve_run_does(monkeypatch, tmp_path):
    """R16a-1: `sweserve run` loads the image's own pytest plugins by module (`--first-look`'s `plugins`, joined to
    the profile's in `verifier._plugins`), so a hidden test marked `@pytest.mark.anyio` (anyio's plugin: in every
    image with httpx/fastapi, SGLang's included) runs. The exports' in-box verifier passes only the profile's
    (`in_image.verify_config`: `"plugins": profile.pytest_plugins`) with autoload off: the same test, on the
    same correct patch, cannot run there. The oracle is `resolved` in `sweserve run` and `failed` in both exports."""
    plugins = _image_plugins()
    assert "anyio.pytest_plugin" in plugins, plugins  # the interpreter the tests run with has it, as such images do
    f2p = ["tests/test_core.py::test_value"]
    status, reason, graded, output = _inbox_grade(monkeypatch, tmp_path, ASYNC_BASE, _add_async_test, _fix,
                                                  "tests/test_core.py", f2p)
    assert status == "resolved", (status, reason, graded, output[-1500:])


def test_control_with_the_images_plugins_named_the_export_verifier_resolves_the_fix(monkeypatch, tmp_path):
    """Control for R16a-1: the same grading with the image's plugins passed as `sweserve run` passes them."""
    f2p = ["tests/test_core.py::test_value"]
    status, reason, graded, output = _inbox_grade(monkeypatch, tmp_path, ASYNC_BASE, _add_async_test, _fix,
                                                  "tests/test_core.py", f2p, plugins=_image_plugins())
    assert status == "resolved", (status, reason, graded, output[-1500:])


# --- R16a-2: a name `git apply --numstat` lists that is the work tree itself: the leftover check unlinks a folder ---

@pytest.mark.parametrize("name", [".", "pkg/.", "pkg/.."])
def test_a_patch_naming_the_work_tree_itself_does_not_crash_the_export_verifier(monkeypatch, tmp_path, name):
    """R16a-2: `to_base` (Harbor: the agent's own model.patch, R15e-2's route) removes each name `git apply
    --numstat` lists that base does not track (`known`: tracked files and their folders). `--numstat` lists names
    unchecked: `.`, `pkg/.`, `pkg/..` are none of `known`, `inside` the work tree (their folder is), and exist:
    `os.unlink` of a folder raises IsADirectoryError, which no handler of `main` catches. The verifier dies before
    it writes its verdict: Harbor keeps the 0 test.sh wrote first but gets no sweserve.json (no status, no
    reason, no resets for the reviewer), SWE-bench's log has no markers (unresolved, with no `sweserve:` line).
    Three lines of patch text. Defended: a verdict, or the tree at base."""
    verify, here = _verify(monkeypatch, tmp_path)
    tree, base = _tree(tmp_path, {"pkg/__init__.py": "", "pkg/mod.py": "x = 1\n"})
    monkeypatch.setattr(verify, "WORKDIR", str(tree))
    patch = here / "model.patch"
    patch.write_text(f"diff --git a/{name} b/{name}\nnew file mode 100644\nindex 0000000..e69de29\n")
    try:
        verify.to_base({"base_commit": base, "format": "harbor", "patch": str(patch)})
    except verify.Verdict:
        pass  # a verdict is reported (markers, reward.txt): the defended outcome
    except OSError as exc:
        pytest.fail(f"the export's verifier died of {exc.__class__.__name__}: {exc}")
    assert (tree / "pkg" / "mod.py").read_text() == "x = 1\n"


# --- R16a-3: a gitlink at a path the resets delete: `git apply --index` makes it a folder, `os.unlink` dies -------

class _GitlinkConftest:
    """The fix, and a submodule entry (mode 160000) named `pkg/conftest.py`: `git apply --index` makes an empty
    folder for it in the work tree."""

    @staticmethod
    def text(base: str) -> str:
        return ("diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1,2 +1,2 @@\n"
                " async def value():\n-    return 1\n+    return 2\n"
                f"diff --git a/pkg/conftest.py b/pkg/conftest.py\nnew file mode 160000\nindex 0000000..{base}\n"
                f"--- /dev/null\n+++ b/pkg/conftest.py\n@@ -0,0 +1 @@\n+Subproject commit {base}\n")


def test_a_gitlink_where_a_reset_deletes_does_not_crash_the_export_verifier(monkeypatch, tmp_path):
    """R16a-3: a patch (Harbor: the agent's own model.patch; `sweserve run --predictions` too) adding a submodule
    entry at a path the resets delete (a new conftest.py, a test path, a start-up hook): `git apply --index`
    makes an empty folder there, and `reset` removes the submission's new reset paths with `os.unlink`:
    IsADirectoryError, which no handler of `main` catches: no verdict written (Harbor: test.sh's 0, no
    sweserve.json; SWE-bench: no markers). `sweserve run`'s `rm -f` fails the same step, as `failed` ("could not
    be set up"): the two disagree on one patch. Defended: a verdict."""
    f2p = ["tests/test_core.py::test_value"]
    try:
        status, reason, graded, output = _inbox_grade(monkeypatch, tmp_path, ASYNC_BASE, _add_async_test,
                                                      _GitlinkConftest, "tests/test_core.py", f2p,
                                                      plugins=_image_plugins())
    except OSError as exc:
        pytest.fail(f"the export's verifier died of {exc.__class__.__name__}: {exc}")
    assert status in ("failed", "patch_failed", "resolved"), (status, reason)


# --- R16a-4: a path that is not UTF-8: the in-box verifier decodes git's raw `-z` output strictly ------------------

QUOTED_NAME = 'diff --git "a/pkg/\\377.py" "b/pkg/\\377.py"\nnew file mode 100644\n--- /dev/null\n+++ "b/pkg/\\377.py"\n@@ -0,0 +1 @@\n+x = 1\n'


@pytest.mark.parametrize("route", ["harbor", "swebench"])
def test_a_path_that_is_not_utf8_does_not_crash_the_export_verifier(monkeypatch, tmp_path, route):
    """R16a-4: a patch names `pkg/\\377.py` in git's own quoted form (ASCII text: a SWE-bench prediction is JSON,
    Harbor's model.patch the agent's text); git makes the file's name the byte 0xFF. The in-box verifier runs git
    with `text=True` (strict UTF-8) on `-z` output, which git writes raw: `git apply --numstat -z` (Harbor: the
    patch given) or `git status --porcelain -z` (SWE-bench: the harness applied the prediction) raises
    UnicodeDecodeError, which no handler of `main` catches: no verdict written (Harbor: test.sh's 0, no
    sweserve.json; SWE-bench: no markers). `sweserve run` decodes git's listings with "replace" and grades.
    Defended: a verdict, or the tree at base."""
    verify, here = _verify(monkeypatch, tmp_path)
    tree, base = _tree(tmp_path, {"pkg/__init__.py": "", "pkg/mod.py": "x = 1\n"})
    monkeypatch.setattr(verify, "WORKDIR", str(tree))
    patch = here / "model.patch"
    patch.write_text(QUOTED_NAME)
    if route == "swebench":
        _git(tree, "apply", str(patch))  # what swebench's harness does with the prediction before eval.sh
        assert os.path.exists(os.fsdecode(bytes(tree) + b"/pkg/\xff.py"))
    try:
        verify.to_base({"base_commit": base, "format": route, "patch": str(patch)})
    except verify.Verdict:
        pass
    except (OSError, ValueError) as exc:
        pytest.fail(f"the export's verifier died of {exc.__class__.__name__}: {exc}")


class _FixAndOddName:
    @staticmethod
    def text(base: str) -> str:
        return ("diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1,2 +1,2 @@\n"
                " async def value():\n-    return 1\n+    return 2\n" + QUOTED_NAME)


def test_control_a_fix_beside_a_name_that_is_not_utf8_is_graded(monkeypatch, tmp_path):
    """Control for R16a-4: the whole in-box grading of a fix that also adds `pkg/\\377.py` gives its verdict."""
    f2p = ["tests/test_core.py::test_value"]
    try:
        status, reason, graded, output = _inbox_grade(monkeypatch, tmp_path, ASYNC_BASE, _add_async_test,
                                                      _FixAndOddName, "tests/test_core.py", f2p,
                                                      plugins=_image_plugins())
    except (OSError, ValueError) as exc:
        pytest.fail(f"the export's verifier died of {exc.__class__.__name__}: {exc}")
    assert status == "resolved", (status, reason, graded, output[-1500:])


@pytest.mark.parametrize("route", ["harbor", "swebench"])
def test_any_crash_of_the_export_verifier_is_a_recorded_error(monkeypatch, tmp_path, capsys, route):
    """16a's advice, beyond its four crashes: whatever a submission makes the verifier raise next, the record
    says `error` with the reason (Harbor's sweserve.json, SWE-bench's `sweserve:` line), and reward 0."""
    verify, _ = _verify(monkeypatch, tmp_path)
    out = tmp_path / "verifier"
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"format": route, "verifier_dir": str(out), "FAIL_TO_PASS": ["t::a"],
                               "PASS_TO_PASS": []}))
    monkeypatch.setattr(verify.sweserve_drop, "private", lambda path: None)
    monkeypatch.setattr(verify.sweserve_drop, "lock", lambda paths: None)

    def boom(cfg):
        raise IsADirectoryError(21, "Is a directory", "\udcff")

    monkeypatch.setattr(verify, "grade", boom)
    assert verify.main(["verify", str(cfg)]) == 0
    if route == "harbor":
        record = json.loads((out / "sweserve.json").read_text())
        assert record["status"] == "error" and "IsADirectoryError" in record["reason"]
        assert (out / "reward.txt").read_text() == "0\n"
    else:
        printed = capsys.readouterr().out
        assert "sweserve: error (the verifier failed: IsADirectoryError" in printed and "PASSED" not in printed
