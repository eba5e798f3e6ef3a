"""The stdlib-only part of twin grading, one implementation for the host (`sweserve run`: evaluation/twins.py)
and the exports' in-box root verifier (sweserve_verify.py, through sweserve_canaries.py): standard library
only, since the box imports this file as it is.

Plain canary tests: bodies of small, self-contained tests that must pass (or must fail) whatever the code
under test does.

The grading plan (evaluation/twins.py) plants a few of them among the hidden tests, named from the same distribution
as every graded test and twin and shuffled in with them: a must-pass canary that fails, or a must-fail one
that passes, means something in the test process forged outcomes. Their bodies come from several
generators of plain assertions over small literals and builtins (lists, strings, dicts, arithmetic, loops;
`assert x == y`, `assert y == x`, `self.assertEqual`), with varied variable names: no text is common to every
canary. Unlike twins they can be told from the file's own tests by their bodies, so they only catch blanket
forgery (every outcome flipped); twins are what catch targeted forgery.
"""

from __future__ import annotations

import ast
import builtins
import os
import random
import re
import stat
import sys
import threading
import unittest

# CPython 3.11.7's parser fails when two threads parse at once, and the host draws bodies and reads selectors
# from trial threads. One lock for every parse of the process: sweserve/pyast.py takes this one (this module may
# import nothing of sweserve, so the lock lives here).
PARSE_LOCK = threading.Lock()


def _parse_expression(source: str) -> ast.Expression:
    with PARSE_LOCK:
        return ast.parse(source, mode="eval")


def parse_module(source: str) -> ast.Module:
    """`ast.parse` under the process's one parse lock (the harness's modules on the host, and sweserve's)."""
    with PARSE_LOCK:
        return ast.parse(source)


_VARS = ["value", "result", "got", "out", "items", "data", "parts", "total", "seq", "pairs", "text", "counts",
         "entry", "record", "size", "chunk", "batch", "shape", "tokens", "rows", "left", "right", "first", "acc"]
FALLBACK_WORDS = ["basic", "values", "input", "result", "case", "default", "order", "length"]
# The words planted names are drawn from: made of the letters b f j k v w z and vowels only, so no word a selector
# looks for in test names (`gpu`, `cuda`, `slow`, `large`, `nightly`, `integration`, `tpu`, `multi`, `e2e`) can
# occur in one, wherever that selector takes its words from (red team 8, R8-3: data files joined from parts,
# `importlib`, a custom ini option, an env var, `load_tests`). The checks `selector_checks` does read still thin
# it (`name_pool`), and a graded test's members still carry the words of its real name a check reads (`kept`).
NEUTRAL_WORDS = ["bazo", "fiku", "jevo", "kowa", "vubi", "wuzo", "zafe", "boji", "fuka", "jowi", "kibe", "voza",
                 "wefi", "zuko", "biva", "fejo", "juwa", "kezi", "vofu", "wabo", "zije", "bukaze", "fovija",
                 "kajuvo", "wizobe", "zevuka", "jabufo", "vekiwa"]


def _small(rng: random.Random, lo: int = 0, hi: int = 60) -> int:
    return rng.randint(lo, hi)


def _ints(rng: random.Random, n: int | None = None) -> list[int]:
    return [_small(rng) for _ in range(n or rng.randint(2, 5))]


def _gen_list(rng: random.Random, var: str, words: list[str]) -> tuple[list[str], str]:
    xs = _ints(rng)
    k = rng.randint(2, 4)
    lhs = rng.choice([f"sum({var})", f"max({var})", f"min({var})", f"len({var})", f"sorted({var})",
                       f"{var}[::-1]", f"[x * {k} for x in {var}]", f"{var}[-1] - {var}[0]",
                       f"list(reversed({var}))", f"{var}.count({xs[0]})"])
    return [f"{var} = {xs!r}"], lhs


def _gen_text(rng: random.Random, var: str, words: list[str]) -> tuple[list[str], str]:
    picked = [rng.choice(words) for _ in range(rng.randint(2, 3))]
    sep = rng.choice(["-", "_", " ", "/", ":"])
    lhs = rng.choice([f"{var}.split({sep!r})", f"{var}.upper()", f"len({var})", f"{var}.count({sep!r})",
                       f"{var}.replace({sep!r}, '')", f"{var}[:{rng.randint(1, 4)}]", f"{var}.title()",
                       f"''.join(reversed({var}))", f"{var}.startswith({picked[0][:2]!r})"])
    return [f"{var} = {sep.join(picked)!r}"], lhs


