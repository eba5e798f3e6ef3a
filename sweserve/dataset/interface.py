"""The "New interfaces" section: names the hidden tests use that base_commit lacks and the oracle adds.

Deterministic, no model. The hidden test files (after tests.patch) are read with ``ast``: their imports,
the attribute chains and calls rooted at imported names or at variables holding instances of them, the
keyword arguments of those calls, the exception types of ``pytest.raises`` / ``assertRaises``, and
``--flag`` strings. Each name is looked up statically in two states of the repository, built from the
clone without a checkout (a temporary git index and object folder, the clone's objects as alternates):
*before* = base + tests.patch and *after* = base + oracle + tests.patch. A name missing before and
present after is new: it goes into the section with its signature and the summary of its docstring
as the oracle defines it. A name missing in both is *unknown*: the tests need something no static
reading can find (a dynamically created attribute, a keyword swallowed by ``**kwargs``), which no
section can announce. The section is written into instruction.md between marker comments, so computing
it again replaces it. Items are listed in one total order (kind, then name), whatever order the tests
meet them in.

A clone may lack objects (a partial clone, a lost blob): the states are built without reading blobs, so
a missing object only matters when lint reads it. A file that cannot be read is ``unreadable`` in the
report, with git's message; states that cannot be built at all (a patch whose preimage is missing, or
that does not apply) raise ``Unreadable``, for that task alone.
"""

from __future__ import annotations

import ast
import os
import posixpath
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field

from sweserve import pyast
from sweserve.dataset.patches import APPLY, touched_paths
from sweserve.errors import SweserveError
from sweserve.gitcmd import GitError, last_line, run_git
from sweserve.models import CLOSE_MARK, OPEN_MARK, InterfaceItem, InterfaceKind, Task

# a section: an open marker, no other open marker, the close marker (a stray marker in a PR body eats nothing)
_SECTION = re.compile(rf"\n*{re.escape(OPEN_MARK)}(?:(?!{re.escape(OPEN_MARK)}).)*?{re.escape(CLOSE_MARK)}\n*",
                      re.DOTALL)
FLAG = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*[A-Za-z0-9]")
RAISES = {"raises", "assertRaises", "assertRaisesRegex", "assertRaisesRegexp"}
MAX_DEPTH = 12
KIND_ORDER = ("module", "class", "exception", "function", "method", "attribute", "keyword", "flag", "changed")
SETUP_METHODS = {"setUp", "setUpClass", "asyncSetUp", "setup_method", "setup_class", "setup", "__init__",
                 "tearDown", "tearDownClass", "asyncTearDown", "teardown_method", "teardown_class", "teardown"}
_ARRAY_MAKERS = {"array", "asarray", "zeros", "ones", "full", "empty", "arange", "stack", "concatenate", "tensor",
                 "as_tensor", "from_numpy", "zeros_like", "ones_like", "full_like", "device_put"}
_ARRAY_MODULES = {"np", "numpy", "jnp", "jax", "torch", "onp"}


class Unreadable(SweserveError):
    """git cannot build or read one task's repository states: a patch does not apply, an object is missing or
    corrupt. The message is git's own; lint records it for that task and goes on with the others."""


# ---------------------------------------------------------------- repository states, read with git


