"""What the grade sandbox puts back to base after a submission is applied, decided from git's list of paths.

The submission is applied with `git apply --index`, so git (not a hand parser of patch text) names every
path it added, changed or deleted. Each such path is reset — restored to base, or deleted when new —
when it is:

- a test path of the profile, a hidden test file, or a path `tests.patch` touches (that patch then
  applies to base content; `tests.patch` itself is applied after this);
- a `conftest.py` anywhere (only base's and tests.patch's conftests are honoured);
- pytest configuration: `pytest.ini`/`.pytest.ini`/`pytest.toml`/`.pytest.toml` anywhere (pytest 9 reads
  the toml ones first; their `pythonpath` puts a directory first on sys.path), and
  `tox.ini`/`setup.cfg`/`pyproject.toml` when the candidate changed their pytest section (`changed_pytest_config` decides from both texts);
- interpreter start-up hooks: `sitecustomize.py`, `usercustomize.py`, any `*.pth`;
- package metadata: anything under a `*.dist-info` or `*.egg-info` directory (entry points, e.g. `pytest11`);
- a module that can be imported under a top-level name (it sits in a directory without `__init__.py`, or
  is the package directly under one) shadowing the standard library, pytest and its dependencies, the
  harness (`sweserve_*`), or any top-level name installed in the task image (`installed`: listed in the
  grade sandbox before the submission is applied, less the names the base repository itself provides).

The first group is ordinary (candidates may edit tests; their edits just do not count); every other reset
is also a flag.
"""

from __future__ import annotations

import configparser
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from importlib.machinery import all_suffixes
from pathlib import PurePosixPath

RUNNER_MODULES = frozenset({"pytest", "_pytest", "py", "pluggy", "iniconfig", "packaging", "exceptiongroup",
                            "tomli", "conftest", "sitecustomize", "usercustomize"})
PROTECTED_MODULES = frozenset(sys.stdlib_module_names) | RUNNER_MODULES
PYTEST_INI = frozenset({"pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml"})
MAYBE_PYTEST_CONFIG = frozenset({"tox.ini", "setup.cfg", "pyproject.toml"})
MODULE_SUFFIXES = tuple(sorted(set(all_suffixes()) | {".pyc", ".py"}, key=len, reverse=True))


@dataclass(frozen=True)
class Reset:
    path: str
    why: str
    existed: bool  # in base: restore it; otherwise delete it

    @property
    def suspicious(self) -> bool:
        return self.why != "test file"

    def describe(self) -> str:
        return f"{self.path} ({self.why})"


def _module_stem(name: str) -> str | None:
    for suffix in MODULE_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)].split(".")[0]
    return None


def importable_names(path: str, packages: set[str]) -> list[str]:
    """The top-level module names `path` could be imported as.

    `packages` holds the directories that have an `__init__.py`. A file is importable top-level when its
    directory is not a package (any such directory may be on sys.path: the test's own directory under
    pytest's rootdir insertion, the workdir, PYTHONPATH); a regular package directly under a non-package
    directory is importable by its directory name.
    """
    parts = PurePosixPath(path).parts
    names = []
    for i, part in enumerate(parts):
        parent = "/".join(parts[:i])
        if parent in packages:
            continue
        is_file = i == len(parts) - 1
        prefix = "/".join(parts[: i + 1])
        is_package = prefix in packages or _module_stem(parts[-1]) == "__init__" and i == len(parts) - 2
        name = _module_stem(part) if is_file else (part if is_package else None)
        if name and name != "__init__":
            names.append(name)
    return names


def shadowed_name(path: str, packages: set[str], installed: frozenset[str] = frozenset()) -> str | None:
    """The protected top-level module name `path` could be imported as, if any (see `importable_names`)."""
    for name in importable_names(path, packages):
        if name in PROTECTED_MODULES or name in installed or name.startswith("sweserve"):
            return name
    return None


def package_dirs(files: set[str]) -> set[str]:
    """The directories of a tree (`git ls-files`) that hold an `__init__.py` ("" for the top)."""
    return {f.rsplit("/", 1)[0] if "/" in f else "" for f in files if f == "__init__.py"
            or f.endswith("/__init__.py")}


def repo_names(files: set[str]) -> set[str]:
    """The top-level names a tree's own files (`git ls-files` of base) can be imported as."""
    packages = package_dirs(files)
    return {n for f in files for n in importable_names(f, packages)}


def _why(path: str, is_test: Callable[[str], bool], packages: set[str], installed: frozenset[str]) -> str | None:
    p = PurePosixPath(path)
    if is_test(path):
        return "test file"
    if p.name == "conftest.py":
        return "conftest not from the task"
    if p.name in PYTEST_INI:
        return "pytest configuration"
    if p.name in ("sitecustomize.py", "usercustomize.py") or p.suffix == ".pth":
        return "interpreter start-up hook"
    if any(part.endswith((".dist-info", ".egg-info")) for part in p.parts[:-1]):
        return "package metadata (entry points)"
    if (name := shadowed_name(path, packages, installed)):
        return f"shadows module {name}"
    return None


def plan_resets(changed: dict[str, str], is_test: Callable[[str], bool], packages: set[str],
                pytest_config_changed: Callable[[str], bool] = lambda p: True,
                installed: frozenset[str] = frozenset()) -> list[Reset]:
    """The resets for `changed` ({path: git status letter A/M/D/T}); a `MAYBE_PYTEST_CONFIG` file is reset
    when `pytest_config_changed(path)` says its pytest section differs from base (always, when it is new).
    `installed` are the task image's top-level module names (not the repository's own) a new file must not
    shadow."""
    resets = []
    for path, status in sorted(changed.items()):
        why = _why(path, is_test, packages, installed)
        name = PurePosixPath(path).name
        if why is None and name in MAYBE_PYTEST_CONFIG and (status == "A" or pytest_config_changed(path)):
            why = "pytest configuration"
        if why:
            resets.append(Reset(path, why, existed=status != "A"))
    return resets


def pytest_section(name: str, text: str | None) -> object:
    """The pytest configuration a tox.ini / setup.cfg / pyproject.toml holds (None when absent or unreadable)."""
    if text is None:
        return None
    if name == "pyproject.toml":
        try:
            table = tomllib.loads(text)
            tool = table.get("tool")
            return tool.get("pytest") if isinstance(tool, dict) else tool
        except (ValueError, RecursionError, MemoryError):  # TOMLDecodeError, an int past Python's digits (R14a-5)
            return "unparsable"  # compares unequal to base's: reset, pytest would refuse it anyway
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return "unparsable"
    section = "tool:pytest" if name == "setup.cfg" else "pytest"
    return dict(parser.items(section)) if parser.has_section(section) else None