def _gen_dict(rng: random.Random, var: str, words: list[str]) -> tuple[list[str], str]:
    keys = list(dict.fromkeys(rng.choice(words) for _ in range(rng.randint(2, 4))))
    d = {k: _small(rng) for k in keys}
    lhs = rng.choice([f"sorted({var})", f"sum({var}.values())", f"len({var})", f"{var}[{keys[0]!r}]",
                       f"max({var}.values())", f"{keys[-1]!r} in {var}", f"sorted({var}.items())"])
    return [f"{var} = {d!r}"], lhs


def _gen_arith(rng: random.Random, var: str, words: list[str]) -> tuple[list[str], str]:
    a, b = _small(rng, 1, 200), _small(rng, 1, 12)
    lhs = rng.choice([f"divmod({a}, {b})", f"{a} // {b}", f"{a} % {b}", f"pow({b}, 2)", f"abs({b} - {a})",
                       f"{a} * {b} - {b}", f"max({a}, {b}) - min({a}, {b})", f"({a} + {b}) * 2"])
    return ([f"{var} = {lhs}"], var) if rng.random() < 0.5 else ([], lhs)


def _gen_loop(rng: random.Random, var: str, words: list[str]) -> tuple[list[str], str]:
    n, k = _small(rng, 2, 9), _small(rng, 1, 5)
    item = rng.choice(["i", "n", "step", "j", "idx"])
    op = rng.choice(["+=", "-=", "+= 1 +"])
    return [f"{var} = {_small(rng)}", f"for {item} in range({n}):", f"    {var} {op} {item} * {k}"], var


def _gen_pairs(rng: random.Random, var: str, words: list[str]) -> tuple[list[str], str]:
    pairs = [(_small(rng), _small(rng)) for _ in range(rng.randint(2, 4))]
    lhs = rng.choice([f"[a + b for a, b in {var}]", f"dict({var})", f"max({var})", f"sorted({var})",
                       f"[b for _, b in {var}]", f"list(zip(*{var}))", f"len(set({var}))"])
    return [f"{var} = {pairs!r}"], lhs


def _gen_sets(rng: random.Random, var: str, words: list[str]) -> tuple[list[str], str]:
    a, b = _ints(rng, 4), _ints(rng, 4)
    lhs = rng.choice([f"sorted(set({a!r}) & set({b!r}))", f"sorted(set({a!r}) | set({b!r}))",
                       f"len(set({a!r}) - set({b!r}))", f"sorted(set({a!r}))"])
    return ([f"{var} = {lhs}"], var) if rng.random() < 0.5 else ([], lhs)


_GENERATORS = [_gen_list, _gen_text, _gen_dict, _gen_arith, _gen_loop, _gen_pairs, _gen_sets]


