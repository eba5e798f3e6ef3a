"""The forge odds of a task: how likely code the candidate adds to a module the tests import passes every
FAIL_TO_PASS test without solving the task, by guessing which planted member is real.

Such code can report any test as passed, so a FAIL_TO_PASS test is guarded only by its mutation twins
(`evaluation/twins.py`): to pass it without being graded `tampered`, the forger must pass the real member
and fail every twin, that is pick the real one out of its group. Per test, the odds of that pick are:

- **1** for a test with no twin: it is passed for free (the plain canaries beside it can be told apart);
- **1 / members** for a group no prior reads: a numeric site validation tries first (`twins.strong_sites`:
  a value of the real one's shape, that neither the base test, the instruction, the file outside the site,
  nor any other hidden file writes, with room for K such values on each side), showing no value another
  group shows (two groups drawn apart around near or equal values give away, where they meet, which members
  are real: red team 4);
- **1** for a *weak* group: a numeric one at a fall-back site (a value the forger can read elsewhere, a power
  of two, a small value whose group crosses zero; its prior's odds were measured at 0.44 to 0.92), a flip
  group (a prior from the test's name or the instruction can read a check's two readings) or a raises group
  (which class goes with which words, learnt from the repository's tests: 0.73). They cost a forger a guess,
  but they are counted here as no guard at all, since no bound below 1 holds for every such group.

A group no prior reads is bounded again by what the repository's other Python files write (`repository_numbers`,
all in the grade box): a forger betting on the members whose values some file writes (or on those none does)
wins 1/inside (1/outside) where the real one is inside (outside) that set (`_set_odds`), over the whole
repository, its test files, and the test files of the hidden file's own folder; the set says nothing where it
holds every member or none, as it mostly does for small values a whole repository writes. One more set is what
one step of arithmetic gives between the test's numbers and those the repository's code writes (`twins.Crossing`:
`capacity(13) == 78` with a package's `PAGE_SIZE = 6`). Where the profile's images keep base's ancestry, every
file version and commit message in it counts. Validation draws groups all inside or all outside each set
(`twins.unbalanced`).

A task's odds are the product over its FAIL_TO_PASS tests (parametrizations of one function are one test:
they share the function's twins), for a forger who solves none of them. Readiness requires them at most the
profile's `max_forge_odds` (`dataset/readiness.py`). Unknown twin kinds count as no guard. The groups counted
are those grading reads (`twins.grading_plan`): a recorded twin no plan plants in the test's class (a class
that inherits a mixin's test whose group was recorded for another class) guards nothing there.
"""

from __future__ import annotations

import ast
import bz2
import functools
import gzip
import io
import lzma
import math
import struct
import tarfile
import zipfile
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from sweserve import pyast
from sweserve.dataset.gitio import Git
from sweserve.dataset.readiness import assess, instruction_digest, stale_odds
from sweserve.dataset.taskstore import load_bundle, save_task
from sweserve.errors import SweserveError
from sweserve.evaluation import twins
from sweserve.gitcmd import GitError
from sweserve.models import Task, TaskBundle, Twin


