"""Where named configs are found: a path first, then the project's folder, then the ones built in.

Profiles (`--profile`) and agent configs (`--agent`) are looked up the same way, the way mini-swe-agent finds
its configs: a value that is a file path is read as it is; a name is looked up in `<config dir>/profiles/` or
`<config dir>/agents/` — the config dir is `$SWESERVE_CONFIG_DIR`, else the project's `.sweserve/` (the
state dir) — and then among the files shipped inside the package.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

ENV_VAR = "SWESERVE_CONFIG_DIR"
BUILTIN = {"profiles": ("sweserve.dataset", "builtin_profiles"), "agents": ("sweserve.harness", "agents")}


@dataclass(frozen=True)
class ConfigSearch:
    user_dir: Path | None = None

    @classmethod
    def for_project(cls, state_dir: Path | str = ".sweserve", env: Mapping[str, str] = os.environ) -> "ConfigSearch":
        return cls(Path(env[ENV_VAR]) if env.get(ENV_VAR) else Path(state_dir))

    def dirs(self, kind: str) -> list[Traversable]:
        package, folder = BUILTIN[kind]
        found: list[Traversable] = []
        if self.user_dir is not None and (self.user_dir / kind).is_dir():
            found.append(self.user_dir / kind)
        found.append(resources.files(package).joinpath(folder))
        return found

    def find(self, kind: str, name: str, suffixes: tuple[str, ...]) -> Traversable | None:
        """The first file called name+suffix in the user folder, then the built-ins."""
        for folder in self.dirs(kind):
            for suffix in suffixes:
                candidate = folder.joinpath(f"{name}{suffix}")
                if candidate.is_file():
                    return candidate
        return None

    def names(self, kind: str, suffixes: tuple[str, ...]) -> list[str]:
        return sorted({entry.name.rsplit(".", 1)[0] for folder in self.dirs(kind) for entry in folder.iterdir()
                       if entry.is_file() and entry.name.endswith(suffixes)})


def looks_like_path(spec: str, suffixes: tuple[str, ...]) -> bool:
    return spec.endswith(suffixes) or "/" in spec or os.sep in spec