def _other(rng: random.Random, value):
    """A value of the same kind as `value` that is not equal to it."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice([-3, -2, -1, 1, 2, 3])
    if isinstance(value, str):
        return value + rng.choice(["s", "x", "-", "0"]) if value and rng.random() < 0.5 else value[1:] + "e"
    if isinstance(value, tuple):
        return value + (_small(rng),)
    if isinstance(value, list):
        return value[:-1] if len(value) > 1 and rng.random() < 0.5 else value + [_small(rng)]
    if isinstance(value, dict):
        return {**value, "extra": _small(rng)}
    return None


_BUILTIN_NAMES = frozenset(dir(builtins))


def module_bindings(tree: ast.Module) -> frozenset | None:
    """Every name a module binds anywhere (imports, defs, classes, assignment targets): what a canary's body,
    which runs in the module's namespace, must not call as a builtin (`from numpy import *` rebinds `sum` and
    `max`: red team 8, R8-2). None where a star import makes the names unknown."""
    found: set = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names):
            return None
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            found.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(n.name)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            found.add(n.id)
    return frozenset(found)


def _calls_shadowed(lines: list, shadowed) -> bool:
    """Whether the body reads a builtin the module may rebind (`shadowed`: `module_bindings`, None: any)."""
    tree = parse_module("\n".join(lines))
    local = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and n.id in _BUILTIN_NAMES and n.id not in local}
    return bool(used) if shadowed is None else bool(used & shadowed)


def body(rng: random.Random, must_pass: bool, words: list[str], unittest_style: bool,
         shadowed=frozenset()) -> list[str]:
    """Statement lines (unindented, nested lines with 4 spaces) that pass (or fail) with an AssertionError.
    `shadowed`: the names the module it goes into binds (`module_bindings`; None: unknown): a body reading a
    builtin of those is drawn again, since it would run with the module's binding, not the builtin."""
    while True:
        var = rng.choice(_VARS)
        setup, lhs = rng.choice(_GENERATORS)(rng, var, words)
        space: dict = {"__builtins__": __builtins__}
        try:
            exec("\n".join(setup) + f"\n__value = {lhs}\n", space)  # noqa: S102 - our own literals
        except Exception:  # noqa: BLE001 - a generator's rare bad draw: draw again
            continue
        value = space["__value"]
        expected = value if must_pass else _other(rng, value)
        if expected is None or (expected == value) is not must_pass:
            continue
        if unittest_style and rng.random() < 0.6:
            check = f"self.assertEqual({lhs}, {expected!r})"
        else:
            if isinstance(_parse_expression(lhs).body, (ast.Compare, ast.BinOp, ast.BoolOp, ast.UnaryOp)):
                lhs = f"({lhs})"
            check = rng.choice([f"assert {lhs} == {expected!r}", f"assert {expected!r} == {lhs}"])
        if _behaves(setup + [check], must_pass) and not _calls_shadowed(setup + [check], shadowed):
            return setup + [check]


def _behaves(body: list[str], must_pass: bool) -> bool:
    """Whether the body, run as a method here, passes (or fails with an AssertionError) as planned."""
    space: dict = {"__builtins__": __builtins__}
    exec("def planted(self):\n" + "".join(f"    {ln}\n" for ln in body), space)  # noqa: S102 - our own code
    try:
        space["planted"](unittest.TestCase())
    except AssertionError:
        return not must_pass
    except Exception:  # noqa: BLE001 - neither: draw again
        return False
    return must_pass




def vocabulary(names: list[str]) -> list[str]:
    """The words of a file's test names (`test_even_split` gives `even`, `split`), in first-seen order."""
    words = [w for n in names for w in n.lower().split("_")[1:] if w.isidentifier() and w != "test"]
    return list(dict.fromkeys(words)) or list(FALLBACK_WORDS)


# --- names the repository's own selection reads -------------------------------------------------------------------
#
# A repository may select tests by a word of their name: a conftest.py that skips, marks or equips
# `item.name`s holding "slow" or "gpu", a `-k "not slow"` in its pytest configuration. The planted names are
# drawn from the words of the file's own test names, so a planted name would pick up such a word (a canary
# skipped: `tampered`; a graded test skipped) or lose one the real name carries (a graded test no longer
# equipped or selected): an honest solution failed by chance. Whatever a selector reads in a name is therefore
# kept out of the draw and put back only where the real name has it:
#
# - `selector_checks`: every string the selection could look for in a name, read (over-read, never under-read)
#   from the texts of each conftest.py on the way from the repository's root to the hidden file and the `-k`
#   expressions of the pytest configuration files: the alphanumeric runs (two characters or more,
#   lowercased) of every string literal a conftest's code holds (docstrings and other bare string statements
#   do nothing and are left out), and each literal that joins such runs with underscores (`"fast_path"`);
# - a word a check occurs in is *read* (`reads`); the pool the names are drawn from holds no read word
#   (`name_pool`), so a canary (and every name's random part) carries none;
# - each member of a graded test's group (the test and each of its twins) carries the real name's read words
#   (`kept`), in a drawn order among the drawn ones, and a draw is kept only when the set of checks its name
#   matches is the real name's (`matched`): the joins, and a check that four hex digits happen to spell, agree
#   too. A canary's name must match what `test_` matches, no more.
#
# This does not single out the real test within its group: every member of a group draws its name from the
# same distribution (one function of the real name and of texts the forger can read as well), as before; what
# the kept words say is which group a name belongs to, which the members' bodies already say (they are the
# real test's text), and canaries were already told apart by their bodies. Only reading by substring is
# modelled: a selector that reads where in the name a string stands (`endswith`, a regex anchor) is not,
# beyond the prefix `test_` and a four-hex-digit end, which every planted name has.