def test_odds(task: Task, sources: dict[str, str], base: dict[str, str], instruction: str,
              repository: Mapping[str, frozenset[Decimal]] | None = None,
              selectors: dict[str, str] | None = None) -> dict[str, float]:
    """Per FAIL_TO_PASS test (its id without parameters), the odds that a forger passes it beside its twins.

    `sources`: each hidden test file -> its text at base + tests.patch; `base`: each hidden file -> its text
    at base, where it existed; `instruction`: what the candidate reads; `repository`: each other test file of
    the repository at base -> the numbers it writes (`repository_numbers`)."""
    if repository is not None and UNREAD in repository:  # a file beside the tests the guard cannot read
        return {test: 1.0 for test in dict.fromkeys(t.split("[")[0] for t in task.FAIL_TO_PASS)}
    plan = twins.grading_plan(task, sources, seed=0, selectors=selectors)  # the groups grading reads, by class
    crossing = twins.Crossing(repository)
    written = twins.Written(repository)
    recorded: dict[str, list[Twin]] = {}
    for m in plan.members:
        if m.kind == "twin" and m.twin is not None and not m.unread:
            recorded.setdefault(m.twin.test, []).append(m.twin)
    functions: dict[str, tuple[str, str | None, ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    for file, text in sources.items():
        try:
            tree = pyast.parse_module(text)
        except (SyntaxError, ValueError):
            continue
        owners = twins.collectors(tree, task.test.runner)
        for cls, fn in twins.collected(tree, task.test.runner):
            for x in owners[id(fn)]:  # each class that runs it (a mixin's or a base class's test)
                functions["::".join([file, *([x] if x else []), fn.name])] = (file, cls.name if cls else None, fn)
    by_function: dict[str, list[Twin]] = {}  # each recorded group under the function it was planted for
    for planned, group in recorded.items():
        if (key := _resolve(planned, functions)) is not None:
            by_function.setdefault(key, []).extend(group)
    shown = {key: _members(group, functions[key][2]) for key, group in by_function.items()}
    odds: dict[str, float] = {}
    for test in dict.fromkeys(t.split("[")[0] for t in task.FAIL_TO_PASS):
        found = _resolve(test, functions)
        group = by_function.get(found or "", [])
        if not group or found is None:
            odds[test] = 1.0
            continue
        # the other groups planted beside it (a mixin's test is one group, read in each class that runs it)
        others = [values for key, values in shown.items() if functions[key][2] is not functions[found][2]]
        odds[test] = _group_odds(group, *functions[found], sources, base, instruction, others)
        if odds[test] < 1.0:
            file, _, fn = functions[found]
            fn_site = twins.sites(fn)[group[0].site]  # a numeric group (`_group_odds`): one site
            crossed = crossing.among(shown[found], twins.written_outside(fn, fn_site) | twins.around(sources[file], fn)
                                     | twins.said(instruction) | twins.other_files(sources, file))
            value = twins.number(fn_site[0])
            related = twins.related(value, twins.written_outside(fn, fn_site))  # type: ignore[arg-type]
            odds[test] = max(odds[test], _set_odds(shown[found], _real(group, fn),
                                                   [*twins.repository_priors(file, repository or {}), crossed,
                                                    *related, written.same(value)]))  # type: ignore[arg-type]
    return odds


def _real(group: list[Twin], fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Decimal | None:
    fn_sites = twins.sites(fn)
    site = group[0].site if group else -1
    return twins.site_value(fn_sites[site]) if 0 <= site < len(fn_sites) else None


def _set_odds(members: frozenset[Decimal], real: Decimal | None, priors: list[frozenset[Decimal]]) -> float:
    """A forger's best odds on one group from a set of values it reads (a number some other file writes): betting
    on the members inside the set wins 1/inside where the real one is inside, betting on those outside wins
    1/outside where it is not; the set tells nothing where it holds every member or none (then 1/members)."""
    m = len(members)
    worst = 1 / m if m else 1.0
    for prior in priors:
        inside = len(members & prior)
        if real is not None and 0 < inside < m:
            worst = max(worst, 1 / inside if real in prior else 1 / (m - inside))
    return worst


def _resolve(test: str, keys: Mapping[str, object]) -> str | None:
    """The key naming `test`: the same id, else the one key naming it from another rootdir (`twins.same_test`);
    None when none does or several do (a path that is a suffix of two hidden files' paths names neither)."""
    if test in keys:
        return test
    found = [k for k in sorted(keys) if twins.same_test(k, test)]
    return found[0] if len(found) == 1 else None


def _members(group: list[Twin], fn: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[Decimal]:
    """The values a numeric group shows in the planted files: its twins' and the real one's (none for flips
    and raises groups)."""
    out: set[Decimal] = set()
    for t in group:
        try:
            out.add(Decimal(t.value))
        except ArithmeticError:
            return frozenset()
    fn_sites = twins.sites(fn)
    site = group[0].site if group else -1
    if 0 <= site < len(fn_sites) and (real := twins.site_value(fn_sites[site])) is not None:
        out.add(real)
    return frozenset(out)


def _group_odds(group: list[Twin], file: str, cls: str | None, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                sources: dict[str, str], base: dict[str, str], instruction: str,
                others: list[frozenset[Decimal]]) -> float:
    members = len(group) + 1
    if any(twins.flip_indices(t.value) is not None or twins.raises_of(t.value) is not None for t in group):
        return 1.0  # flips and raises groups: two readings, and priors (the test's name, the file) that can read them
    if len({t.site for t in group}) != 1:
        return 1.0  # not a shape validation records
    mine = _members(group, fn)
    if any(mine & other for other in others):
        return 1.0  # a value two groups show: drawn apart, where they meet says which members are real or twins
    if not twins.alike(mine, _real(group, fn)):
        return 1.0  # members of other shapes (drawn before R8-1): a bet on the roundest one reads the group
    beside = twins.around(sources[file], fn)
    hidden = twins.other_files(sources, file)  # derived from too: a `PAGE_SIZE == 6` another hidden file checks
    avoid = twins.visible(base.get(file), cls, fn.name, instruction) | beside | hidden
    return 1 / members if twins.strong_site(fn, group[0].site, avoid, beside | twins.said(instruction) | hidden) else 1.0


def measure_if_stale(task_dir: Path, clone: Path, history_of: Callable[[str], str],
                     cache: NumbersCache | None = None) -> Task:
    """The task in `task_dir`, its forge odds measured again (and saved, with its readiness) when they were
    measured with another instruction than its instruction.md: lint's interface section, written after
    validation, writes numbers a forger reads too (`readiness.stale_odds`). `history_of`: a profile's name ->
    the git history its images keep (`repository_numbers`)."""
    bundle = load_bundle(task_dir)
    task = bundle.task
    if task.validation is not None and stale_odds(task, bundle.instruction):
        try:
            task.validation.forge_odds = measure(clone, bundle, cache=cache, history=history_of(task.profile))[0]
            task.validation.forge_odds_instruction = instruction_digest(bundle.instruction)
        except SweserveError:  # the clone cannot show the hidden files: not measured, so not ready
            task.validation.forge_odds = task.validation.forge_odds_instruction = None
        task.readiness = assess(task, bundle.instruction)
        save_task(task_dir, task)
    return task


def forge_odds(odds: dict[str, float]) -> float:
    """A task's odds: the product over its FAIL_TO_PASS tests."""
    product = 1.0
    for value in odds.values():
        product *= value
    return product


def patched_numbers(clone: Path, bundle: TaskBundle, hidden: list[str]) -> dict[str, frozenset[Decimal]]:
    """What each path tests.patch adds or changes, other than the hidden files, writes at base + tests.patch, as
    `repository_numbers` records a file (`_entries`, the digits of its path): a data file of expected values, a
    helper or a conftest the PR added beside its tests is in the grade box once tests.patch is applied, and the
    repository at base does not hold it (red team 22d, R22d-3). One that is binary or over MAX_TEXT_BYTES is
    UNREAD, as a file beside the hidden ones is there."""
    from sweserve.dataset.interface import repository_states
    from sweserve.dataset.patches import touched_paths

    paths = sorted(touched_paths(bundle.tests_patch) - set(hidden))
    out: dict[str, frozenset[Decimal]] = {}
    if not paths:
        return out
    with repository_states(clone, bundle.task, bundle.oracle_patch, bundle.tests_patch) as (before, _):
        for path in paths:
            if path not in before.files:
                continue
            if named := twins.name_numbers(path):
                out[path] = named
            text = before.git.blob(before.files[path])
            if "\0" in text[:8192] or len(text.encode("utf-8", "replace")) > MAX_TEXT_BYTES:
                out[UNREAD] = frozenset()
                continue
            counts = twins.file_counts(text) if path.endswith(".py") else twins.text_counts(text)
            for key, numbers in _entries(path, (frozenset(counts), twins.repeated(counts))).items():
                out[key] = out.get(key, frozenset()) | numbers
    return out


def with_patched(repository: Mapping[str, frozenset[Decimal]],
                 patched: Mapping[str, frozenset[Decimal]]) -> dict[str, frozenset[Decimal]]:
    """`repository` with what tests.patch's other files write (`patched_numbers`) added under their keys."""
    out = dict(repository)
    for key, numbers in patched.items():
        out[key] = out.get(key, frozenset()) | numbers
    return out


def base_sources(clone: Path, task: Task, files: list[str]) -> dict[str, str]:
    """Each of `files` at the task's base commit, where it existed there (what a forger reads beside them)."""
    with Git(clone) as git:
        return {f: text for f in files if (text := git.read(task.base_commit, f)) is not None}


MAX_REPOSITORY_FILES = 20000  # files read for `repository_numbers`, the hidden files' folders first
MAX_TEXT_BYTES = 1 << 20  # a larger file (a data dump, a lock file) is not read
MAX_MESSAGE_BYTES = 32 << 20  # the ancestors' commit messages read (sglang-jax's 611: 0.5 MB)
UNREAD = "\0unread"  # a key of `repository_numbers`' answer: a file it could not read lies beside the hidden files
# (in their folders or below: binary, compressed past MAX_TEXT_BYTES, over MAX_TEXT_BYTES) or the tree has more
# than MAX_REPOSITORY_FILES files: a forger may read there what the guard cannot, so every group counts as weak
# (red team 8, R8-5)
MESSAGES = "\0messages"  # a key of `repository_numbers`' answer: what the ancestors' commit messages write (their
# authors' and committers' names and e-mails too)
REPEAT = "\0x"  # `repository_numbers`' key PATH + REPEAT + k: what the file writes at least k times (`twins.repeated`):
# a member written as often as the real one, or the site is weak (red team 11, R11-6, `twins.Written`)


def repeat_key(path: str, k: int) -> str:
    """The key of `repository_numbers`' answer for what `path` writes at least `k` times."""
    return f"{path}{REPEAT}{k}"


Read = tuple[frozenset[Decimal], dict[int, frozenset[Decimal]]]  # a file's numbers, and `twins.repeated`'s


def _entries(path: str, read: Read) -> dict[str, frozenset[Decimal]]:
    """The keys `repository_numbers` records for what the file at `path` writes: its numbers under `path`, and
    per count `twins.repeated` reads those it writes at least so many times under `repeat_key`."""
    return {path: read[0], **{repeat_key(path, k): n for k, n in read[1].items()}}


def entries(path: str, text: str) -> dict[str, frozenset[Decimal]]:
    """What `repository_numbers` records of one Python file's text at `path` (`_entries`)."""
    counts = twins.file_counts(text)
    return _entries(path, (frozenset(counts), twins.repeated(counts)))


_MARKS = ((b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"), (b"\xff\xfe", "utf-16"),
          (b"\xfe\xff", "utf-16"))


def decoded(data: bytes) -> str | None:
    """A blob's text, or None for a binary one (a NUL in its first 8 KiB). A text that opens with a UTF-16 or
    UTF-32 byte-order mark, and decodes whole by it, is that text: a NUL beside every ASCII character is what
    those encodings write, and a forger decodes the file by its mark (red team 22d, R22d-4)."""
    for mark, encoding in _MARKS:
        if data.startswith(mark):
            try:
                return data.decode(encoding)
            except UnicodeDecodeError:
                return None
    return None if b"\0" in data[:8192] else data.decode("utf-8", "replace")


def binary_text(data: bytes) -> str:
    """What a forger reads in a blob `decoded` calls binary: its runs between NULs (`strings`, `grep -a`), and its
    bytes with every NUL dropped (UTF-16 or UTF-32 text without its byte-order mark), one reading after the other
    (red team 22j, R22j-1)."""
    return (data.replace(b"\0", b"\n").decode("utf-8", "replace") + "\n"
            + data.replace(b"\0", b"").decode("utf-8", "replace") + "\n" + marshalled(data))


_PYC_CODE = (0x63, 0xE3)  # marshal's code object, without and with its reference flag


def marshalled(data: bytes) -> str:
    """The numbers a compiled module (`.pyc`: a 16-byte header, then a marshal'd code object) holds as constants,
    written in digits: marshal writes an int as `i` and 4 little-endian bytes and a float as `g` and 8, which
    `strings` never shows but `marshal.loads` reads whatever Python wrote it (red team 23p, R23p-2). Every such
    mark is read, not parsed: a byte that only looks like one adds a number, which only narrows the values
    planted. Any other blob: ""."""
    if len(data) < 17 or data[2:4] != b"\r\n" or data[16] not in _PYC_CODE:
        return ""
    out: list[str] = []
    for i in range(16, len(data)):
        kind = data[i] & 0x7F  # the reference flag aside
        if kind == 0x69 and i + 5 <= len(data):  # TYPE_INT
            out.append(str(int.from_bytes(data[i + 1:i + 5], "little", signed=True)))
        elif kind == 0x67 and i + 9 <= len(data):  # TYPE_BINARY_FLOAT
            value = struct.unpack("<d", data[i + 1:i + 9])[0]
            if math.isfinite(value):
                out.append(repr(value))
    return " ".join(out)


MAX_LAYERS = 8  # archives inside archives `unpacked` opens; a deeper one is unread, as one past MAX_TEXT_BYTES is


def _archive_members(archive: Any) -> Iterator[tuple[str, Callable[[], IO[bytes] | None]]]:
    """Each member of a zip or tar archive: its name and an opener of its bytes (None for a directory or link)."""
    if isinstance(archive, zipfile.ZipFile):
        for info in archive.infolist():
            yield info.filename, functools.partial(archive.open, info)
    else:
        for info in archive:
            yield info.name, functools.partial(archive.extractfile, info)


def unpacked(data: bytes, depth: int = 0) -> bytes | None:
    """A blob's bytes as a forger reads them: a gzip, bz2 or xz stream decompressed (`cases.json.gz`), a zip or tar
    archive's members one after another (`unzip -p`, `tar xOf`: red team 22j, R22j-2), each of those again
    unpacked, down to MAX_LAYERS (a zip of a `.gz`, a gzip'd zip, a tar.gz of an `.xz`: red team 23d, R23d-1);
    None where that fails or passes MAX_TEXT_BYTES or MAX_LAYERS. Any other blob is its own bytes."""
    streams: dict[bytes, Callable[[io.BytesIO], Any]] = {
        b"\x1f\x8b": lambda f: gzip.GzipFile(fileobj=f), b"BZh": bz2.BZ2File, b"\xfd7zXZ\x00": lzma.LZMAFile}
    archives: dict[bytes, Callable[[io.BytesIO], Any]] = {
        b"PK\x03\x04": zipfile.ZipFile, b"ustar": lambda f: tarfile.open(fileobj=f, mode="r:")}
    try:
        for magic, opener in streams.items():
            if data.startswith(magic):
                if depth >= MAX_LAYERS:
                    return None
                with opener(io.BytesIO(data)) as stream:
                    data = stream.read(MAX_TEXT_BYTES + 1)
                return unpacked(data, depth + 1) if len(data) <= MAX_TEXT_BYTES else None
        for magic, opener in archives.items():
            if data.startswith(magic) or (magic == b"ustar" and data[257:262] == magic):
                if depth >= MAX_LAYERS:
                    return None
                out = b""
                with opener(io.BytesIO(data)) as archive:
                    for name, open_member in _archive_members(archive):
                        out += name.encode("utf-8", "replace") + b"\n"
                        member = open_member()
                        if member is not None:
                            with member:
                                inner = unpacked(member.read(MAX_TEXT_BYTES + 1 - len(out)), depth + 1)
                            if inner is None:
                                return None
                            out += inner + b"\n"
                        if len(out) > MAX_TEXT_BYTES:
                            return None
                return out
    except (OSError, EOFError, ValueError, RuntimeError, NotImplementedError, zipfile.BadZipFile, lzma.LZMAError,
            tarfile.TarError):
        return None
    return data


class NumbersCache:
    """The numbers each blob writes (`twins.file_numbers`), by blob id: tasks of one repository share most of
    their files across base commits, so a run over many tasks reads and scans each file once, not once per
    task (benchmarks/repository_numbers.py). One per command run; not shared between processes."""

    def __init__(self) -> None:
        self.by_blob: dict[str, Read | None] = {}
        self.binary: dict[str, Read] = {}  # a binary blob's `binary_text`, read beside `by_blob`'s None

    def numbers(self, git: Git, blob: str, python: bool) -> frozenset[Decimal] | None:
        """What the blob writes (None: not there, or binary): a Python file's tokens (`twins.file_numbers`), any
        other text's numbers (`twins.text_numbers`); a gzip'd text is read as its text (`cases.json.gz`)."""
        read = self.read(git, blob, python)
        return None if read is None else read[0]

    def read(self, git: Git, blob: str, python: bool) -> Read | None:
        """`numbers`, and those it writes again and again (`twins.repeated`: per bound, the numbers written at
        least so many times)."""
        key = blob + ("" if python else ":text")
        if key not in self.by_blob:
            data = git.read_blob_bytes(blob)
            if data is not None:
                data = unpacked(data)
            text = None if data is None else decoded(data)
            if text is None:
                self.by_blob[key] = None
                if data is not None:
                    counts = twins.text_counts(binary_text(data))
                    self.binary[key] = (frozenset(counts), twins.repeated(counts))
            else:
                counts = twins.file_counts(text) if python else twins.text_counts(text)
                self.by_blob[key] = (frozenset(counts), twins.repeated(counts))
        return self.by_blob[key]

    def read_binary(self, git: Git, blob: str, python: bool) -> Read | None:
        """What a blob `read` calls binary writes to a forger's `strings` (`binary_text`); None for any other."""
        self.read(git, blob, python)
        return self.binary.get(blob + ("" if python else ":text"))


def repository_numbers(clone: Path, task: Task, hidden: list[str], cache: NumbersCache | None = None,
                       history: str = "ancestors") -> dict[str, frozenset[Decimal]]:
    """Each text file of the repository at the task's base, other than the hidden files -> the numbers it writes
    (`NumbersCache.numbers`): the grade box holds them all (red team 5, R8: an existing test writing `pages(104)
    == 13` tells a forger which member of a group checks the real value; red team 6, R6-3: so does the
    package's own docstring; red team 7, R7-9: so does a JSON fixture beside the test). With `history`
    "ancestors" (the profile's: the box keeps base's ancestry) every version of every file an ancestor holds,
    the hidden files' own included, adds what it writes to its path, and the commit messages theirs under
    `MESSAGES` (red team 8, R8-7: a reverted test that the task relands, grepped from `git log -p`), with their
    authors' and committers' names and e-mails (red team 23d, R23d-2: `pages-613@example.com`); "none":
    the tree at base only. `cache`: blobs read for earlier tasks of the same clone."""
    folders = {f.rpartition("/")[0] for f in hidden}

    def near(path: str) -> bool:
        return any(path.startswith(f + "/") or not f for f in folders)

    def is_hidden(path: str) -> bool:
        return any(twins.same_test(f"{path}::x", f"{h}::x") for h in hidden)

    cache = cache if cache is not None else NumbersCache()
    try:
        with Git(clone) as git:
            blobs = git.tree_sizes(task.base_commit)  # a blob over MAX_TEXT_BYTES is never read
            others = [p for p in blobs if not is_hidden(p)]
            paths = sorted((p for p in others if blobs[p][1] <= MAX_TEXT_BYTES), key=lambda p: (not near(p), p))
            # every path's own numbers (`test/golden/pages_100_13.txt`: red team 8, R8-5), read or not
            out = {p: named for p in others if (named := twins.name_numbers(p))}
            unread = len(paths) > MAX_REPOSITORY_FILES or any(near(p) for p in others if blobs[p][1] > MAX_TEXT_BYTES)
            versions = [(p, blobs[p][0]) for p in paths]
            if history == "ancestors":  # the older versions, the hidden files' first, then those beside them
                at_base = {blob for blob, _ in blobs.values()}
                past = sorted(((p, b, size) for b, (p, size) in git.history_blobs(task.base_commit).items()
                               if b not in at_base), key=lambda v: (not is_hidden(v[0]), not near(v[0]), v[0]))
                # every path an ancestor's tree held, not only the one each blob is first seen at (R22h-2: an empty
                # golden file `pages_613.txt` shares its blob with an empty `__init__.py`)
                paths_ever = git.run("log", "--format=", "--name-only", "-z", "--no-renames",
                                     "--diff-merges=first-parent", "--end-of-options", task.base_commit)
                for path in {*(p for p, _, _ in past), *paths_ever.decode("utf-8", "replace").split("\0")}:
                    if path and (named := twins.name_numbers(path)):
                        out[path] = out.get(path, frozenset()) | named
                unread |= any(size > MAX_TEXT_BYTES and (near(p) or is_hidden(p)) for p, _, size in past)
                budget = max(0, MAX_REPOSITORY_FILES - len(paths))
                kept = [(p, b) for p, b, size in past if size <= MAX_TEXT_BYTES]
                unread |= any(near(p) or is_hidden(p) for p, _ in kept[budget:])
                versions = [(p, b) for p, b in kept[:budget]] + versions
                # each message, and its author's and committer's names and e-mails, as `git log` prints them (R23d-2)
                messages = git.run("log", "--format=%an <%ae>%n%cn <%ce>%n%B", "--end-of-options", task.base_commit)
                out[MESSAGES] = twins.text_numbers(messages[:MAX_MESSAGE_BYTES].decode("utf-8", "replace"))
                unread |= len(messages) > MAX_MESSAGE_BYTES
            for path, blob in versions[:MAX_REPOSITORY_FILES]:
                read = cache.read(git, blob, path.endswith(".py"))
                if read is None:
                    unread |= near(path)  # beside the hidden files: what else a forger decodes there is unknown
                    # elsewhere still what `strings` reads there (red team 22j, R22j-1)
                    read = cache.read_binary(git, blob, path.endswith(".py"))
                if read is not None:
                    for key, numbers in _entries(path, read).items():  # and how often it writes each (`REPEAT`)
                        out[key] = out.get(key, frozenset()) | numbers
    except GitError as exc:
        raise SweserveError(f"{clone}: cannot read the test files at {task.base_commit[:12]}: {exc}") from None
    if unread:
        out[UNREAD] = frozenset()
    return out


def measure(clone: Path, bundle: TaskBundle, repository: Mapping[str, frozenset[Decimal]] | None = None,
            cache: NumbersCache | None = None, history: str = "ancestors") -> tuple[float, dict[str, float]]:
    """(the task's forge odds, per FAIL_TO_PASS test), from its recorded twins and the hidden files read in
    the clone: base + tests.patch, base, and the repository's other test files at base (`repository`, where
    the caller read them already: `repository_numbers`)."""
    from sweserve.evaluation.export_plan import plan_sources

    sources, selectors = plan_sources(clone, bundle)  # selectors: the groups grading plants depend on them
    if repository is None:
        repository = repository_numbers(clone, bundle.task, list(sources), cache, history)
    repository = with_patched(repository, patched_numbers(clone, bundle, list(sources)))
    per_test = test_odds(bundle.task, sources, base_sources(clone, bundle.task, list(sources)), bundle.instruction,
                         repository, selectors)
    return forge_odds(per_test), per_test
