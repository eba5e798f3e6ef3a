"""Where SGLang's own CI runs a test file, read from the repository: GPUs, hardware class and a time limit.

Two eras (see docs and the notes on SGLang's layout):

* Self-registering files (from late Nov 2025): top-level calls such as
  ``register_cuda_ci(est_time=190, suite="stage-b-test-small-1-gpu")`` or, from May 2026,
  ``register_cuda_ci(est_time=311, stage="base-c", runner_config="8-gpu-h200")`` whose effective suite is
  ``f"{stage}-test-{runner_config}"``. Like SGLang's ``RegistryVisitor`` only top-level expression statements
  count and ``est_time`` must be a number.
* Suite lists: ``suites = {"per-commit-1-gpu": [TestFile("test_x.py", 60), ...]}`` in a ``run_suite.py`` next
  to (or above) the test file, e.g. ``test/srt/run_suite.py``.

A suite name says the hardware: ``(\\d+)-gpu`` the GPU count, ``small``/``large``/``h100``/``h200``/``b200`` … the
class; generic CPU suites (``default``, ``stage-a-cpu-only``, ``stage-a-test-cpu``, ``base-a-test-cpu``) need no GPU.
Registrations for AMD/NPU/XPU/MUSA/MLX or Intel-Xeon/ARM CPU suites only cannot run here.
"""

from __future__ import annotations

import ast
import posixpath
import re
from collections.abc import Callable

from pydantic import BaseModel, Field

from sweserve import pyast

BACKENDS = {
    "register_cuda_ci": "cuda", "register_cpu_ci": "cpu", "register_amd_ci": "amd", "register_npu_ci": "npu",
    "register_xpu_ci": "xpu", "register_musa_ci": "musa", "register_mlx_ci": "mlx",
}
_POSITIONAL = ("est_time", "suite", "nightly", "disabled")
_ALIASES = {"estimation_time": "est_time", "ci_stage": "suite"}  # the first helper, PR #13927
GENERIC_CPU_SUITES = {"default", "stage-a-cpu-only", "stage-a-test-cpu", "base-a-test-cpu"}
# Hardware classes, as they appear as a word of a suite or runner-config name.
HARDWARE = ("small", "large", "h100", "h200", "h20", "b200", "b300", "gb200", "gb300")
GPU_MEMORY_GB = {"small": 24, "large": 80, "h100": 80, "h200": 141, "h20": 96, "b200": 180, "b300": 270,
                 "gb200": 186, "gb300": 279}
_RANK = {h: i for i, h in enumerate(("small", "large", "h100", "h20", "h200", "b200", "gb200", "b300", "gb300"))}
RUN_SUITE = "run_suite.py"


class Registration(BaseModel):
    """One registration of one test file in one CI suite."""

    file: str
    backend: str  # cuda, cpu, amd, npu, xpu, musa, mlx
    suite: str
    est_time: float = Field(ge=0)
    nightly: bool = False
    disabled: str | None = None


class Placement(BaseModel):
    """What CI registration says about a set of test files: resources, or why they cannot run here."""

    gpus: int = 0
    hardware: str | None = None
    cpu_only: bool = True
    test_timeout_s: int | None = None
    suites: list[str] = Field(default_factory=list)
    unsupported: str | None = Field(None, description="why these tests cannot run on CPU or CUDA, one line")


# -- reading ------------------------------------------------------------------------------------------


def _literal(node: ast.AST):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _call_name(func: ast.AST) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def effective_suite(suite: str | None, stage: str | None, runner_config: str | None) -> str | None:
    if suite:
        return suite
    if stage and runner_config:
        return f"{stage}-test-{runner_config}"
    return None


def registrations(source: str, file: str = "") -> list[Registration]:
    """The ``register_*_ci(...)`` calls among the top-level statements of a test file."""
    try:
        tree = pyast.parse_module(source)
    except (SyntaxError, ValueError):
        return []
    found = []
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            continue
        call = stmt.value
        backend = BACKENDS.get(_call_name(call.func) or "")
        if backend is None:
            continue
        args = dict(zip(_POSITIONAL, (_literal(a) for a in call.args)))
        for kw in call.keywords:
            if kw.arg:
                args[_ALIASES.get(kw.arg, kw.arg)] = _literal(kw.value)
        est = args.get("est_time")
        if isinstance(est, bool) or not isinstance(est, (int, float)):
            continue  # SGLang's visitor rejects a non-literal est_time too
        suite = effective_suite(args.get("suite"), args.get("stage"), args.get("runner_config"))
        if not isinstance(suite, str):
            continue
        disabled = args.get("disabled")
        found.append(Registration(file=file, backend=backend, suite=suite, est_time=float(est),
                                  nightly=bool(args.get("nightly")),
                                  disabled=str(disabled) if disabled else None))
    return found