CONFIG_FILES = ("pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "pyproject.toml", "setup.cfg", "tox.ini")
_RUN = re.compile(r"[a-z0-9]+")
_JOINED = re.compile(r"_?[a-z0-9]+(?:_[a-z0-9]+)+_?|_[a-z0-9]+_?|[a-z0-9]+_")
_QUOTED = re.compile(r"\"([^\"\\\n]*)\"|'([^'\\\n]*)'")
_K_OPTION = re.compile(r"(?:^|[\s\"',\[=])(?:-k|--keyword)(?:[\"']\s*,\s*|\s*=\s*|\s*)(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',\]]+)")
_K_OPERATORS = frozenset({"and", "or", "not"})
MAX_DRAWS = 200  # draws of a name before the fallback (the real name's own words, in order)


def selector_paths(files: list[str], workdir: str = "") -> list[str]:
    """The files whose text `selector_checks` reads for `files` (hidden test files, from the repository's
    root): conftest.py and each pytest configuration file in every folder from the root to each file's folder
    and to the runner's working folder."""
    folders = {""}
    for path in [*files, workdir.strip("/") + "/x" if workdir.strip("/") not in ("", ".") else "x"]:
        parts = [p for p in path.split("/")[:-1] if p not in ("", ".")]
        folders |= {"/".join(parts[:i]) for i in range(len(parts) + 1)}
    return sorted(f"{d}/{n}" if d else n for d in folders for n in ("conftest.py", *CONFIG_FILES))


MAX_PLUGIN_ROUNDS = 3  # plugin modules naming plugin modules, followed this deep
MAX_PLUGIN_PATHS = 256  # candidate paths read per round
_P_OPTION = re.compile(r"(?:^|[\s\"',\[=])-p(?:[\"']\s*,\s*[\"']|\s*=\s*|\s*)([A-Za-z_][\w.]*)")


_NOT_PLUGINS = frozenset({"pytest", "_pytest", "pluggy", "unittest", "__future__"})


def plugin_names(path: str, text: str) -> list[str]:
    """The modules a selector file may load hooks or name checks from, where a name-based selection may live
    outside the files `selector_paths` names: a configuration file's `-p NAME` and the task's PYTEST_ADDOPTS'
    (`path` "PYTEST_ADDOPTS"; `no:NAME` disables, it loads nothing); a conftest's or plugin module's
    `pytest_plugins` (a string, or a list or tuple of them) assigned anywhere in it (inside `try:`, under an
    `if`), and each module it imports hooks from (`from hooks import *`, `from .hooks import
    pytest_collection_modifyitems`: pytest registers them with the conftest), absolute or relative to its
    folder; each module whose hooks it registers (`pluginmanager.import_plugin("hooks")`, `register(hooks)`,
    `pytest_collection_modifyitems = hooks.skip_gpu`, `from hooks import skip as pytest_...`); and every
    other module it imports (`from testing_utils import GPU_WORDS`, `import testing_utils`, a submodule it
    reads attributes of): a hook's words may live there (red team 7, R7-4). The standard library and pytest's
    own modules aside; a module the repository does not hold reads as nothing."""
    name = path.rpartition("/")[2]
    if name in CONFIG_FILES or path == "PYTEST_ADDOPTS":
        where = text if path == "PYTEST_ADDOPTS" else "\n".join(_pytest_lines(text))
        return [m for m in (m.group(1) for m in _P_OPTION.finditer(where)) if m != "no"]
    if not name.endswith(".py"):
        return []
    try:
        tree = parse_module(text)
    except (SyntaxError, ValueError):
        return []
    package = [p for p in path.split("/")[:-1] if p not in ("", ".")]
    outside = (set(getattr(sys, "stdlib_module_names", ())) - {"test", "tests"}) | _NOT_PLUGINS
    found: list[str] = []
    bound: dict[str, list[str]] = {}  # a name the module imports -> the modules it may come from
    nodes = list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.Import):
            bound.update({a.asname or a.name.split(".")[0]: [a.name if a.asname else a.name.split(".")[0]]
                          for a in node.names})
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, package)
            if module:  # a submodule, or a name defined in the module
                bound.update({a.asname or a.name: [f"{module}.{a.name}", module] for a in node.names if a.name != "*"})
    hooked: set[str] = set()  # names whose hooks the module registers: `register(hooks)`, `x = hooks.pytest_...`
    for node in nodes:
        if isinstance(node, ast.Attribute) and node.attr.startswith("pytest_") and isinstance(node.value, ast.Name):
            hooked.add(node.value.id)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id.startswith("pytest_")
                                                  for t in node.targets):
            hooked |= {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}  # `pytest_x = hooks.skip`
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            arg = node.args[0]
            if node.func.attr in ("import_plugin", "consider_module", "register"):
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.append(arg.value)
                elif isinstance(arg, ast.Name):
                    hooked.add(arg.id)
    found += [module for name in sorted(hooked) for module in bound.get(name, [])]
    read = {n.value.id for n in nodes if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    for node in nodes:
        if isinstance(node, ast.Import):  # a module whose constants a hook may read
            found += [a.name for a in node.names if a.name.split(".")[0] not in outside]
            continue
        if isinstance(node, ast.ImportFrom):  # hooks it brings in are registered; constants it brings in are read
            module = _absolute(node, package)
            if module and (node.level or module.split(".")[0] not in outside):
                found.append(module)
                found += [f"{module}.{a.name}" for a in node.names if (a.asname or a.name) in read]
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign)) else []
        value = getattr(node, "value", None)
        if value is None or not any(isinstance(t, ast.Name) and t.id == "pytest_plugins" for t in targets):
            continue
        items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
        found += [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]
    return list(dict.fromkeys(found))


