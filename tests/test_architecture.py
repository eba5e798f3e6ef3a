"""The layout's rules, checked over every import in the package (see docs/architecture.md).

Each rule is a function of a package root returning its offenders, so the probes below can show it catching a
violation written into a scratch tree. An import is seen however it is spelled: `import a.b`, `from a import b`
(recorded as `a.b` when b is a module of sweserve), and `importlib.import_module("a")` / `__import__("a")`
with a literal name; a private name is caught imported (`from m import _x`) or reached through a module bound
by an import (`import sweserve.m as m; m._x`).
"""

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "sweserve"


def is_sweserve_module(dotted: str) -> bool:
    """`sweserve.x.y` names a module or package of the real package (what `from sweserve.x import y` imports)."""
    parts = dotted.split(".")
    if parts[0] != "sweserve":
        return False
    path = PACKAGE.joinpath(*parts[1:])
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def dynamic_import(node: ast.AST) -> str | None:
    """The literal module name of an `importlib.import_module("x")` or `__import__("x")` call."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    arg = node.args[0]
    if name in ("import_module", "__import__") and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    return None


def imports(root: Path = PACKAGE):
    """(module path relative to the package, imported module, imported names) for every import, however spelled."""
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield rel, alias.name, []
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{rel}: relative import (imports are absolute)"
                # from sweserve import environment: the module sweserve.environment; the names that are no module
                # are imported from node.module itself
                subs = [a.name for a in node.names if is_sweserve_module(f"{node.module}.{a.name}")]
                names = [a.name for a in node.names if a.name not in subs]
                if names or not subs:
                    yield rel, node.module or "", names
                yield from ((rel, f"{node.module}.{sub}", []) for sub in subs)
            elif (name := dynamic_import(node)) is not None:
                yield rel, name, []


def module_bindings(tree: ast.AST) -> set[str]:
    """Local names an import binds to a sweserve module: `import sweserve.x` (sweserve), `import sweserve.x as m`
    and `from sweserve import x` (m, x)."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.startswith("sweserve")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sweserve"):
            bound |= {a.asname or a.name for a in node.names if is_sweserve_module(f"{node.module}.{a.name}")}
    return bound