class _Git:
    """git on a clone (bare or not) with a private index and object folder: the clone is never written."""

    def __init__(self, repo: Path, tmp: Path):
        self.repo, self.tmp = repo, tmp
        try:
            common = self.run("rev-parse", "--git-common-dir", env={}).decode().strip()
        except Unreadable as exc:
            raise SweserveError(f"{repo} is not a git clone: {exc}") from None
        objects = (repo / common / "objects").resolve()
        (tmp / "objects").mkdir()
        self.env = {**os.environ, "GIT_OBJECT_DIRECTORY": str(tmp / "objects"),
                    "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(objects)}
        self._blobs: dict[str, str] = {}
        self.unreadable: dict[str, str] = {}  # "path at state" -> git's message

    def run(self, *args: str, env: dict | None = None, input: bytes | None = None, ok=(0,)) -> bytes:
        try:
            return run_git(*args, repo=self.repo, env=self.env if env is None else env, input=input, ok=ok)
        except GitError as exc:
            raise Unreadable(f"git {exc.subcommand}: {last_line(exc.stderr, f'exited {exc.returncode}')}") from None

    def tree(self, base: str, patches: list[tuple[str, str]], name: str) -> str:
        """The tree of base with these patches applied (in a temporary index), written to the private objects."""
        env = {**self.env, "GIT_INDEX_FILE": str(self.tmp / f"index-{name}")}
        self.run("read-tree", base, env=env)
        for label, patch in patches:
            if not patch.strip():
                continue
            try:
                run_git(*APPLY[1:], "--cached", "-", repo=self.repo, env=env, input=patch.encode())
            except GitError as exc:
                errors = [ln.strip() for ln in exc.stderr.decode(errors="replace").splitlines()
                          if ln.startswith(("error:", "fatal:"))]  # the first says why (a blob it cannot read)
                raise Unreadable(f"{label}.patch does not apply at {base[:10]}: "
                                 + ("; ".join(dict.fromkeys(errors)) or f"git apply exited {exc.returncode}")) from None
        # --missing-ok: a blob the clone lacks stays in the tree by id; only reading it fails
        return self.run("write-tree", "--missing-ok", env=env).decode().strip()

    def files(self, tree: str) -> dict[str, str]:
        out = self.run("ls-tree", "-r", "-z", tree).decode("utf-8", "surrogateescape")
        files = {}
        for entry in filter(None, out.split("\0")):
            meta, path = entry.split("\t", 1)
            _, kind, sha = meta.split()
            if kind == "blob":
                files[path] = sha
        return files

    def blob(self, sha: str) -> str:
        if sha not in self._blobs:
            self._blobs[sha] = self.run("cat-file", "blob", sha).decode("utf-8", "replace")
        return self._blobs[sha]

    def grep(self, tree: str, needle: str, state: str) -> list[str]:
        """The Python files of tree holding needle; none, recorded as unreadable, when git cannot read one."""
        try:
            out = self.run("grep", "-F", "-l", "-e", needle, tree, "--", "*.py", ok=(0, 1)).decode()
        except Unreadable as exc:
            self.unreadable.setdefault(f"*.py at {state} (searching {needle})", str(exc))
            return []
        return [line.split(":", 1)[1] for line in out.splitlines() if ":" in line]


@dataclass
class Module:
    name: str
    path: str
    package: str
    tree: ast.Module | None
    defs: dict[str, ast.AST | tuple[str, ...]] = field(default_factory=dict)  # a node, or where it is imported from
    stars: list[str] = field(default_factory=list)
    dynamic: bool = False


@dataclass
class Found:
    """Where a dotted name is defined; opaque when it exists but what it is cannot be read statically."""

    module: Module | None
    node: ast.AST | None = None
    qual: str = ""
    owner: ast.ClassDef | None = None
    opaque: bool = False
    inherited: bool = False  # not in the repository's class chain; a base from outside may provide it

    @property
    def dotted(self) -> str:
        return ".".join(p for p in (self.module.name if self.module else "", self.qual) if p)


class SourceTree:
    """The Python sources of one repository state, parsed on demand."""

    def __init__(self, git: _Git, tree: str, roots: list[str], parsed: dict, state: str):
        self.git, self.tree, self.roots, self.state = git, tree, roots, state
        self.files = git.files(tree)
        self._parsed = parsed  # blob sha -> ast.Module | None, shared between states
        self._modules: dict[tuple, Module | None] = {}
        self._dirs = {posixpath.dirname(p) for p in self.files}
        self._dirs |= {d for p in list(self._dirs) for d in _parents(p)}
        self.cache: dict = {}

    def parse(self, path: str) -> ast.Module | None:
        sha = self.files.get(path)
        if sha is None:
            return None
        if sha not in self._parsed:
            try:
                self._parsed[sha] = pyast.parse_module(self.git.blob(sha))
            except (SyntaxError, ValueError):
                self._parsed[sha] = None
            except Unreadable as exc:  # read as a file that cannot be parsed: what it defines is opaque
                self._parsed[sha] = None
                self.git.unreadable.setdefault(f"{path} at {self.state}", str(exc))
        return self._parsed[sha]

    def module_path(self, name: str, roots: list[str] | None = None) -> str | None:
        rel = name.replace(".", "/")
        for root in (roots or []) + self.roots:
            prefix = "" if root in ("", ".") else root.strip("/") + "/"
            for candidate in (f"{prefix}{rel}.py", f"{prefix}{rel}/__init__.py"):
                if candidate in self.files:
                    return candidate
            if f"{prefix}{rel}" in self._dirs:  # namespace package
                return f"{prefix}{rel}/"
        return None

    def module(self, name: str, roots: list[str] | None = None) -> Module | None:
        key = (name, tuple(roots or ()))
        if key not in self._modules:
            path = self.module_path(name, roots)
            tree = None if path is None or path.endswith("/") else self.parse(path)
            self._modules[key] = None if path is None else _read_module(name, path, tree)
        return self._modules[key]


def _parents(path: str) -> Iterator[str]:
    while path:
        path = posixpath.dirname(path)
        if path:
            yield path


def _read_module(name: str, path: str, tree: ast.Module | None) -> Module:
    is_pkg = path.endswith("/") or path.endswith("__init__.py")
    mod = Module(name=name, path=path, package=name if is_pkg else name.rpartition(".")[0], tree=tree)
    if tree is None:
        mod.dynamic = not path.endswith("/")
        return mod

    def visit(stmts):
        for st in stmts:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                mod.defs[st.name] = st
                if st.name == "__getattr__":
                    mod.dynamic = True
            elif isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = st.targets if isinstance(st, ast.Assign) else [st.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            mod.defs[n.id] = st
            elif isinstance(st, ast.Import):
                for a in st.names:
                    if a.asname:
                        mod.defs[a.asname] = ("module", a.name)
                    else:
                        head = a.name.split(".")[0]
                        mod.defs[head] = ("module", head)
            elif isinstance(st, ast.ImportFrom):
                source = _absolute(st, mod.package)
                if source is None:
                    continue
                for a in st.names:
                    if a.name == "*":
                        mod.stars.append(source)
                    else:
                        mod.defs[a.asname or a.name] = ("from", source, a.name)
            elif isinstance(st, (ast.If, ast.Try, ast.With)):
                visit(st.body)
                visit(getattr(st, "orelse", []))
                visit(getattr(st, "finalbody", []))
                for h in getattr(st, "handlers", []):
                    visit(h.body)
            if isinstance(st, (ast.Expr, ast.Assign)) and any(
                    isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("globals", "setattr")
                    for n in ast.walk(st)):
                mod.dynamic = True

    visit(tree.body)
    return mod


def _absolute(node: ast.ImportFrom, package: str) -> str | None:
    if not node.level:
        return node.module
    parts = package.split(".") if package else []
    if node.level - 1 > len(parts):
        return None
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else [])) or None


# ---------------------------------------------------------------- static lookup of dotted names


def resolve(tree: SourceTree, module: str, parts: tuple[str, ...], roots: list[str] | None = None,
            depth: int = 0) -> Found | None:
    """Where module.parts is defined in this state; None when it is missing; opaque when it can't be told."""
    key = (module, parts, tuple(roots or ()))
    if depth == 0 and key in tree.cache:
        return tree.cache[key]
    mod = tree.module(module, roots)
    result = Found(None, opaque=True) if mod is None else _in_module(tree, mod, parts, depth)
    if depth == 0:
        tree.cache[key] = result
    return result