def _absolute(node: ast.ImportFrom, package: list[str]) -> str | None:
    """The module an import-from reads, as a dotted name from the root (a relative one from the importing
    file's folder, `package`); None for one that climbs above the root."""
    if not node.level:
        return node.module
    if node.level > len(package) + 1:
        return None
    return ".".join([*package[: len(package) - node.level + 1], *([node.module] if node.module else [])]) or None


DATA_FILES = (".json", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".ini", ".csv")


def data_names(path: str, text: str) -> list[str]:
    """The data files a selector file or plugin module names in its string literals (`"accelerators.json"`,
    `"conf/skip.yaml"`): a hook's words may be read from one (red team 7, R7-4)."""
    if not path.endswith(".py"):
        return []
    return list(dict.fromkeys(lit.strip().lstrip("./") for lit in _literals(text)
                              if lit.strip().lower().endswith(DATA_FILES) and "\n" not in lit
                              and not lit.strip().startswith(("/", "~")) and ".." not in lit))


def plugin_paths(texts: dict[str, str], files: list[str], workdir: str = "", options: str = "") -> list[str]:
    """The paths, from the repository's root, where the plugin modules the selector files in `texts` and the
    task's PYTEST_ADDOPTS (`options`) load (`plugin_names`) may be, that `texts` does not hold yet: each dotted
    name as a module or a package under the root, the runner's working folder, and each folder holding a hidden
    file or a selector file (what pytest's import modes put on sys.path). A reader reads them from base +
    tests.patch (absent ones read as nothing), adds them to `texts`, and asks again, up to MAX_PLUGIN_ROUNDS
    times: `selector_checks` reads their literals."""
    roots = {"", "" if workdir.strip("/") == "." else workdir.strip("/")}
    for path in [*files, *texts]:
        parts = [p for p in path.split("/")[:-1] if p not in ("", ".")]
        roots |= {"/".join(parts[:i]) for i in range(len(parts) + 1)}
    out: list[str] = []
    for path, text in sorted(texts.items()):  # data files a selector file names, beside it or from a root
        here = path.rpartition("/")[0]
        for name in data_names(path, text):
            for root in [here, *sorted(roots)]:
                candidate = f"{root}/{name}" if root else name
                if candidate not in texts and candidate not in out:
                    out.append(candidate)
    for path, text in [("PYTEST_ADDOPTS", options), *sorted(texts.items())]:
        for module in plugin_names(path, text):
            rel = module.replace(".", "/")
            for root in sorted(roots):
                for tail in (f"{rel}.py", f"{rel}/__init__.py"):
                    candidate = f"{root}/{tail}" if root else tail
                    if candidate not in texts and candidate not in out:
                        out.append(candidate)
    return out[:MAX_PLUGIN_PATHS]


