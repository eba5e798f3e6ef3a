"""The hidden tests' new vocabulary: words the tests need that only the oracle brings, and the instruction must give.

The interface reader (``interface.py``) judges only the names it can resolve statically; a name it cannot
("unknown": a private class, an attribute set at run time, a keyword swallowed by ``**kwargs``, a function of a
module the tests load by file path, an environment variable, a flag) is never judged. This check fails closed
instead, on words rather than resolved names. A **token** is what the lines tests.patch adds use:

- identifiers: names, attribute names, keyword-argument names, imported names and the parts of imported modules;
- string literals that look like command-line flags (``--x-y``) or environment variables (``UPPER_CASE_X``).

Tokens are read from every Python file of tests.patch before validation, and after it from the test modules
holding a FAIL_TO_PASS test and the helpers (conftest, imported modules): a whole module is imported to run one
of its tests. A token is **new vocabulary** when (a) the oracle's added lines (or the paths of the files it adds) contain it as
a word, (b) it appears nowhere in the repository at base_commit (one ``git grep -o -w -F`` over all candidate
tokens), and (c) the tests do not define it themselves (their functions, classes, parameters, assignment and loop
targets, import aliases, exception names, attributes they assign). Every such token must be mentioned in
instruction.md — as a word, or inside a mentioned dotted name or signature; an identifier also counts as
mentioned by its flag spelling (``enable_foo`` by ``--enable-foo``). Builtins and keywords are never tokens.

Limits, on purpose: words are compared, not meanings (a statement that says "outstanding" in prose mentions
``.outstanding``); git's ``-w`` takes a flag as present at base when a longer flag starts with it
(``--foo`` in ``--foo-bar``).
"""

from __future__ import annotations

import ast
import builtins
import functools
import keyword
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from sweserve.dataset.patches import new_path, split_sections
from sweserve.gitcmd import GitError, last_line, run_git

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
FLAG = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*[A-Za-z0-9]")
ENV = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")
_NEVER = set(dir(builtins)) | set(keyword.kwlist) | set(keyword.softkwlist) | {"self", "cls"}


class VocabularyUnchecked(Exception):
    """git could not search the base commit (a missing or corrupt object): the check cannot vouch for the task."""


def added_lines(patch: str) -> dict[str, dict[int, str]]:
    """Per file of a git patch (its new path), the added lines by their line number in the new file."""
    out: dict[str, dict[int, str]] = {}
    for section in split_sections(patch):
        path = new_path(section)
        number = 0
        in_hunk = False
        for line in section.splitlines():
            hunk = _HUNK.match(line)
            if hunk:
                in_hunk, number = True, int(hunk.group(1))
                continue
            if not in_hunk:
                continue
            if path is None or line.startswith("\\"):
                continue
            if line.startswith("+"):
                out.setdefault(path, {})[number] = line[1:]
                number += 1
            elif line.startswith(" ") or line == "":
                number += 1
    return out


def added_files(patch: str) -> list[str]:
    """The paths a patch creates."""
    return [path for section in split_sections(patch)
            if ("\nnew file mode" in section or "\n--- /dev/null" in section) and (path := new_path(section))]


def _strings(value: str) -> Iterator[str]:
    yield from FLAG.findall(value)
    if ENV.fullmatch(value):
        yield value


def _node_tokens(node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Attribute):
        yield node.attr
    elif isinstance(node, ast.keyword) and node.arg:
        yield node.arg
    elif isinstance(node, ast.ImportFrom):
        yield from (node.module or "").split(".")
        yield from (a.name for a in node.names if a.name != "*")
    elif isinstance(node, ast.Import):
        for a in node.names:
            yield from a.name.split(".")
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield from _strings(node.value)


def _root(node: ast.AST) -> str | None:
    """The name an attribute chain or call starts from: `np` of `np.linalg.norm(x).sum`."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def foreign_names(tree: ast.Module, local: Callable[[str], bool]) -> tuple[set[str], set[int]]:
    """(names the file binds to modules of other projects, or to their members; ids of its import statements
    of such modules). local(top) says whether a top-level module is the repository's own (or the tests')."""
    names: set[str] = set()
    imports: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if not local(a.name.split(".")[0]):
                    names.add(a.asname or a.name.split(".")[0])
                    imports.add(id(node))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if not local(node.module.split(".")[0]):
                names.update(a.asname or a.name for a in node.names)
                imports.add(id(node))
    return names, imports


def used_tokens(tree: ast.Module, lines: Iterable[int], local: Callable[[str], bool] | None = None) -> set[str]:
    """The tokens of the nodes of tree that start on one of these lines (a string spanning lines: any of its lines).
    With local, what belongs to other projects is left out: names imported from them and the attributes of chains
    rooted at those names (`np.isscalar`). Keywords of their calls stay: `SimpleNamespace(x=1)`,
    `MagicMock(x=1)` and `mock.patch.dict(os.environ, X="1")` give the repository's code the words it reads."""
    wanted = set(lines)
    foreign, foreign_imports = foreign_names(tree, local) if local else (set(), set())
    skip: set[int] = set(foreign_imports)
    if foreign:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _root(node) in foreign:
                skip.add(id(node))
            elif isinstance(node, ast.Name) and node.id in foreign:
                skip.add(id(node))
    tokens: set[str] = set()
    for node in ast.walk(tree):
        start = getattr(node, "lineno", None)
        if start is None or id(node) in skip:
            continue
        end = getattr(node, "end_lineno", None) or start
        on = start in wanted or (isinstance(node, ast.Constant) and any(n in wanted for n in range(start, end + 1)))
        if isinstance(node, ast.Attribute):  # `a.b` on the line where .b is written
            on = (node.end_lineno or start) in wanted
        if on:
            tokens.update(_node_tokens(node))
    return tokens


