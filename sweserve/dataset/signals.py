"""Signal checks read from a task's patches: does passing its hidden tests say the behaviour was built?

Pure functions of patch text and file contents (validation grades what needs a sandbox, in
`evaluation/signals.py`):

- ``structure_patch`` — the *structure-only control*: just the oracle's renames, copies and deletions
  (`git diff -M` statuses R/C/D) and its new files cut to their imports (plus stubs of their functions and
  classes that raise NotImplementedError: a test that passes on a name alone checks layout too). Graded like
  any submission; if it passes every FAIL_TO_PASS test, the tests check layout, not behaviour.
- ``relax_only`` — a tests.patch whose changes to existing tests only loosen them (numeric literals of
  tolerances and bounds, comparison operators, removed asserts or tests, added skips) gives no signal.
- ``cosmetic`` — an oracle whose non-test change is only logging, comments, docstrings or formatting (the
  syntax trees match once those are stripped) has nothing to solve.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field

from sweserve import pyast
from sweserve.dataset.patches import section_paths, split_sections

Reader = Callable[[str], "str | None"]  # path -> text, None when absent

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
DOC_SUFFIXES = (".md", ".rst", ".txt", ".adoc")


@dataclass
class Section:
    """One file of a git patch: its header facts and its hunks' lines."""

    status: str  # A, D, M, R, C
    old: str | None
    new: str | None
    header: list[str]
    hunks: list[list[str]] = field(default_factory=list)

    @property
    def added(self) -> list[str]:
        return [ln[1:] for h in self.hunks for ln in h[1:] if ln.startswith("+")]


def _path(text: str) -> str | None:
    text = text.split("\t")[0].strip()
    if text == "/dev/null":
        return None
    if text.startswith('"'):  # a quoted name: the one unquoting rule
        return next(iter(section_paths(f"diff --git x x\n--- {text}\n")), None)
    return text[2:] if text[:2] in ("a/", "b/") else text


def parse_sections(patch: str) -> list[Section]:
    out = []
    for text in split_sections(patch):
        lines = text.split("\n")
        hunks: list[list[str]] = []
        header, old, new, status = [lines[0]], None, None, "M"
        for line in lines[1:]:
            if hunks or _HUNK.match(line):
                if _HUNK.match(line):
                    hunks.append([line])
                elif hunks and line and line[0] in " +-\\":
                    hunks[-1].append(line)
                continue
            header.append(line)
            if line.startswith("new file mode"):
                status = "A"
            elif line.startswith("deleted file mode"):
                status = "D"
            elif line.startswith(("rename from ", "copy from ")):
                status, old = ("R" if line.startswith("rename") else "C"), line.split(" ", 2)[2]
            elif line.startswith(("rename to ", "copy to ")):
                new = line.split(" ", 2)[2]
            elif line.startswith("--- "):
                old = _path(line[4:]) or old
            elif line.startswith("+++ "):
                new = _path(line[4:]) or new
        if old is None and new is None:  # binary or mode-only: `diff --git a/X b/X`
            rest = lines[0][len("diff --git "):]
            half = len(rest) // 2
            old = new = rest[half + 1:][2:] if rest[half:half + 1] == " " else rest
        if status == "A":
            old = None
        if status == "D":
            new = None
        out.append(Section(status, old, new, header, hunks))
    return out


# -- structure-only control -------------------------------------------------------------------------------

def imports_of(source: str) -> str:
    """The top-level import statements of a module, in order (text lines starting with import when it does
    not parse)."""
    try:
        tree = pyast.parse_module(source)
    except (SyntaxError, ValueError):
        return "".join(ln + "\n" for ln in source.splitlines() if re.match(r"(from\s+\S+\s+)?import\s", ln))
    keep = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            keep.append(ast.get_source_segment(source, node) or ast.unparse(node))
    return "".join(k + "\n" for k in keep)


def _stub(node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.stmt:
    """A function's signature with a body that raises: the name exists, the behaviour does not."""
    args = node.args
    for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
        if a is not None:
            a.annotation = None
    args.defaults = [ast.Constant(None) for _ in args.defaults]
    args.kw_defaults = [None if d is None else ast.Constant(None) for d in args.kw_defaults]
    node.body = [ast.Raise(exc=ast.Name("NotImplementedError", ast.Load()), cause=None)]
    node.decorator_list, node.returns = [], None
    return node


def skeleton_of(source: str) -> str:
    """A new module cut to its skeleton: its imports, and its top-level functions and classes as names only
    (functions and methods raise NotImplementedError, class bodies hold nothing else). Tests that pass on
    this check that names exist, not what they do. Unparsable text keeps its import lines only."""
    try:
        tree = pyast.parse_module(source)
    except (SyntaxError, ValueError):
        return "".join(ln + "\n" for ln in source.splitlines() if re.match(r"(from\s+\S+\s+)?import\s", ln))
    keep: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            keep.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            keep.append(_stub(node))
        elif isinstance(node, ast.ClassDef):
            methods: list[ast.stmt] = [_stub(n) for n in node.body if isinstance(n, (ast.FunctionDef,
                                                                                    ast.AsyncFunctionDef))]
            node.body, node.decorator_list = methods or [ast.Pass()], []
            keep.append(node)
    if not keep:
        return ""
    return ast.unparse(ast.fix_missing_locations(ast.Module(body=keep, type_ignores=[]))) + "\n"


def _new_file_section(path: str, text: str, mode: str) -> str:
    quoted = path if re.fullmatch(r"[\w./@+-]+", path) else None
    if quoted is None:
        return ""  # an odd name: left out rather than quoted by hand
    head = f"diff --git a/{path} b/{path}\nnew file mode {mode}\n"
    if not text:
        return head
    lines = text.splitlines()
    body = "".join(f"+{ln}\n" for ln in lines)
    return head + f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}"