def with_plugins(texts: dict[str, str], files: list[str], workdir: str, read_many, options: str = "") -> dict[str, str]:
    """`texts` (selector files, path -> text) and the plugin modules they and the task's PYTEST_ADDOPTS
    (`options`) load, followed MAX_PLUGIN_ROUNDS deep: `read_many(paths)` gives the texts of those of `paths`
    that exist at base + tests.patch (the grade box's scratch index, the exporter's clone); each path is asked
    for once."""
    out, tried = dict(texts), set()
    for _ in range(MAX_PLUGIN_ROUNDS):
        paths = [p for p in plugin_paths(out, files, workdir, options) if p not in tried]
        if not paths:
            break
        tried.update(paths)
        out.update({p: t for p, t in read_many(paths).items() if p in paths and t.strip()})
    return out


def tree_checks(root: str, files: list[str], workdir: str, sources: dict[str, str], options: str = "") -> dict:
    """Per hidden file of `sources`, what the repository's name-based selection reads in its tests' names
    (`selector_checks` over the selector files on the way and the plugin modules they load, `own_checks` of the
    file), read from the tree at `root`: the exports' in-box verifier, whose tree holds the conftests and pytest
    configuration at base (the resets) with tests.patch applied, as `sweserve run` reads them."""
    def read_many(paths: list[str]) -> dict[str, str]:
        out = {}
        for path in paths:
            try:  # a regular file only: a link to /dev/ptmx would block this root reader for ever (R15e-1)
                fd = os.open(os.path.join(root, path), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
                with open(fd, encoding="utf-8") as fh:
                    if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                        continue
                    out[path] = fh.read()
            except (OSError, UnicodeDecodeError, ValueError):
                continue
        return out

    workdir = "" if workdir in (".", "") else workdir
    texts = with_plugins(read_many(selector_paths(list(files), workdir)), list(files), workdir, read_many, options)
    return {f: sorted(set(selector_checks(texts, f, options)) | set(own_checks(t))) for f, t in sources.items()}


def _literals(text: str) -> list[str]:
    """The string literals of a conftest's code (its docstrings and bare string statements do nothing);
    every quoted run of a text that does not parse."""
    try:
        tree = parse_module(text)
    except (SyntaxError, ValueError):
        return [a or b for a, b in _QUOTED.findall(text)]
    bare = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in bare]


_SECTION = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]\s*$")
_PYTEST_SECTIONS = frozenset({"pytest", "tool:pytest", "tool.pytest", "tool.pytest.ini_options"})


def _pytest_lines(text: str) -> list[str]:
    """The lines of a pytest configuration text's pytest section (what pytest reads)."""
    section, kept_lines = None, []
    for line in text.split("\n"):
        header = _SECTION.match(line)
        if header:
            section = header.group(1).strip().strip("\"'")
        elif section in _PYTEST_SECTIONS:
            kept_lines.append(line)
    return kept_lines


def _k_expressions(text: str, sectioned: bool = True) -> list[str]:
    """The `-k` expressions a pytest configuration text writes in its pytest section (`[pytest]`,
    `[tool:pytest]`, `[tool.pytest.ini_options]`: what pytest reads, and what a submission cannot change
    without the file being reset to base); the whole text for the task's PYTEST_ADDOPTS (no section)."""
    if sectioned:
        text = "\n".join(_pytest_lines(text))
    return [m.group(1).strip("\"'") for m in _K_OPTION.finditer(text)]


