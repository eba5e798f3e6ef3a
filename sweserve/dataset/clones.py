"""The clone registry: where each repository's local clone lives, so task images can be built later.

Local state under the state dir (`clones.json`), written by `mine`, read when a task image is built.
"""

from __future__ import annotations

import json
from pathlib import Path

CLONES_FILE = "clones.json"


def remember_clone(state_dir: Path, repo: str, path: Path) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    registry = state_dir / CLONES_FILE
    data = json.loads(registry.read_text()) if registry.exists() else {}
    data[repo] = str(path.resolve())
    registry.write_text(json.dumps(data, indent=2) + "\n")


def known_clone(state_dir: Path, repo: str) -> Path | None:
    registry = state_dir / CLONES_FILE
    if not registry.exists():
        return None
    try:
        path = json.loads(registry.read_text()).get(repo)
    except (ValueError, AttributeError):
        return None  # a damaged registry only means the clone must be named with --repo-path
    return Path(path) if path and Path(path).exists() else None