def _legacy_backend(suite: str) -> str:
    for word in ("amd", "npu", "xpu", "musa"):
        if word in suite:
            return word
    return "xeon" if re.search(r"(^|-)cpu($|-)", suite) else "cuda"


def suite_lists(source: str) -> dict[str, list[tuple[str, str, float]]]:
    """``suites = {name: [TestFile(path, est), ...]}`` of a run_suite.py: path → [(backend, suite, est)]."""
    try:
        tree = pyast.parse_module(source)
    except (SyntaxError, ValueError):
        return {}
    out: dict[str, list[tuple[str, str, float]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if not (any(isinstance(t, ast.Name) and t.id.endswith("suites") for t in targets) and isinstance(value, ast.Dict)):
            continue
        for key, items in zip(value.keys, value.values):
            suite = _literal(key) if key is not None else None
            if not isinstance(suite, str) or not isinstance(items, (ast.List, ast.Tuple)):
                continue
            for item in items.elts:
                if not (isinstance(item, ast.Call) and _call_name(item.func) == "TestFile"):
                    continue
                kwargs = {kw.arg: _literal(kw.value) for kw in item.keywords if kw.arg}
                pos = [_literal(a) for a in item.args]
                name = pos[0] if pos else kwargs.get("name")
                est = pos[1] if len(pos) > 1 else kwargs.get("estimated_time", kwargs.get("est_time", 60))
                if isinstance(name, str) and isinstance(est, (int, float)) and not isinstance(est, bool):
                    out.setdefault(posixpath.normpath(name), []).append((_legacy_backend(suite), suite, float(est)))
    return out


def find_registrations(read: Callable[[str], str | None], test_file: str) -> list[Registration]:
    """A file's own registrations, else its entries in the nearest run_suite.py above it that lists it."""
    source = read(test_file)
    if source is not None:
        own = registrations(source, test_file)
        if own:
            return own
    directory = posixpath.dirname(test_file)
    while True:
        runner = posixpath.join(directory, RUN_SUITE) if directory else RUN_SUITE
        text = read(runner) if runner != test_file else None
        if text:
            rel = posixpath.relpath(test_file, directory or ".")
            entries = suite_lists(text).get(rel)
            if entries:
                return [Registration(file=test_file, backend=b, suite=s, est_time=e, nightly=s.startswith("nightly"))
                        for b, s, e in entries]
        if not directory:
            return []
        directory = posixpath.dirname(directory)


# -- mapping suites to hardware -------------------------------------------------------------------------


def gpus_of(suite: str) -> int:
    m = re.search(r"(\d+)-gpu", suite)
    return int(m.group(1)) if m else 1


def hardware_of(suite: str) -> str | None:
    words = suite.split("-")
    classes = [w for w in words if w in HARDWARE]
    return max(classes, key=_RANK.__getitem__) if classes else None


def runnable(reg: Registration) -> bool:
    """Registered for hardware this harness has: generic CPU or CUDA."""
    if reg.backend == "cpu":
        return reg.suite in GENERIC_CPU_SUITES
    return reg.backend == "cuda"


def timeout_for(reg: Registration) -> int:
    """A per-file limit from CI's estimate: room for cold caches and JIT, within a floor and a cap."""
    if reg.backend == "cpu":
        return int(min(max(5 * reg.est_time + 60, 120), 600))
    return int(min(max(3 * reg.est_time + 120, 300), 1800))


def choose(regs: list[Registration]) -> Registration | None:
    """The registration a file runs under here: enabled, per-commit before nightly, CPU before CUDA."""
    usable = [r for r in regs if r.disabled is None and runnable(r)]
    if not usable:
        return None
    return min(usable, key=lambda r: (r.nightly, r.backend != "cpu", gpus_of(r.suite) if r.backend == "cuda" else 0))


def placement(read: Callable[[str], str | None], test_files: list[str]) -> Placement | None:
    """Resources for running these test files together; None when none of them is registered anywhere."""
    chosen: list[Registration] = []
    for path in test_files:
        regs = find_registrations(read, path)
        if not regs:
            continue
        reg = choose(regs)
        if reg is None:
            kinds = sorted({r.suite if r.backend == "cpu" else r.backend for r in regs if r.disabled is None})
            why = f"only registered for {', '.join(kinds)}" if kinds else "all its registrations are disabled"
            return Placement(unsupported=f"{path}: {why}")
        chosen.append(reg)
    if not chosen:
        return None
    cuda = [r for r in chosen if r.backend == "cuda"]
    hardware = [h for r in cuda if (h := hardware_of(r.suite))]
    return Placement(
        gpus=max((gpus_of(r.suite) for r in cuda), default=0),
        hardware=max(hardware, key=_RANK.__getitem__) if hardware else None,
        cpu_only=not cuda,
        test_timeout_s=sum(timeout_for(r) for r in chosen),
        suites=sorted({r.suite for r in chosen}),
    )