def selector_checks(texts: dict[str, str], file: str, options: str = "") -> list[str]:
    """The strings a name-based selection of the repository could look for in the names of `file`'s tests
    (sorted, lowercased), from `texts` (path from the repository's root -> text, as `selector_paths` names
    them): the literals of each conftest.py in `file`'s folder or one above it, and the `-k` expressions of
    every configuration file and of `options` (the task's PYTEST_ADDOPTS). The hardened runner clears the
    configuration's `addopts` (`-o addopts=`), so a `-k` there reaches only plain pytest; it is read all the
    same (over-reading only narrows the pool). See the section's comment."""
    folder = file.rsplit("/", 1)[0] if "/" in file else ""
    found: set[str] = set()
    skip: frozenset[str]
    for path, text in [*sorted(texts.items()), ("PYTEST_ADDOPTS", options)]:
        where, _, name = path.rpartition("/")
        where = "" if where in ("", ".") else where
        if name == "conftest.py" and (not where or folder == where or folder.startswith(where + "/")):
            strings, skip = _literals(text), frozenset()
        elif name in CONFIG_FILES or path == "PYTEST_ADDOPTS":
            strings, skip = _k_expressions(text, path != "PYTEST_ADDOPTS"), _K_OPERATORS
        elif name.endswith(".py") and name != "conftest.py":  # a plugin module a selector file loads
            strings, skip = _literals(text), frozenset()
        elif name.lower().endswith(DATA_FILES):  # a data file a selector file names: every word of it
            strings, skip = [text], frozenset()
        else:
            continue
        found |= _runs(strings, skip)
    return sorted(found)


def _runs(strings, skip=frozenset()) -> set:
    found: set[str] = set()
    for s in strings:
        s = s.lower()
        found |= {r for r in _RUN.findall(s) if len(r) >= 2 and r not in skip}
        found |= {j for j in _JOINED.findall(s) if len(j) >= 3}
    return found


# what a test's own code reads of its name: `request.node.name`, `item.name`, `self._testMethodName`,
# `self.id()`, `request.node.nodeid`, `request.function.__name__`, `originalname`
_NAME_ATTRS = frozenset({"_testMethodName", "nodeid", "originalname", "__name__"})


def own_checks(text: str) -> list[str]:
    """The strings a hidden file's own code may look for in its tests' names (an autouse fixture reading
    `request.node.name`, a `setUp` reading `self._testMethodName`): the literals of a file that reads a test's
    name, as `selector_checks` reads a conftest's; none for a file that never does (or does not parse)."""
    try:
        tree = parse_module(text)
    except (SyntaxError, ValueError):
        return []
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and (
                n.attr in _NAME_ATTRS
                or (n.attr == "name" and ((isinstance(n.value, ast.Attribute) and n.value.attr == "node")
                                          or (isinstance(n.value, ast.Name) and n.value.id in ("item", "node"))))
                or (n.attr == "id" and isinstance(n.value, ast.Name) and n.value.id == "self")):
            return sorted(_runs(_literals(text)))
    return []


def reads(word: str, checks) -> bool:
    """Whether a selector may read `word` in a name: a check occurs in it."""
    low = word.lower()
    return any(c in low for c in checks)


def matched(name: str, checks) -> frozenset:
    """The checks that occur in `name` (case-insensitively)."""
    low = name.lower()
    return frozenset(c for c in checks if c in low)


def name_pool(words: list[str], checks) -> list[str]:
    """The words planted names are drawn from: `words` (a file's `vocabulary`) without the read ones, topped up
    from FALLBACK_WORDS (unread ones) while fewer than two are left."""
    pool = [w for w in words if not reads(w, checks)]
    if len(pool) < 2:
        pool = list(dict.fromkeys(pool + [w for w in FALLBACK_WORDS if not reads(w, checks)]))
    return pool


def kept(real: str | None, checks) -> list[str]:
    """The words of a real test's name that a selector reads: every member of its group carries them."""
    if not real or not checks:
        return []
    return list(dict.fromkeys(w for w in real.split("_")[1:] if w and reads(w, checks)))


RANK_TRIES = 8  # rank tokens tried for one name (each with MAX_RANKED_DRAWS draws) before it goes unranked
MAX_RANKED_DRAWS = 24