def defined_names(tree: ast.Module) -> set[str]:
    """What a test file defines itself: functions, classes, parameters, assignment and loop targets, import
    aliases, exception names, global names and the attributes it assigns."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.alias) and node.asname:
            names.add(node.asname)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
    return names


def _regex_tokens(lines: Iterable[str]) -> set[str]:
    """A file that does not parse: every identifier and flag of its added lines (comments cut)."""
    tokens: set[str] = set()
    for line in lines:
        code = line.split("#", 1)[0]
        tokens.update(IDENT.findall(code))
        tokens.update(FLAG.findall(line))
    return tokens


def _is_test_module(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.startswith("test_") or name.endswith("_test.py")


def graded(path: str, fail_to_pass: list[str]) -> bool:
    """Whether the hidden tests run a file of tests.patch: any file before validation (no FAIL_TO_PASS yet); after,
    a test module holding a FAIL_TO_PASS test (ids may be relative to pytest's rootdir) or a helper (conftest,
    a module tests import)."""
    if not fail_to_pass or not _is_test_module(path):
        return True
    files = {test_id.split("::", 1)[0] for test_id in fail_to_pass}
    return any(path == f or path.endswith("/" + f) for f in files)


def tests_vocabulary(tests_patch: str, parse: Callable[[str], ast.Module | None],
                     fail_to_pass: list[str] | None = None,
                     local: Callable[[str, str], bool] | None = None) -> tuple[set[str], set[str]]:
    """(tokens the added lines of tests.patch's Python files use, names those files define). parse(path) gives a
    test file's syntax tree after the patch (None when it cannot be read or parsed: its added lines are read
    with a regular expression then); local(path, top) whether test file path's top-level import top is the
    repository's own (None: every module is)."""
    used: set[str] = set()
    defined: set[str] = set()
    for path, lines in added_lines(tests_patch).items():
        if not path.endswith(".py") or not graded(path, fail_to_pass or []):
            continue
        tree = parse(path)
        if tree is None:
            used |= _regex_tokens(lines.values())
            continue
        used |= used_tokens(tree, lines, None if local is None else functools.partial(local, path))
        defined |= defined_names(tree)
    return used, defined


def word_in(token: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(token)}(?![\w-])", text) is not None


def oracle_words(oracle_patch: str) -> str:
    """The text the oracle adds: its added lines and the paths of the files it creates."""
    lines = [ln for per_file in added_lines(oracle_patch).values() for ln in per_file.values()]
    paths = [p.removesuffix(".py").replace("/", " ") for p in added_files(oracle_patch)]
    return "\n".join(lines + paths)


def mentioned(token: str, instruction: str) -> bool:
    """As a word (so also inside a dotted name or a signature), or an identifier by its flag spelling."""
    if word_in(token, instruction):
        return True
    return not token.startswith("-") and "_" in token.strip("_") and word_in(
        "--" + token.strip("_").replace("_", "-"), instruction)


def at_base(repo_path: Path, base_commit: str, tokens: Iterable[str]) -> set[str]:
    """The tokens that occur as words somewhere in the repository at base_commit: one `git grep` process."""
    patterns = sorted(set(tokens))
    if not patterns:
        return set()
    try:
        out = run_git("grep", "-o", "-w", "-F", "-h", "-I", "--no-color", "-f", "-", base_commit,
                      repo=repo_path, input=("\n".join(patterns) + "\n").encode(), ok=(0, 1))
    except GitError as exc:
        raise VocabularyUnchecked(f"git grep at {base_commit[:10]}: {last_line(exc.stderr, str(exc))}") from None
    return set(out.decode("utf-8", "replace").splitlines()) & set(patterns)  # -h: the matched words alone


def new_vocabulary(repo_path: Path, base_commit: str, oracle_patch: str, tests_patch: str, instruction: str,
                   parse: Callable[[str], ast.Module | None], fail_to_pass: list[str] | None = None,
                   local: Callable[[str, str], bool] | None = None) -> list[str]:
    """The tokens the hidden tests need that only the oracle adds and the instruction never mentions, sorted."""
    used, defined = tests_vocabulary(tests_patch, parse, fail_to_pass, local)
    words = oracle_words(oracle_patch)
    candidates = {t for t in used - defined - _NEVER
                  if word_in(t, words) and not mentioned(t, instruction)}
    return sorted(candidates - at_base(repo_path, base_commit, candidates))


def finding(tokens: list[str], shown: int = 6) -> str:
    return ("tests need new names the instruction never gives: " + ", ".join(f"`{t}`" for t in tokens[:shown])
            + (f" and {len(tokens) - shown} more" if len(tokens) > shown else ""))