def _in_module(tree: SourceTree, mod: Module, parts: tuple[str, ...], depth: int) -> Found | None:
    if not parts:
        return Found(mod, None, "")
    if depth > MAX_DEPTH:
        return Found(mod, opaque=True)
    head, rest = parts[0], parts[1:]
    d = mod.defs.get(head)
    if d is None:
        is_package = mod.path.endswith(("/", "__init__.py"))
        if is_package and (sub := tree.module(f"{mod.name}.{head}")) is not None:
            return _in_module(tree, sub, rest, depth + 1)
        for star in mod.stars:
            found = resolve(tree, star, parts, depth=depth + 1)
            if found is not None and not (found.opaque and found.module is None):
                return found
        if mod.dynamic or mod.tree is None:
            return Found(mod, qual=head, opaque=True)
        return None
    if isinstance(d, tuple):
        if d[0] == "module":
            return resolve(tree, d[1], rest, depth=depth + 1)
        return resolve(tree, d[1], (d[2],) + rest, depth=depth + 1)
    if isinstance(d, ast.ClassDef):
        return _in_class(tree, mod, d, head, rest, depth)
    if rest:
        return Found(mod, d, head, opaque=True)  # an attribute of a function or a value: not followed
    return Found(mod, d, head)


def _members(cls: ast.ClassDef) -> dict[str, ast.AST]:
    members: dict[str, ast.AST] = {}
    for st in cls.body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            members[st.name] = st
        elif isinstance(st, (ast.Assign, ast.AnnAssign)):
            for t in st.targets if isinstance(st, ast.Assign) else [st.target]:
                if isinstance(t, ast.Name):
                    members[t.id] = st
    for fn in cls.body:
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(fn):
                if isinstance(n, (ast.Assign, ast.AnnAssign)):
                    for target in n.targets if isinstance(n, ast.Assign) else [n.target]:
                        for w in ast.walk(target):  # self.a, self.b = ...
                            if isinstance(w, ast.Attribute) and isinstance(w.value, ast.Name) and w.value.id == "self":
                                members.setdefault(w.attr, n)
    return members


def _in_class(tree: SourceTree, mod: Module, cls: ast.ClassDef, qual: str, rest: tuple[str, ...],
              depth: int) -> Found | None:
    if not rest:
        return Found(mod, cls, qual)
    name, deeper = rest[0], rest[1:]
    member = _members(cls).get(name)
    if member is not None:
        if isinstance(member, ast.ClassDef):
            return _in_class(tree, mod, member, f"{qual}.{name}", deeper, depth + 1)
        return Found(mod, member, f"{qual}.{name}", cls, opaque=bool(deeper))
    if depth > MAX_DEPTH:
        return Found(mod, opaque=True)
    outside = False
    for base in cls.bases:
        chain = _chain(base)
        if not chain or chain == ["object"]:
            continue
        found = _in_module(tree, mod, tuple(chain) + rest, depth + 1) if chain[0] in mod.defs else None
        if found is None and chain[0] not in mod.defs:
            outside = True  # a builtin base (Exception, dict)
        elif found is not None and found.opaque and found.module is None:
            outside = True  # a base from another package
        elif found is not None:
            return found
    if outside or "__getattr__" in _members(cls) or cls.keywords:  # metaclass or dynamic attributes
        return Found(mod, qual=f"{qual}.{name}", opaque=True, inherited=True)
    return None


def _chain(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id] + parts[::-1]


# ---------------------------------------------------------------- what a definition looks like


DOC_SUMMARY_CHARS = 300  # a summary longer than this is cut at a sentence's end