class Ranks:
    """The rank tokens of one file's planted names, handed out in the order the names must sort: `test_` + a
    zero-padded number + `_` + the drawn words (`draw_name`). A runner that runs tests sorted by name (a unittest
    TestCase, pytest's unittest collector, a conftest that sorts items by name) then runs them in the order the
    file's real names sort in, with the planted ones taking their graded test's place, whatever base class or
    scope they come from; the file's order (pytest's own) is kept by where the texts go. The host
    (evaluation/twins.py) and the export box (sweserve_plan.py) hand them out alike: the members of a graded
    test's group take consecutive ranks in their shuffled order, in the order their real names sort; the
    canaries take the last ones. `count`: how many group members the file plants (the canaries, at most four,
    come on top): the tokens' width leaves room for them and for tokens skipped."""

    def __init__(self, count: int):
        self.width = max(4, len(str(8 * max(count, 1))))
        self.next = 0

    def draw(self, rng: random.Random, words: list[str], taken: set[str], checks=(),
             real: str | None = None) -> str:
        """The next name: `draw_name`'s with the next rank token whose name matches what the real name's does
        (a token a selector reads is skipped); `draw_name`'s unranked name where RANK_TRIES tokens found none
        (a check that spans `test_` and a word: that name alone sorts out of place)."""
        for _ in range(RANK_TRIES):
            if self.next >= 10 ** self.width:
                break
            rank = f"{self.next:0{self.width}d}"
            self.next += 1
            name = _draw(rng, words, taken, checks, real, rank, MAX_RANKED_DRAWS)
            if name is not None:
                return name
        return draw_name(rng, words, taken, checks, real)


def ranked(names_in_file_order: list) -> list[int]:
    """The positions of `names_in_file_order` ([real name, or None for a canary]) in the order `Ranks` hands
    their tokens out: real names sorted as a runner sorts them (the file's order among equal ones), canaries
    last."""
    return sorted(range(len(names_in_file_order)),
                  key=lambda i: (names_in_file_order[i] is None, names_in_file_order[i] or ""))


def _draw(rng: random.Random, words: list[str], taken: set[str], checks, real: str | None, rank: str,
          tries: int) -> str | None:
    """A ranked draw: up to `tries` random draws, then the real name's own text; None where none matches."""
    must = kept(real, checks)
    want = matched(real or "test_", checks) if checks else frozenset()
    for attempt in range(tries + 1):
        name = _compose(rng, words, must, real, rank, literal=attempt == tries)
        if name not in taken and (not checks or matched(name, checks) == want):
            taken.add(name)
            return name
    return None


def _compose(rng: random.Random, words: list[str], must: list[str], real: str | None, rank: str = "",
             literal: bool = False) -> str:
    if literal:
        picked = [p for p in [(real or "")[4:].strip("_")] if p]
    else:
        picked = rng.sample(words, min(len(words), max(0, rng.randint(2, 3) - len(must))))
        if must:
            picked = must + picked
            rng.shuffle(picked)
    return "test_" + "_".join(([rank] if rank else []) + picked + [f"{rng.getrandbits(16):04x}"])


def draw_name(rng: random.Random, words: list[str], taken: set[str], checks=(), real: str | None = None) -> str:
    """`test_` + two or three words drawn from `words` + four hex digits, not in `taken` (then added to it): one
    distribution for a graded test, its twins and the canaries, the host's (evaluation/twins.py) and the
    export box's (sweserve_plan.py) alike. With `checks` (`selector_checks`): a graded test's group member
    (`real`: the graded test's name) also carries its `kept` words and matches the checks its real name
    matches; a canary (`real` None) matches those `test_` matches. A draw that does not is drawn again; after
    MAX_DRAWS, the real name's own text (what follows `test`) stands for the drawn words."""
    must = kept(real, checks)
    want = matched(real or "test_", checks) if checks else frozenset()
    attempt = 0
    while True:
        attempt += 1
        name = _compose(rng, words, must, real, literal=bool(checks) and attempt > MAX_DRAWS)
        if name not in taken and (not checks or attempt > 3 * MAX_DRAWS or matched(name, checks) == want):
            taken.add(name)
            return name


# Class decorators that do the same to every method and add none, rename none, ask for no argument: a canary
# is a method like the others there (a class skipped is skipped whole, its canaries with it). Any other
# decorator (a parametrized class, a mark a conftest may read to parametrize, xfail) leaves the class no home.
_SAME_FOR_EVERY_METHOD = frozenset({"skip", "skipIf", "skipUnless", "skipif", "usefixtures"})


def keeps_methods(decorator: ast.expr) -> bool:
    """Whether a class decorator leaves room for a canary among the class's methods."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    parts: list[str] = []
    while isinstance(target, ast.Attribute):
        parts.insert(0, target.attr)
        target = target.value
    if not isinstance(target, ast.Name):
        return False
    parts.insert(0, target.id)
    return parts[-1] in _SAME_FOR_EVERY_METHOD and parts[:-1] in ([], ["unittest"], ["pytest", "mark"], ["mark"])
