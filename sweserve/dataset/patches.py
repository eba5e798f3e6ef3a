"""Reading git patches: which files a patch touches, and dropping the sections for some of them; and the one
command that applies a patch, wherever sweserve applies one (graders, agents, exported tasks)."""

from __future__ import annotations

import fnmatch
import re
import shlex

# binary hunks included, whitespace as the patch has it: `git diff --binary` output applies as it was taken
APPLY = ("git", "apply", "--binary", "--whitespace=nowarn")
_HEADER = re.compile(r"^diff --git ", re.MULTILINE)
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


# Files Python or pytest load by themselves whenever the hidden tests run, wherever they sit on the path: a
# candidate that adds one (say python/sitecustomize.py with an atexit hook rewriting the outcomes file) would
# grade itself. Graders drop them from a candidate's diff, like its edits to test files.
INTERPRETER_HOOKS = ("sitecustomize.py", "usercustomize.py", "conftest.py", "*.pth")


def is_interpreter_hook(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in INTERPRETER_HOOKS)


def _unquote(path: str) -> str:
    """git's C-style quoted path ("a/caf\\303\\251") back to text."""
    if not (path.startswith('"') and path.endswith('"')):
        return path
    body, out, i = path[1:-1], bytearray(), 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "01234567" and i + 3 < len(body) + 1:
                out.append(int(body[i + 1:i + 4], 8))
                i += 4
                continue
            out.extend(_ESCAPES.get(nxt, nxt).encode())
            i += 2
            continue
        out.extend(ch.encode())
        i += 1
    return out.decode("utf-8", "replace")


def _strip_prefix(path: str) -> str | None:
    path = _unquote(path.strip())
    if path == "/dev/null":
        return None
    return path[2:] if path[:2] in ("a/", "b/") else path


def split_sections(patch: str) -> list[str]:
    """The per-file sections of a `git diff`, each starting at its `diff --git` line."""
    starts = [m.start() for m in _HEADER.finditer(patch)]
    return [patch[s:e] for s, e in zip(starts, starts[1:] + [len(patch)])]


def new_path(section: str) -> str | None:
    """A section's path after the patch, from its `+++ ` line (git's quoting undone); None where it deletes the
    file or has no such line (mode-only, binary)."""
    for line in section.splitlines()[1:]:
        if line.startswith("+++ "):
            return _strip_prefix(line[4:].split("\t")[0])
        if line.startswith(("@@", "GIT binary patch")):
            break
    return None


def section_paths(section: str) -> set[str]:
    """Every path a section touches: old and new names of a rename or copy included."""
    paths: set[str] = set()
    lines = section.splitlines()
    for line in lines[1:]:
        if line.startswith(("--- ", "+++ ")):
            p = _strip_prefix(line[4:].split("\t")[0])
        elif line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
            p = _unquote(line.split(" ", 2)[2])
        elif line.startswith(("@@", "GIT binary patch")):
            break
        else:
            continue
        if p:
            paths.add(p)
    if not paths and lines:  # mode-only or binary section: take the header, `a/X b/X`
        rest = lines[0][len("diff --git "):]
        half = len(rest) // 2
        if rest[half] == " ":
            for p in (rest[:half], rest[half + 1:]):
                if (q := _strip_prefix(p)):
                    paths.add(q)
    return paths


def touched_paths(patch: str) -> set[str]:
    return set().union(*(section_paths(s) for s in split_sections(patch))) if patch else set()


def drop_paths(patch: str, drop) -> tuple[str, list[str]]:
    """The patch without sections touching a path for which drop(path) is true, and those paths."""
    kept, dropped = [], []
    for section in split_sections(patch):
        hits = sorted(p for p in section_paths(section) if drop(p))
        if hits:
            dropped.extend(hits)
        else:
            kept.append(section)
    return "".join(kept), dropped


def apply_command(path: str, index: bool = False, cached: bool = False, git: str = "git") -> str:
    """The shell command applying the patch file at `path` to the repository in the current directory; with
    index, git's index records every path it touched (new files included); cached: to the index alone. `git`:
    the command line that runs git (options of its own before `apply`), as shell text."""
    mode = ["--index"] if index else ["--cached"] if cached else []
    return f"{git} " + shlex.join([APPLY[1], *mode, *APPLY[2:], path])