def root_name(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def stage(rel: str) -> str:
    return rel.split("/", 1)[0] if "/" in rel else "(top)"


def docker_importers(root: Path = PACKAGE):
    return [(rel, mod) for rel, mod, _ in imports(root)
            if (mod == "docker" or mod.startswith("docker.")) and stage(rel) != "environment"]


def dataset_offenders(root: Path = PACKAGE):
    # of agents/, only the model client and the config models (for statement rewriting): no sandbox code
    pure_agents = ("sweserve.agents.chat_client", "sweserve.agents.config")
    return [(rel, mod) for rel, mod, _ in imports(root)
            if stage(rel) == "dataset" and mod.startswith(("docker", "sweserve.environment", "sweserve.evaluation",
                                                           "sweserve.agents")) and mod not in pure_agents]


def agents_offenders(root: Path = PACKAGE):
    return [(rel, mod) for rel, mod, _ in imports(root)
            if stage(rel) == "agents" and mod.startswith(("docker", "sweserve.environment", "sweserve.evaluation"))
            and mod != "sweserve.environment.sandbox"]


def reporting_offenders(root: Path = PACKAGE):
    allowed = ("sweserve.models", "sweserve.errors", "sweserve.loading", "sweserve.evaluation.results",
               "sweserve.reporting")
    return [(rel, mod) for rel, mod, _ in imports(root)
            if stage(rel) == "reporting" and mod.startswith("sweserve") and not mod.startswith(allowed)]


def private_offenders(root: Path = PACKAGE):
    """Private names of sweserve modules, imported or reached as an attribute of an imported module."""
    found = [(rel, mod, name) for rel, mod, names in imports(root) if mod.startswith("sweserve")
             for name in names if private(name)]
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        bound = module_bindings(tree)
        found += [(path.relative_to(root).as_posix(), ast.unparse(node.value), node.attr) for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and private(node.attr) and root_name(node.value) in bound]
    return found


def transfer_offenders(root: Path = PACKAGE):
    """transfer.py is a private part of the Docker backend: everything else copies trees through `Sandbox`."""
    return [(rel, mod) for rel, mod, _ in imports(root)
            if mod == "sweserve.environment.transfer" and rel != "environment/docker_sandbox.py"]


def test_trees_are_copied_through_the_sandbox_protocol_only():
    assert transfer_offenders() == []


def environment_offenders(root: Path = PACKAGE):
    """environment/ takes plain values (an ImageSpec, a Sandbox's arguments): it reads no profile, task store or
    clone registry, and knows nothing of the trial or of agents."""
    return [(rel, mod) for rel, mod, _ in imports(root)
            if stage(rel) == "environment" and mod.startswith(("sweserve.dataset", "sweserve.evaluation",
                                                               "sweserve.agents"))]


# the Docker side of environment/: evaluation/ sees sandboxes and hosts only through their protocols
DOCKER_SIDE = ("docker", "sweserve.environment.docker_sandbox", "sweserve.environment.docker_host",
               "sweserve.environment.transfer", "sweserve.environment.egress", "sweserve.environment.images")


def evaluation_offenders(root: Path = PACKAGE):
    return [(rel, mod) for rel, mod, _ in imports(root)
            if stage(rel) == "evaluation" and any(mod == m or mod.startswith(m + ".") for m in DOCKER_SIDE)]


def assess_offenders(root: Path = PACKAGE):
    """assess/ runs candidates through the trial pipeline and sandboxes through their protocols: nothing
    Docker-side, and nothing of the commands above it."""
    return [(rel, mod) for rel, mod, _ in imports(root)
            if stage(rel) == "assess" and (any(mod == m or mod.startswith(m + ".") for m in DOCKER_SIDE)
                                           or mod.startswith("sweserve.cli"))]


def test_assess_sees_only_the_pipeline_and_the_protocols():
    assert assess_offenders() == []


def test_assess_rule_sees_a_docker_side_import(tmp_path):
    root = probe(tmp_path, {"assess/a.py": "from sweserve.environment import docker_sandbox\n",
                            "assess/b.py": "from sweserve.cli import common\n",
                            "assess/fine.py": "from sweserve.environment.sandbox import Sandbox\n"})
    assert sorted(assess_offenders(root)) == [("assess/a.py", "sweserve.environment.docker_sandbox"),
                                              ("assess/b.py", "sweserve.cli.common")]


def test_environment_reads_nothing_of_the_stages_above_it():
    assert environment_offenders() == []


def test_evaluation_sees_only_the_sandbox_and_host_protocols():
    assert evaluation_offenders() == []


def test_evaluation_leaves_docker_unimported_at_run_time():
    """Every module of evaluation/ and assess/ imported in a fresh interpreter: neither docker nor the Docker
    backend loads."""
    modules = [f"sweserve.{folder}.{p.stem}" for folder in ("evaluation", "assess")
               for p in sorted((PACKAGE / folder).glob("*.py"))]
    code = ("import importlib, sys\n"
            f"for m in {modules!r}:\n    importlib.import_module(m)\n"
            f"print(sorted(m for m in sys.modules if m.startswith({DOCKER_SIDE!r})))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_only_environment_imports_docker():
    assert docker_importers() == []


def test_dataset_never_touches_docker_or_sandboxes():
    assert dataset_offenders() == []


def test_agents_see_only_the_sandbox_protocol():
    assert agents_offenders() == []


def test_reporting_reads_only_models_and_results():
    assert reporting_offenders() == []


def test_no_module_imports_another_modules_private_names():
    assert private_offenders() == []


def test_the_pure_stages_leave_docker_unimported():
    """At run time too: every module of dataset/, agents/ and reporting/ imported in a fresh interpreter."""
    modules = [f"sweserve.{p.relative_to(PACKAGE).with_suffix('').as_posix().replace('/', '.')}"
               for folder in ("dataset", "agents", "reporting") for p in sorted((PACKAGE / folder).glob("*.py"))]
    code = ("import importlib, sys\n"
            f"for m in {modules!r}:\n    importlib.import_module(m)\n"
            "print(sorted(m for m in sys.modules if m == 'docker' or m.startswith('docker.')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# --- probes: each rule catches a violation written into a scratch tree --------------------------------------

def probe(tmp_path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def test_the_docker_rule_sees_every_spelling(tmp_path):
    root = probe(tmp_path, {"dataset/sneaky.py": "import docker.errors\n",
                            "reporting/lazy.py": "import importlib\nclient = importlib.import_module('docker')\n",
                            "agents/dunder.py": "d = __import__('docker')\n",
                            "environment/fine.py": "import docker\n"})
    assert sorted(docker_importers(root)) == [("agents/dunder.py", "docker"),
                                              ("dataset/sneaky.py", "docker.errors"), ("reporting/lazy.py", "docker")]


def test_the_stage_rules_see_a_package_imported_from_its_parent(tmp_path):
    root = probe(tmp_path, {"dataset/a.py": "from sweserve import environment\n",
                            "agents/b.py": "from sweserve import evaluation\n"
                                           "from sweserve.environment import sandbox\n",
                            "reporting/c.py": "from sweserve.evaluation import trial\nfrom sweserve import models\n"})
    assert dataset_offenders(root) == [("dataset/a.py", "sweserve.environment")]
    assert agents_offenders(root) == [("agents/b.py", "sweserve.evaluation")]
    assert reporting_offenders(root) == [("reporting/c.py", "sweserve.evaluation.trial")]


def test_the_seam_rules_see_both_directions(tmp_path):
    root = probe(tmp_path, {"environment/a.py": "from sweserve.dataset.profiles import RepoProfile\n",
                            "environment/b.py": "from sweserve import evaluation\nimport sweserve.agents.base\n",
                            "environment/fine.py": "from sweserve.models import ImageSpec\n",
                            "evaluation/c.py": "from sweserve.environment.docker_sandbox import DockerSandbox\n",
                            "evaluation/d.py": "import importlib\nt = importlib.import_module("
                                               "'sweserve.environment.transfer')\n",
                            "evaluation/fine.py": "from sweserve.environment.sandbox import Sandbox\n"
                                                  "from sweserve.environment.host import Host\n"})
    assert sorted(environment_offenders(root)) == [("environment/a.py", "sweserve.dataset.profiles"),
                                                   ("environment/b.py", "sweserve.agents.base"),
                                                   ("environment/b.py", "sweserve.evaluation")]
    assert sorted(evaluation_offenders(root)) == [("evaluation/c.py", "sweserve.environment.docker_sandbox"),
                                                  ("evaluation/d.py", "sweserve.environment.transfer")]


def test_the_private_rule_sees_names_reached_through_a_module(tmp_path):
    root = probe(tmp_path, {"cli/a.py": "import sweserve.evaluation.trial as t\nt._graded()\n",
                            "cli/b.py": "from sweserve.evaluation import trial\ntrial._graded()\n",
                            "cli/c.py": "import sweserve.evaluation.trial\nsweserve.evaluation.trial._record()\n",
                            "cli/d.py": "from sweserve.evaluation.trial import _graded\n",
                            "cli/fine.py": "import sweserve\nfrom sweserve.models import Task\n"
                                           "print(sweserve.__version__, Task._private_of_a_class)\n"})
    assert sorted(private_offenders(root)) == [("cli/a.py", "t", "_graded"), ("cli/b.py", "trial", "_graded"),
                                               ("cli/c.py", "sweserve.evaluation.trial", "_record"),
                                               ("cli/d.py", "sweserve.evaluation.trial", "_graded")]


def test_each_stage_package_states_its_rule():
    for stage_dir in ("agents", "dataset", "environment", "evaluation", "reporting", "cli", "assess"):
        doc = ast.get_docstring(ast.parse((PACKAGE / stage_dir / "__init__.py").read_text()))
        assert doc and "Rule:" in doc, f"sweserve/{stage_dir}/__init__.py states no rule"


def test_no_folder_holds_a_single_module():
    for folder in [p for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__"]:
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        data = [p for p in folder.iterdir() if p.suffix != ".py" and p.name != "__pycache__"]
        assert len(modules) != 1 or data or folder.name == "harness", f"{folder} holds one module: flatten it"


def test_harness_is_standard_library_and_its_own_siblings_only():
    """harness/ runs under the image's own Python (and in exported tasks, with no sweserve installed): each module
    imports only the standard library and its sibling harness modules, never sweserve itself. images/ holds no
    code but the proxy's addon, which runs in the proxy image with mitmproxy."""
    import sys

    root = PACKAGE.parent / "harness"
    # pytest: the runner the boot script drives in the image; sweserve_resets: evaluation/resets.py, shipped into
    # exports under that name (dataset/in_image.py), itself standard library only
    siblings = {p.stem for p in root.glob("*.py")} | {"pytest", "_pytest", "sweserve_resets"}
    offenders = []
    for path in sorted(root.glob("*.py")):
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                       and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
                       for n in ast.walk(block)}
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            for name in names:
                top = name.split(".")[0]
                # `sweserve.harness` is this folder under its package name, the host's way to reach a sibling
                if (id(node) not in typing_only and top not in siblings and top not in sys.stdlib_module_names
                        and top != "__future__" and name != "sweserve.harness"):
                    offenders.append((path.name, name))
    assert offenders == []
