"""The layout's rules, checked over every import in the package (see docs/architecture.md)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "sweserve"


def imports(root: Path = PACKAGE):
    """(module path relative to the package, imported module, imported names) for every import statement."""
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield rel, alias.name, []
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{rel}: relative import (imports are absolute)"
                yield rel, node.module or "", [a.name for a in node.names]


def stage(rel: str) -> str:
    return rel.split("/", 1)[0] if "/" in rel else "(top)"


def docker_importers(root: Path = PACKAGE):
    return [(rel, mod) for rel, mod, _ in imports(root)
            if (mod == "docker" or mod.startswith("docker.")) and stage(rel) != "environment"]


def test_only_environment_imports_docker():
    assert docker_importers() == []


def test_the_rules_see_a_violation(tmp_path):
    (tmp_path / "dataset").mkdir()
    (tmp_path / "dataset" / "sneaky.py").write_text("import docker.errors\n")
    (tmp_path / "environment").mkdir()
    (tmp_path / "environment" / "fine.py").write_text("import docker\n")
    assert docker_importers(tmp_path) == [("dataset/sneaky.py", "docker.errors")]


def test_dataset_never_touches_docker_or_sandboxes():
    # of agents/, only the model client and the config models (for statement rewriting): no sandbox code
    pure_agents = ("sweserve.agents.chat_client", "sweserve.agents.config")
    offenders = [(rel, mod) for rel, mod, _ in imports()
                 if stage(rel) == "dataset" and mod.startswith(("docker", "sweserve.environment", "sweserve.evaluation",
                                                                "sweserve.agents")) and mod not in pure_agents]
    assert offenders == []


def test_agents_see_only_the_sandbox_protocol():
    offenders = [(rel, mod) for rel, mod, _ in imports()
                 if stage(rel) == "agents" and mod.startswith(("docker", "sweserve.environment", "sweserve.evaluation"))
                 and mod != "sweserve.environment.sandbox"]
    assert offenders == []


def test_reporting_reads_only_models_and_results():
    allowed = ("sweserve.models", "sweserve.errors", "sweserve.evaluation.results", "sweserve.reporting")
    offenders = [(rel, mod) for rel, mod, _ in imports()
                 if stage(rel) == "reporting" and mod.startswith("sweserve") and not mod.startswith(allowed)]
    assert offenders == []


def test_no_module_imports_another_modules_private_names():
    offenders = [(rel, mod, name) for rel, mod, names in imports() if mod.startswith("sweserve")
                 for name in names if name.startswith("_") and name != "__version__"]
    assert offenders == []


def test_no_folder_holds_a_single_module():
    for folder in [p for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__"]:
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        data = [p for p in folder.iterdir() if p.suffix != ".py" and p.name != "__pycache__"]
        assert len(modules) != 1 or data or folder.name == "in_sandbox", f"{folder} holds one module: flatten it"