def _doc(node: ast.AST | None) -> str:
    """A docstring's summary: its first paragraph, on one line. A first line alone can stop mid-sentence
    ("Padding rows go to the sentinel (slot 0 is"), and the sentence is what a solver needs; a long paragraph
    is cut after its last whole sentence within DOC_SUMMARY_CHARS."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
        return ""
    doc = (ast.get_docstring(node) or "").strip()
    paragraph = " ".join(doc.split("\n\n")[0].split())
    if len(paragraph) <= DOC_SUMMARY_CHARS:
        return paragraph
    head = paragraph[:DOC_SUMMARY_CHARS]
    end = max(head.rfind(". "), head.rfind("? "), head.rfind("! "))
    return head[:end + 1] if end > 0 else head.rstrip() + "..."


# A signature is the contract a test calls: cut at 300 characters, a new parameter's type (a callback's
# argument order) went missing from the section. Only a pathological one is cut.
SIGNATURE_CHARS = 4000


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_dataclass_like(cls: ast.ClassDef) -> bool:
    names = {(_chain(d.func if isinstance(d, ast.Call) else d) or [""])[-1] for d in cls.decorator_list}
    bases = {(_chain(b) or [""])[-1] for b in cls.bases}
    return bool(names & {"dataclass", "dataclasses", "attrs", "define", "frozen"} or
                bases & {"BaseModel", "NamedTuple", "TypedDict", "Strict"})


def _fields(cls: ast.ClassDef) -> list[ast.AnnAssign]:
    """The annotated names of a class body that are fields (a ClassVar is not); each target an ast.Name."""
    return [st for st in cls.body if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)
            and (_chain(st.annotation.value if isinstance(st.annotation, ast.Subscript) else st.annotation)
                 or [""])[-1] != "ClassVar"]


def signature(found: Found) -> str:
    node = found.node
    name = found.qual.rsplit(".", 1)[-1]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        prefix = "async " if isinstance(node, ast.AsyncFunctionDef) else ""
        ret = f" -> {ast.unparse(node.returns)}" if node.returns else ""
        return _short(f"{prefix}{name}({ast.unparse(node.args)}){ret}", SIGNATURE_CHARS)
    if isinstance(node, ast.ClassDef):
        bases = ", ".join(ast.unparse(b) for b in node.bases + node.keywords)
        text = f"class {name}({bases})" if bases else f"class {name}"
        init = _members(node).get("__init__")
        if isinstance(init, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = ast.unparse(init.args)
            args = re.sub(r"^self(, )?", "", args)
            text += f"; {name}({args})"
        elif _is_dataclass_like(node) and _fields(node):
            text += f"; {name}({', '.join(ast.unparse(f.target) + ': ' + ast.unparse(f.annotation) + (' = ' + ast.unparse(f.value) if f.value else '') for f in _fields(node))})"
        return _short(text, SIGNATURE_CHARS)
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        return _short(ast.unparse(node).splitlines()[0])
    return ""


def _kind(found: Found, exception: bool) -> InterfaceKind:
    node = found.node
    if node is None:
        return "attribute" if found.qual else "module"
    if isinstance(node, ast.ClassDef):
        bases = [(_chain(b) or [""])[-1] for b in node.bases]
        if exception or node.name.endswith(("Error", "Exception")) or any(
                b.endswith(("Error", "Exception", "Warning")) for b in bases):
            return "exception"
        return "class"
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        decorators = {(_chain(d) or [""])[-1] for d in node.decorator_list}
        if found.owner is not None:
            return "attribute" if decorators & {"property", "cached_property"} else "method"
        return "function"
    return "attribute"


def _item(found: Found, exception: bool = False) -> InterfaceItem:
    doc = _doc(found.node if found.node is not None else (found.module.tree if found.module else None))
    return InterfaceItem(kind=_kind(found, exception), name=found.dotted, signature=signature(found), doc=_short(doc),
                         path=found.module.path if found.module else "")


@dataclass
class Params:
    names: set[str]
    var_kw: bool


def params(tree: SourceTree, found: Found | None) -> Params | None:
    """The keyword arguments a found callable accepts, or None when they cannot be read."""
    if found is None or found.opaque:
        return None
    node = found.node
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        a = node.args
        return Params({x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}, a.kwarg is not None)
    if isinstance(node, ast.ClassDef) and found.module is not None:
        init = _in_class(tree, found.module, node, found.qual, ("__init__",), 0)
        if init is not None and not init.opaque:
            return params(tree, init)
        if _is_dataclass_like(node):
            return _dataclass_params(tree, found.module, node, 0)
    return None


def _dataclass_params(tree: SourceTree, mod: Module, cls: ast.ClassDef, depth: int) -> Params | None:
    """Fields of a dataclass-like class and of its bases in the repository; None if a base is outside."""
    names = {f.target.id for f in _fields(cls) if isinstance(f.target, ast.Name)}
    for base in cls.bases:
        chain = _chain(base)
        last = (chain or [""])[-1]
        if last in ("BaseModel", "NamedTuple", "TypedDict", "object", "Generic", "ABC", "Protocol"):
            continue
        if not chain or chain[0] not in mod.defs or depth > MAX_DEPTH:
            return None
        found = _in_module(tree, mod, tuple(chain), depth + 1)
        if found is None or found.opaque or found.module is None or not isinstance(found.node, ast.ClassDef):
            return None
        inner = _dataclass_params(tree, found.module, found.node, depth + 1)
        if inner is None:
            return None
        names |= inner.names
    return Params(names, False) if names else None


# ---------------------------------------------------------------- what the hidden tests use


@dataclass(frozen=True)
class Ref:
    module: str
    parts: tuple[str, ...] = ()
    keyword: str | None = None
    exception: bool = False
    flag: str | None = None
    via: int = 0  # parts[:via] name the class of an instance the test made (x = Cls(); x.meth())
    call: bool = False  # the test calls it: its signature and return type matter
    nargs: int = 0  # positional arguments the call passes (a large number for *args)


@dataclass
class _TestFile:
    path: str
    tree: ast.Module
    roots: list[str]
    package: str


class Need(BaseModel):
    """A name one test needs that base_commit lacks: new (the oracle adds it) or unknown (nobody visibly does)."""

    name: str
    word: str = Field(description="what the instruction must mention for the test to be fair")
    status: str  # new, unknown


class InterfaceReport(BaseModel):
    items: list[InterfaceItem] = Field(default_factory=list)
    source: str = "tests_patch"
    tests: list[str] = Field(default_factory=list, description="test ids read")
    not_found: list[str] = Field(default_factory=list, description="test ids whose function was not found")
    needs: dict[str, list[Need]] = Field(default_factory=dict)
    unreadable: dict[str, str] = Field(default_factory=dict, description="file read (path at base or at the oracle) "
                                       "-> git's message: the clone cannot read it, so names there are not judged")


def _test_targets(files: dict[str, _TestFile], ids: list[str] | None, workdir: str):
    """(test id, file, function, class) for FAIL_TO_PASS ids, or for every test function in the files."""
    targets: list[tuple[str, _TestFile, ast.FunctionDef | ast.AsyncFunctionDef, ast.ClassDef | None]] = []
    not_found: list[str] = []
    tf: _TestFile | None
    if ids is None:
        for path, tf in sorted(files.items()):
            for node in tf.tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                    targets.append((f"{path}::{node.name}", tf, node, None))
                elif isinstance(node, ast.ClassDef):
                    for m in node.body:
                        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name.startswith("test"):
                            targets.append((f"{path}::{node.name}::{m.name}", tf, m, node))
        return targets, not_found
    for test_id in ids:
        path, *names = test_id.split("::")
        names = [re.sub(r"\[.*\]$", "", n) for n in names]
        tf = files.get(posixpath.normpath(posixpath.join(workdir, path)))
        if tf is None:  # pytest names files from its rootdir (the folder of an ini file), not the workdir
            matches = [f for p, f in files.items() if p.endswith("/" + path)]
            tf = matches[0] if len(matches) == 1 else None
        found = None
        if tf is not None and names:
            scope, cls = tf.tree.body, None
            for n in names[:-1]:
                cls = next((c for c in scope if isinstance(c, ast.ClassDef) and c.name == n), None)
                scope = cls.body if cls else []
            classes = {c.name: c for c in tf.tree.body if isinstance(c, ast.ClassDef)}
            owner, seen = cls, set()
            while True:  # a test method may come from a base class in the same file
                fn = next((f for f in scope if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                           and f.name == names[-1]), None)
                if fn is not None or owner is None or owner.name in seen:
                    break
                seen.add(owner.name)
                owner = next((classes[b.id] for b in owner.bases if isinstance(b, ast.Name) and b.id in classes), None)
                scope = owner.body if owner else []
            if fn is not None:
                found = (test_id, tf, fn, cls)
        if found:
            targets.append(found)
        else:
            not_found.append(test_id)
    return targets, not_found


def _scope(tf: _TestFile, fn: ast.AST, cls: ast.ClassDef | None) -> list[ast.AST]:
    """The code a test runs from its file: itself; its class's (and base classes') setup methods, autouse
    fixtures and the methods it reaches as ``self.name``; module-level code (not a ``__main__`` block); and
    the module-level helpers and fixtures it reaches by name. A helper no path from the test reaches is out:
    what it needs is not what this test needs."""
    helpers = {n.name: n for n in tf.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    classes = {n.name: n for n in tf.tree.body if isinstance(n, ast.ClassDef)}
    nodes: list[ast.AST] = [n for n in tf.tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                          ast.ClassDef)) and not _is_main_block(n)]
    nodes.append(fn)
    methods: dict[str, ast.AST] = {}
    seen_cls = set()
    while cls is not None and cls.name not in seen_cls:
        seen_cls.add(cls.name)
        for m in cls.body:
            if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if m.name in SETUP_METHODS or _is_autouse(m):
                    nodes.append(m)
                elif not m.name.startswith("test"):
                    methods.setdefault(m.name, m)
            else:
                nodes.append(m)  # class attributes
        cls = next((classes[b.id] for b in cls.bases if isinstance(b, ast.Name) and b.id in classes), None)
    nodes += [h for h in helpers.values() if _is_autouse(h)]
    wanted = {a.arg for a in fn.args.args} if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else set()
    done: set[str] = set()
    queue = list(nodes)
    while queue:
        node = queue.pop()
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id in helpers:
                wanted.add(n.id)
            elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls") \
                    and n.attr in methods:
                wanted.add(f"self.{n.attr}")
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                wanted.update(a.arg for a in n.args.args)  # fixtures a fixture asks for
        for name in sorted(wanted - done):  # sorted: set order changes with the hash seed
            done.add(name)
            target = methods.get(name[5:]) if name.startswith("self.") else helpers.get(name)
            if target is not None:
                nodes.append(target)
                queue.append(target)
    return nodes


def _is_main_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) and "__name__" in ast.unparse(node.test)


def _is_autouse(fn: ast.AST) -> bool:
    return any(isinstance(d, ast.Call) and any(k.arg == "autouse" and isinstance(k.value, ast.Constant)
                                               and k.value.value is True for k in d.keywords)
               for d in getattr(fn, "decorator_list", []))


def _symbols(tf: _TestFile, nodes: list[ast.AST]) -> dict[str, Ref]:
    table: dict[str, Ref] = {}
    for root in [tf.tree, *nodes]:
        for n in (root.body if root is tf.tree else ast.walk(root)):
            if isinstance(n, ast.Import):
                for a in n.names:
                    table[a.asname or a.name.split(".")[0]] = Ref(a.name if a.asname else a.name.split(".")[0])
            elif isinstance(n, ast.ImportFrom):
                source = _absolute(n, tf.package)
                for a in n.names:
                    if source and a.name != "*":
                        table[a.asname or a.name] = Ref(source, (a.name,))
    return table


def _refs(tf: _TestFile, nodes: list[ast.AST]) -> list[Ref]:
    table = _symbols(tf, nodes)
    types: dict[str, Ref] = {}

    def ref_of(node: ast.AST, called: bool = False) -> Ref | None:
        chain = _chain(node)
        if not chain:
            return None
        for cut in (2, 1):  # self.x.meth: a typed attribute of self first
            key = ".".join(chain[:cut])
            if cut <= len(chain) and key in types:
                base = types[key]
                rest = tuple(chain[cut:]) or (("__call__",) if called else ())  # calling an instance
                return Ref(base.module, base.parts + rest, via=len(base.parts))
        if chain[0] in table:
            base = table[chain[0]]
            return Ref(base.module, base.parts + tuple(chain[1:]))
        return None

    untyped: set[str] = set()  # names also assigned from something else: what they hold is unknown
    for root in nodes:  # instances: x = Cls(...), self.x = Cls(...), with Cls(...) as x
        for n in ast.walk(root):
            if isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)):
                for t in ast.walk(n.target):
                    if isinstance(t, ast.Name):
                        untyped.add(t.id)
            if isinstance(n, ast.AugAssign) and (c := _chain(n.target)):
                untyped.add(".".join(c))
            pairs = []
            if isinstance(n, ast.Assign) and len(n.targets) == 1:
                pairs.append((n.targets[0], n.value))
            elif isinstance(n, ast.AnnAssign) and n.value is not None:
                pairs.append((n.target, n.value))
            elif isinstance(n, (ast.With, ast.AsyncWith)):
                pairs += [(i.optional_vars, i.context_expr) for i in n.items if i.optional_vars is not None]
            if isinstance(n, ast.Assign) and len(n.targets) > 1 or isinstance(n, ast.Assign) and \
                    isinstance(n.targets[0], (ast.Tuple, ast.List)):
                for target in n.targets:
                    for t in ast.walk(target):
                        if (c := _chain(t)):
                            untyped.add(".".join(c))
            for target, value in pairs:
                chain = _chain(target)
                if not chain or len(chain) > 2:
                    continue
                key = ".".join(chain)
                r = ref_of(value.func) if isinstance(value, ast.Call) else None
                if r is None or (key in types and types[key] != r):
                    untyped.add(key)  # x = np.zeros(...) somewhere: x is not (only) an instance of a repository class
                else:
                    types[key] = r
    for key in untyped:
        types.pop(key, None)
    refs: list[Ref] = []
    for root in nodes:
        parents: dict[int, ast.AST] = {}
        for n in ast.walk(root):
            for child in ast.iter_child_nodes(n):
                parents[id(child)] = n
        for n in ast.walk(root):
            if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load):
                parent = parents.get(id(n))
                if isinstance(parent, ast.Attribute) and parent.value is n:
                    continue  # not the whole chain
                if (r := ref_of(n)):
                    refs.append(r)
            elif isinstance(n, ast.Call):
                func_chain = _chain(n.func) or []
                if func_chain and func_chain[-1] in RAISES and n.args:
                    first = n.args[0]
                    for e in first.elts if isinstance(first, ast.Tuple) else [first]:
                        if (r := ref_of(e)):
                            refs.append(Ref(r.module, r.parts, exception=True, via=r.via))
                if (r := ref_of(n.func, called=True)):
                    refs += [Ref(r.module, r.parts, keyword=k.arg, via=r.via) for k in n.keywords if k.arg]
                    nargs = 999 if any(isinstance(a, ast.Starred) for a in n.args) else len(n.args)
                    refs.append(Ref(r.module, r.parts, via=r.via, call=True, nargs=nargs))
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                refs += [Ref("", flag=f) for f in FLAG.findall(n.value)]
    return refs


# ---------------------------------------------------------------- the section


@contextmanager
def repository_states(repo_path: Path, task: Task, oracle_patch: str, tests_patch: str):
    """(before, after) SourceTrees: base + tests.patch and base + oracle + tests.patch."""
    if not Path(repo_path).exists():
        raise SweserveError(f"no clone at {repo_path}")
    roots = _roots(task)
    with tempfile.TemporaryDirectory(prefix="sweserve-interface-") as tmp:
        git = _Git(Path(repo_path), Path(tmp))
        try:
            git.run("cat-file", "-e", f"{task.base_commit}^{{commit}}")
        except Unreadable:
            raise SweserveError(f"{repo_path} does not hold {task.task_id}'s base commit {task.base_commit[:10]}") from None
        parsed: dict = {}
        before = SourceTree(git, git.tree(task.base_commit, [("tests", tests_patch)], "before"), roots, parsed,
                            "base")
        after = SourceTree(git, git.tree(task.base_commit, [("oracle", oracle_patch), ("tests", tests_patch)],
                                         "after"), roots, parsed, "the oracle")
        yield before, after


def _roots(task: Task) -> list[str]:
    workdir = task.test.workdir.strip("/") or "."
    roots = [posixpath.normpath(posixpath.join(workdir, p)) for p in
             task.test.env.get("PYTHONPATH", "").split(":") if p]
    return list(dict.fromkeys(roots + [posixpath.normpath(workdir), "."]))


def _test_file(tree: SourceTree, path: str) -> _TestFile | None:
    parsed = tree.parse(path)
    if parsed is None:
        return None
    basedir = posixpath.dirname(path)  # pytest's rootdir-less import mode: first folder up without __init__.py
    while basedir and f"{basedir}/__init__.py" in tree.files:
        basedir = posixpath.dirname(basedir)
    rel = posixpath.relpath(path, basedir or ".")[: -len(".py")]
    package = rel.replace("/", ".").rpartition(".")[0]
    return _TestFile(path, parsed, list(dict.fromkeys([basedir or ".", posixpath.dirname(path) or "."])), package)


def compute_interface(before: SourceTree, after: SourceTree, task: Task, tests_patch: str) -> InterfaceReport:
    """The names FAIL_TO_PASS (or, before validation, every test in the tests patch) needs that base lacks."""
    test_paths = touched_paths(tests_patch)
    files = {p: tf for p in task.test.files if (tf := _test_file(after, p)) is not None}
    ids = task.FAIL_TO_PASS or None
    targets, not_found = _test_targets(files, ids, task.test.workdir.strip("/") or ".")
    report = InterfaceReport(source="fail_to_pass" if ids else "tests_patch", not_found=not_found)
    items: dict[tuple, InterfaceItem] = {}
    for test_id, tf, fn, cls in targets:
        report.tests.append(test_id)
        needs: dict[str, Need] = {}
        for ref in dict.fromkeys(_refs(tf, _scope(tf, fn, cls))):
            for _status, item, need in _judge(before, after, ref, tf.roots, test_paths):
                if item is not None:
                    items.setdefault((item.kind, item.name, item.keyword), item)
                if need is not None:
                    needs.setdefault(need.name, need)
        if needs:
            report.needs[test_id] = sorted(needs.values(), key=lambda n: n.name)
    report.items = sorted(items.values(), key=item_order)
    report.unreadable = dict(sorted(before.git.unreadable.items()))
    return report


def item_order(item: InterfaceItem) -> tuple:
    """A total order on items (kind, name, keyword: what tells them apart), so the section never depends on
    the order the tests meet the names in."""
    rank = KIND_ORDER.index(item.kind) if item.kind in KIND_ORDER else len(KIND_ORDER)
    return rank, item.kind, item.name, item.keyword or ""


def _judge(before: SourceTree, after: SourceTree, ref: Ref, roots: list[str], test_paths: set[str]):
    """(status, interface item or None, need or None) for each new or unknown piece of one reference."""
    if ref.flag:
        yield from _judge_flag(before, after, ref.flag, test_paths)
        return
    mod_before, mod_after = before.module(ref.module, roots), after.module(ref.module, roots)
    if mod_before is None and mod_after is None:
        return  # not in the repository: a third-party or standard module
    if ref.call:
        yield from _judge_call(before, after, ref, roots)
        return
    if ref.keyword:
        fb, fa = resolve(before, ref.module, ref.parts, roots), resolve(after, ref.module, ref.parts, roots)
        if fb is None or fa is None:
            return  # the callable itself is new (its signature lists the keyword) or unknown
        pb, pa = params(before, fb), params(after, fa)
        if pa is None or pb is None or ref.keyword in pb.names or pb.var_kw:
            return  # unreadable, or accepted at base already
        display = f"{fa.dotted}({ref.keyword}=...)"
        if ref.keyword in pa.names or pa.var_kw:  # named, or taken by the **kwargs the oracle adds
            item = _item(fa).model_copy(update={"kind": "keyword", "keyword": ref.keyword})
            yield "new", item, Need(name=display, word=ref.keyword, status="new")
        else:
            yield "unknown", None, Need(name=display, word=ref.keyword, status="unknown")
        return
    new_module = mod_before is None
    if new_module:
        item = _item(Found(mod_after))
        yield "new", item, Need(name=item.name, word=ref.module.rsplit(".", 1)[-1], status="new")
    for k in range(1, len(ref.parts) + 1):
        parts = ref.parts[:k]
        if ref.via and k == ref.via + 1:  # x = f(); x.attr: only followed when f is a class
            owner = resolve(after, ref.module, ref.parts[:ref.via], roots)
            if owner is None or not isinstance(owner.node, ast.ClassDef):
                return
        fb = None if new_module else resolve(before, ref.module, parts, roots)
        if fb is None and not new_module and parts[-1].startswith("__") and parts[-1].endswith("__"):
            return  # object's own (__new__, __init__, __call__ of a builtin base)
        if fb is not None and not fb.inherited:
            if fb.opaque:
                return
            if (changed := _field_change(fb, resolve(after, ref.module, parts, roots))):
                yield "changed", changed, None
            continue
        fa = resolve(after, ref.module, parts, roots)
        if fa is not None and fa.opaque and fa.inherited:
            return  # a base outside the repository (a third-party class) may provide it: nothing to tell
        if fb is not None and (fa is None or fa.opaque):
            return  # may come from a base class outside the repository, before and after
        name = ".".join((ref.module,) + parts)
        word = parts[-1]
        if fa is None:
            yield "unknown", None, Need(name=name, word=word, status="unknown")
            return
        if fa.opaque and fa.node is not None:
            return  # an attribute of a new value or function: the item for its owner says what it is
        item = _item(fa, exception=ref.exception and k == len(ref.parts)) if not fa.opaque else \
            InterfaceItem(kind="attribute", name=name, path=fa.module.path if fa.module else "")
        yield "new", item, Need(name=item.name, word=word, status="new")
        if fa.opaque:
            return


def _callable(tree: SourceTree, found: Found | None) -> tuple[Found, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """The function a call runs: the function itself, or a class's __init__ (in the repository)."""
    if found is None or found.opaque:
        return None
    if isinstance(found.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return found, found.node
    if isinstance(found.node, ast.ClassDef) and found.module is not None:
        init = _in_class(tree, found.module, found.node, found.qual, ("__init__",), 0)
        if init is not None and not init.opaque and isinstance(init.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return init, init.node
    return None


def _positional(fn: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> list[ast.arg]:
    args = fn.args.posonlyargs + fn.args.args
    return args[1:] if method and args else args


def _defaults_of(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, str]:
    a = fn.args
    positional = a.posonlyargs + a.args
    out = {p.arg: ast.unparse(d) for p, d in zip(positional[len(positional) - len(a.defaults):], a.defaults)}
    out.update({p.arg: ast.unparse(d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
    return out


def _return_kind(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """What container a function returns, where every return statement agrees: list, tuple, dict or array."""
    kinds = set()
    for n in ast.walk(fn):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and n is not fn:
            continue
        if isinstance(n, ast.Return) and n.value is not None:
            v = n.value
            if isinstance(v, (ast.List, ast.ListComp)):
                kinds.add("list")
            elif isinstance(v, ast.Tuple):
                kinds.add("tuple")
            elif isinstance(v, (ast.Dict, ast.DictComp)):
                kinds.add("dict")
            elif isinstance(v, ast.Call) and (chain := _chain(v.func)):
                if chain[-1] in _ARRAY_MAKERS and (len(chain) == 1 or chain[0] in _ARRAY_MODULES):
                    kinds.add("array")
                elif chain == ["list"]:
                    kinds.add("list")
                elif chain == ["tuple"]:
                    kinds.add("tuple")
                else:
                    kinds.add("?")
            else:
                kinds.add("?")
    return kinds.pop() if len(kinds) == 1 and "?" not in kinds else None


def _call_changes(fb: ast.FunctionDef | ast.AsyncFunctionDef, fa: ast.FunctionDef | ast.AsyncFunctionDef,
                  method: bool, nargs: int) -> tuple[list[str], list[str]]:
    """(what changed in words, parameter names a solver must learn) between two definitions of one callable,
    limited to what a call with nargs positional arguments can feel."""
    changes: list[str] = []
    words: list[str] = []
    pb, pa = _positional(fb, method), _positional(fa, method)
    nb, na = [p.arg for p in pb], [p.arg for p in pa]
    db, da = _defaults_of(fb), _defaults_of(fa)
    kw_before = {p.arg for p in fb.args.kwonlyargs}
    if set(nb) == set(na) and nb != na and nargs > 1:
        changes.append(f"positional parameters reordered to ({', '.join(na)})")
        words += [p for i, p in enumerate(na) if i < len(nb) and nb[i] != p][:1]
    else:
        for i, name in enumerate(na):
            if name in nb or name in kw_before:
                continue
            if name not in da or i < nargs:
                changes.append(f"new positional parameter `{name}`" + (f" after `{na[i - 1]}`" if i else " first"))
                words.append(name)
    for p in fa.args.kwonlyargs:
        if p.arg not in kw_before and p.arg not in nb and p.arg not in da:
            changes.append(f"new required keyword argument `{p.arg}`")
            words.append(p.arg)
    for name, value in da.items():
        if name in db and db[name] != value:
            changes.append(f"`{name}` defaults to `{value}` (was `{db[name]}`)")
            words.append(name)
    anns_b = {p.arg: ast.unparse(p.annotation) for p in pb + fb.args.kwonlyargs if p.annotation is not None}
    for p in pa + fa.args.kwonlyargs:
        if p.annotation is not None and p.arg in anns_b and anns_b[p.arg] != ast.unparse(p.annotation):
            changes.append(f"`{p.arg}` is `{ast.unparse(p.annotation)}` (was `{anns_b[p.arg]}`)")
    if fb.returns is not None and fa.returns is not None and ast.unparse(fb.returns) != ast.unparse(fa.returns):
        changes.append(f"returns `{ast.unparse(fa.returns)}` (was `{ast.unparse(fb.returns)}`)")
    elif fb.returns is None or fa.returns is None:
        kb, ka = _return_kind(fb), _return_kind(fa)
        if kb and ka and kb != ka:
            changes.append(f"returns {'an' if ka == 'array' else 'a'} {ka} (was {'an' if kb == 'array' else 'a'} {kb})")
    return changes, words


def _judge_call(before: SourceTree, after: SourceTree, ref: Ref, roots: list[str]):
    """A 'changed' item when a callable the test calls exists at base with another signature or return type."""
    b = _callable(before, resolve(before, ref.module, ref.parts, roots))
    a = _callable(after, resolve(after, ref.module, ref.parts, roots))
    if b is None or a is None:
        return  # new, unknown or opaque: the existence check says what there is to say
    (fb, nb), (fa, na) = b, a
    method = fa.owner is not None and not any((_chain(d) or [""])[-1] == "staticmethod" for d in na.decorator_list)
    changes, words = _call_changes(nb, na, method, ref.nargs)
    if not changes:
        return
    shown = fa if fa.qual.rsplit(".", 1)[-1] != "__init__" else Found(fa.module, fa.owner, fa.qual.rsplit(".", 1)[0])
    item = InterfaceItem(kind="changed", name=shown.dotted, signature=signature(fa), was=signature(fb),
                         change="; ".join(changes), path=fa.module.path if fa.module else "")
    yield "changed", item, None
    for word in words:
        yield "changed", None, Need(name=f"{shown.dotted}({word})", word=word, status="new")


def _field_change(fb: Found, fa: Found | None) -> InterfaceItem | None:
    """A 'changed' item for a class attribute whose annotation the oracle changes (list[int] -> jax.Array)."""
    if fa is None or fa.opaque or fb.owner is None:
        return None
    nb, na = fb.node, fa.node
    if not (isinstance(nb, ast.AnnAssign) and isinstance(na, ast.AnnAssign)):
        return None
    tb, ta = ast.unparse(nb.annotation), ast.unparse(na.annotation)
    if tb == ta:
        return None
    return InterfaceItem(kind="changed", name=fa.dotted, signature=_short(ast.unparse(na).splitlines()[0]),
                         was=_short(ast.unparse(nb).splitlines()[0]), change=f"is `{ta}` (was `{tb}`)",
                         path=fa.module.path if fa.module else "")


def _judge_flag(before: SourceTree, after: SourceTree, flag: str, test_paths: set[str]):
    key = ("flag", flag)
    if key not in after.cache:
        in_before = [p for p in before.git.grep(before.tree, flag, before.state) if p not in test_paths]
        in_after = [] if in_before else [p for p in after.git.grep(after.tree, flag, after.state)
                                         if p not in test_paths]
        after.cache[key] = _flag_item(after, flag, in_after[0]) if in_after else None
    item = after.cache[key]
    if item is not None:
        yield "new", item, Need(name=flag, word=flag, status="new")


def _flag_item(tree: SourceTree, flag: str, path: str) -> InterfaceItem:
    signature, doc = "", ""
    parsed = tree.parse(path)
    for n in ast.walk(parsed) if parsed else []:
        if isinstance(n, ast.Call) and any(isinstance(a, ast.Constant) and a.value == flag for a in n.args):
            signature = _short(ast.unparse(n), 300)
            doc = next((_short(k.value.value) for k in n.keywords if k.arg == "help"
                        and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)), "")
            break
    return InterfaceItem(kind="flag", name=flag, signature=signature, doc=doc, path=path)


def interface_for(repo_path: Path, task: Task, oracle_patch: str, tests_patch: str) -> InterfaceReport:
    with repository_states(repo_path, task, oracle_patch, tests_patch) as (before, after):
        return compute_interface(before, after, task, tests_patch)


# ---------------------------------------------------------------- instruction.md


def statement_of(instruction: str) -> str:
    """The instruction without the generated section: what the PR or issue said."""
    text = _SECTION.sub("\n\n", instruction)
    return text.replace(OPEN_MARK, "").replace(CLOSE_MARK, "").strip() + "\n"


def render_section(items: list[InterfaceItem]) -> str:
    lines = [OPEN_MARK, "## New interfaces", "",
             "The hidden tests use these names, which do not exist yet; add them. Signatures and the summary "
             "of each docstring are those of the reference solution." + (
                 " Names marked changed exist already and must change as described."
                 if any(it.kind == "changed" for it in items) else ""), ""]
    for it in items:
        label = {"keyword": "keyword argument", "flag": "command-line flag"}.get(it.kind, it.kind)
        if it.kind == "changed":
            head = f"- changed `{it.name}`" + (f" in `{it.path}`" if it.path else "") + f": {it.change}"
            if it.signature:
                head += f"; now `{it.signature}`"
            lines.append(head)
            continue
        if it.kind == "keyword":
            head = f"- {label} `{it.keyword}` of `{it.name}`"
        else:
            head = f"- {label} `{it.name}`"
        if it.path and it.kind not in ("flag",):
            head += f" in `{it.path}`"
        if it.signature:
            head += f": `{it.signature}`"
        if it.doc:
            head += f" — {it.doc}"
        lines.append(head)
    lines.append(CLOSE_MARK)
    return "\n".join(lines) + "\n"


def with_interface(instruction: str, items: list[InterfaceItem]) -> str:
    """instruction.md with the section replaced by one for these items (removed when there are none)."""
    text = statement_of(instruction)
    return text if not items else text + "\n" + render_section(items)