def structure_patch(oracle_patch: str) -> str:
    """The oracle's renames, copies and deletions, and its new files cut to their skeleton (imports, and
    functions and classes that raise NotImplementedError; new non-Python files empty): what moving the code
    around and naming the new parts, without writing any of them, submits."""
    out = []
    for sec, raw in zip(parse_sections(oracle_patch), split_sections(oracle_patch)):
        if sec.status == "D":
            out.append(raw)
        elif sec.status in ("R", "C"):
            kept = [ln for ln in sec.header if not ln.startswith(("similarity index", "dissimilarity index",
                                                                     "index ", "--- ", "+++ "))]
            kept.insert(1, "similarity index 100%")
            out.append("\n".join(kept).rstrip("\n") + "\n")
        elif sec.status == "A" and sec.new:
            mode = next((ln.split()[-1] for ln in sec.header if ln.startswith("new file mode")), "100644")
            if mode == "120000" or any(ln.startswith("GIT binary patch") for ln in sec.header):
                continue
            text = "\n".join(sec.added)
            body = skeleton_of(text) if sec.new.endswith(".py") else ""
            out.append(_new_file_section(sec.new, body, mode))
    return "".join(out)


# -- relax-only tests -------------------------------------------------------------------------------------

TOLERANCE_WORDS = ("atol", "rtol", "tol", "tolerance", "delta", "eps", "epsilon", "abs", "rel", "threshold",
                   "margin", "max_diff", "max_error", "err", "error", "diff")
LOOSER_OPS = {("<", "<="), (">", ">="), ("==", "<="), ("==", ">="), ("==", "<"), ("==", ">")}
SKIP_RE = re.compile(r"^\s*@(pytest\.mark\.(skip|skipif|xfail)|unittest\.skip)\b|^\s*(pytest\.skip|self\.skipTest)\(")


def _tokens(line: str) -> list[tokenize.TokenInfo] | None:
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    return [t for t in toks if t.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER,
                                              tokenize.INDENT, tokenize.DEDENT)]


def _number(text: str) -> float | None:
    try:
        return float(text.replace("_", ""))
    except ValueError:
        return None


def _looser_number(toks: list[tokenize.TokenInfo], i: int, old: float, new: float) -> bool | None:
    """Whether changing the number at toks[i] from old to new loosens the check, or None if not known."""
    words = [t.string.lower() for t in toks[max(0, i - 4):i] if t.type == tokenize.NAME]
    if "places" in words:
        return new < old
    if any(w in TOLERANCE_WORDS or w.endswith(("tol", "_eps", "threshold")) for w in words):
        return new > old
    before = next((t.string for t in reversed(toks[:i]) if t.string in ("<", "<=", ">", ">=", "==")), None)
    after = next((t.string for t in toks[i + 1:] if t.string in ("<", "<=", ">", ">=", "==")), None)
    if before in ("<", "<="):  # x < N: a bigger N lets more through
        return new > old
    if before in (">", ">="):
        return new < old
    if after in ("<", "<="):  # N < x
        return new < old
    if after in (">", ">="):
        return new > old
    return None


def _looser_line(old: str, new: str) -> bool:
    """The new line is the old one with only tolerances, bounds or comparison operators made looser."""
    a, b = _tokens(old), _tokens(new)
    if a is None or b is None or len(a) != len(b):
        return False
    changed = False
    for i, (x, y) in enumerate(zip(a, b)):
        if x.string == y.string:
            continue
        changed = True
        if x.type == y.type == tokenize.NUMBER:
            ox, ny = _number(x.string), _number(y.string)
            if ox is None or ny is None or not _looser_number(a, i, ox, ny):
                return False
        elif (x.string, y.string) in LOOSER_OPS:
            continue
        else:
            return False
    return changed


TRIVIAL = re.compile(r"^(pass|\.\.\.|assert\s+(True|1|not\s+(False|None|0))|assert\s+\(?\s*True\s*\)?)\s*(#.*)?$")


def _meaningful(line: str) -> bool:
    """A line that can check something: not blank, not a comment, not `pass` or `assert True`."""
    s = line.strip()
    return bool(s) and not s.startswith("#") and not TRIVIAL.match(s)


def relax_only(tests_patch: str) -> str | None:
    """Why tests.patch gives no signal (its changes to existing tests only loosen them), or None."""
    sections = parse_sections(tests_patch)
    if not sections or any(s.status in ("A", "C") for s in sections):
        return None  # a new test file is new signal
    loosened = 0
    for sec in sections:
        if sec.status == "D":
            loosened += 1
            continue
        for hunk in sec.hunks:
            removed: list[str] = []
            added: list[str] = []
            runs = []
            for line in hunk[1:] + [" "]:
                if line.startswith("-"):
                    removed.append(line[1:])
                elif line.startswith("+"):
                    added.append(line[1:])
                elif removed or added:
                    runs.append((removed, added))
                    removed, added = [], []
            for rem, add in runs:
                rem = [r for r in rem if _meaningful(r)]
                add = [a for a in add if _meaningful(a)]
                if not add:
                    loosened += bool(rem)  # asserts or whole tests removed
                    continue
                if not rem:
                    if all(SKIP_RE.match(a) for a in add):
                        loosened += 1
                        continue
                    return None  # new assertions or tests
                extra = [a for a in add if SKIP_RE.match(a)]
                add = [a for a in add if not SKIP_RE.match(a)]
                if len(add) > len(rem):
                    return None
                # each added line must be a removed one loosened (in order); removed lines left over are removals
                pos = 0
                for a in add:
                    while pos < len(rem) and not _looser_line(rem[pos], a):
                        pos += 1
                    if pos == len(rem):
                        return None
                    pos += 1
                loosened += len(rem) + len(extra)
    if not loosened:
        return None
    return (f"tests.patch only loosens existing tests ({loosened} change{'s' if loosened > 1 else ''}: "
            "tolerances, bounds, comparison operators, removed asserts or tests, added skips)")


# -- cosmetic oracles -------------------------------------------------------------------------------------

LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log", "fatal"}


def _is_logger(expr: ast.AST) -> bool:
    last = ast.unparse(expr).rsplit(".", 1)[-1].lower()
    return last in ("log", "logging", "_log", "warnings") or last.endswith("logger")


def _is_logging_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Name):
        return func.id == "print" or re.fullmatch(r"log(_(debug|info|warning|error|once|rank0?))?", func.id) is not None
    if isinstance(func, ast.Attribute):
        return func.attr in LOG_METHODS and _is_logger(func.value)
    return False


class _Strip(ast.NodeTransformer):
    """Docstrings, logging statements and the logging module's imports and loggers out of a tree."""

    def _body(self, body: list[ast.stmt], empty: list[ast.stmt] | None = None) -> list[ast.stmt]:
        out = []
        for stmt in body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                    and isinstance(stmt.value.value, str):
                continue  # a docstring, or a bare string used as a comment
            if isinstance(stmt, ast.Expr) and _is_logging_call(stmt.value):
                continue
            if isinstance(stmt, ast.Import) and all(a.name == "logging" for a in stmt.names):
                continue
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) and \
                    re.search(r"(getLogger|get_logger|init_logger)$", ast.unparse(stmt.value.func)):
                continue
            out.append(self.visit(stmt))
        return out or (empty if empty is not None else [ast.Pass()])

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for name in ("body", "orelse", "finalbody"):
            value = getattr(node, name, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                setattr(node, name, self._body(value, None if name == "body" else []))
        for name, value in ast.iter_fields(node):
            if name in ("body", "orelse", "finalbody"):
                continue
            if isinstance(value, list):
                setattr(node, name, [self.visit(v) if isinstance(v, ast.AST) else v for v in value])
            elif isinstance(value, ast.AST):
                setattr(node, name, self.visit(value))
        return node


def stripped(source: str) -> str | None:
    """A module's syntax tree without docstrings, comments, formatting or logging; None if it does not parse."""
    try:
        tree = pyast.parse_module(source)
    except (SyntaxError, ValueError):
        return None
    return ast.dump(_Strip().visit(tree), annotate_fields=False, include_attributes=False)


def cosmetic(oracle_patch: str, before: Reader, after: Reader) -> str | None:
    """Why the oracle has nothing to solve (every file it changes differs only in comments, docstrings,
    logging or formatting, or is documentation), or None."""
    sections = parse_sections(oracle_patch)
    if not sections:
        return None
    files = []
    for sec in sections:
        path = sec.new or sec.old or ""
        if path.lower().endswith(DOC_SUFFIXES):
            files.append(path)
            continue
        if not path.endswith(".py"):
            return None
        old = before(sec.old) if sec.old else ""
        new = after(sec.new) if sec.new else ""
        if old is None or new is None:
            return None
        a, b = stripped(old), stripped(new)
        if a is None or b is None or a != b:
            return None
        files.append(path)
    return (f"the oracle's non-test changes are only comments, docstrings, logging or formatting "
            f"({len(files)} file{'s' if len(files) > 1 else ''}: {', '.join(files[:3])})")
