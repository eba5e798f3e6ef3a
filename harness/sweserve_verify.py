"""The exports' verifier: `sweserve run`'s grading, inside the task container, for harnesses that grade there.

SWE-bench's harness runs an exported task's `eval_script`, Harbor its `tests/test.sh`; both run this, as root,
with the system Python (`python3 -I sweserve_verify.py VERIFY_JSON`), from /tmp/sweserve/harness where the
export put the harness. It does what the host does in `sweserve run` (`evaluation/verifier.py`), with the same
modules shipped beside it:

    runner digest and installed names taken (sweserve_boot)
      → the submission applied with `git apply --index` to base (git names every path it touched)
      → resets (sweserve_resets = evaluation/resets.py) → tests.patch → the grading plan (sweserve_plan: the
        graded tests, their mutation twins and canaries, every name and order drawn here at run time; plain
        canaries, sweserve_canaries, where the export ships no plan)
      → the hidden tests run by the boot script as the unprivileged user over a root-owned tree (sweserve_drop),
        outcomes streamed behind a nonce on a pipe only this process reads (sweserve_protocol)
      → every process of the test user killed, then the verdict: the stream's shape, the canaries, the grade.

The verdict is decided here, in a root process the tests cannot signal, trace or write to, after the tests'
process has ended; only then is anything written that the harness reads: for SWE-bench the `-rA`-style lines
between its markers (every graded test FAILED unless the run was clean), for Harbor /logs/verifier/reward.txt.
The test output is shown after the verdict, each line behind "| " and with the harness's markers broken.

The plan is computed by the exporter from `evaluation/twins.py`'s `grading_plan` (evaluation/export_plan.py)
and shipped in a root-only file (`plan_file`), read and deleted before anything of the submission runs.
"""

import fnmatch
import json
import os
import secrets
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import sweserve_canaries  # noqa: E402
import sweserve_drop  # noqa: E402
import sweserve_plan  # noqa: E402
import sweserve_protocol  # noqa: E402
import sweserve_resets  # noqa: E402
import sweserve_twins  # noqa: E402

WORKDIR = "/testbed"
DRAIN_S = 2.0  # how long the pipe is read once the runner has ended (what a process it left writes is not its run)
OUTPUT_LIMIT = 8 * 2**20  # as the host's OutputTail: past it the stream's head is lost, and the run with it
# swebench.harness.constants, built so that no line of this file holds them (swebench edits eval scripts there)
START, END, EXIT_CODE = (">" * 5 + " " + words for words in ("Start Test Output", "End Test Output", "Test Exit Code"))
# a graded test that did not pass is FAILED (ERROR where it errored), as SWE-bench grades a skip: a failed run
# printed with SKIPPED and PASSED lines only, and exit code 1, is one SWE-bench reads as not describing its run
# (`get_logs_eval`: "patch not applied"), then classifies for an infrastructure fault by the submission's own
# output ("Cannot allocate memory"): flagged to be rerun (red team 23j, R23j-3)
WORDS = {"passed": "PASSED", "failed": "FAILED", "error": "ERROR"}
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_ATTR_NOSYSTEM": "1",
           "GIT_NO_REPLACE_OBJECTS": "1", "GIT_OPTIONAL_LOCKS": "0", "HOME": "/nonexistent"}
GIT = ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "safe.directory=*",
       "-c", "core.autocrlf=false", "-c", "core.symlinks=true", "-c", "core.fileMode=true", "--literal-pathspecs"]


# Each git command's limit, as the host's git steps in the grade box have (evaluation/verifier.py `_git`): Harbor's
# artifact is the agent's own text, and a sub-MB patch can keep `git apply` busy for hours (a hunk tried at each
# of millions of lines a binary literal created): past the harness's limit the trial is its error, no verdict.
GIT_TIMEOUT_S = 120


class Verdict(Exception):
    def __init__(self, status, reason=None):
        super().__init__(reason)
        self.status, self.reason = status, reason


def git(*args, check=True, text=True):
    try:
        # a name need not be UTF-8 (`"b/\\377.py"` in a patch is the byte 0xFF) and `-z` output is raw: each byte
        # kept as a lone surrogate, which os functions and git's argv turn back into it (red team 16a, R16a-4)
        proc = subprocess.run(GIT + list(args), cwd=WORKDIR, capture_output=True, text=text,
                              errors="surrogateescape" if text else None, env={**os.environ, **GIT_ENV},
                              timeout=GIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:  # the submission is the only input git can be slow on (R15e-2)
        raise Verdict("patch_failed", f"git {args[0]} ran past {GIT_TIMEOUT_S}s on the submission") from None
    if check and proc.returncode != 0:
        raise Verdict("error", f"git {args[0]} failed")
    return proc


def git_words(proc):
    """The end of what git said on stderr, as text (a name in it need not be UTF-8)."""
    return proc.stderr.strip()[-1000:].encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _z(raw):
    return [p for p in raw.split("\0") if p]


def to_base(cfg):
    """The tree back at base, the submission kept as a patch: the patch file (Harbor's artifact) or, where none
    is given, the working tree as the harness left it. SWE-bench's harness has applied its prediction
    (/tmp/patch.diff) before the eval script runs, with fall-backs a strict `git apply` refuses (`--3way`,
    `--reject`, `patch --fuzz=5`): where the tree differs from base, what it applied is the submission (red
    team 11, R11-3: a context line differing in whitespace), less the backups `patch` leaves (`*.orig`,
    `*.rej`) that the prediction does not name. None of the submission's code has run. Nothing of the
    submission is on disk while the runner's facts are taken as root."""
    base = cfg["base_commit"]
    patch = cfg.get("patch", "")
    given = bool(patch and os.path.exists(patch))
    applied = cfg.get("format") == "swebench" and given and bool(git("status", "--porcelain", "-z").stdout)
    if not given or applied:
        named = sweserve_protocol.numstat_paths(git("apply", "--numstat", "-z", patch, check=False).stdout) \
            if given else set()
        # what a .gitignore hides is no part of it, as in `sweserve run`'s diff: removed below. A tree git cannot
        # stage (the prediction's .gitattributes names an encoding its own file is not in) is the submission's
        # verdict, as `sweserve run` rejects it (submission.diff_tree): never an error, redone (red team 23j, R23j-2)
        staged = git("add", "-A", check=False)
        if staged.returncode != 0:
            raise Verdict("patch_failed", "git refused the tree: " + (git_words(staged) or "git add failed"))
        added = _z(git("diff", "--cached", "--name-only", "--diff-filter=A", "-z", base).stdout)
        backups = [p for p in added if p.endswith((".orig", ".rej")) and p not in named] if applied else []
        if backups:
            git("rm", "-q", "--cached", "--", *backups)
            for path in backups:
                os.unlink(os.path.join(WORKDIR, path))
        patch = os.path.join(HERE, "submission.patch")
        with open(patch, "wb") as fh:
            fh.write(git("diff", "--cached", "--binary", "--full-index", base, text=False).stdout)
    leftovers = _z(git("apply", "--numstat", "-z", patch, check=False).stdout)
    git("reset", "-q", "--hard", base)
    git("clean", "-qfd")
    for path in untracked():  # what .gitignore files kept from clean, bytecode too (the image's own outputs stay)
        full = os.path.join(WORKDIR, path)
        if inside(full):
            if path.endswith("/") and os.path.isdir(full) and not os.path.islink(full.rstrip("/")):
                shutil.rmtree(full)  # a nested repository, which git lists as one folder (red team 15d, R15d-4)
            else:
                os.unlink(full)
    # what a harness applied where base ignores it (clean leaves those): each name once, and no git process per
    # name (a patch naming one file 400,000 times was as many processes: past Harbor's limit, red team 15h,
    # R15h-3). A name git knows is a tracked file or a folder holding one (what `ls-files --error-unmatch` matched)
    known: set[str] = set()
    for tracked in _z(git("ls-files", "-z").stdout):
        parts = tracked.split("/")
        known.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    for path in dict.fromkeys(token.split("\t")[-1] for token in leftovers):
        full = os.path.join(WORKDIR, path)
        if not path or path in known or not inside(full):  # `git apply --numstat` lists names unchecked (`../x`)
            continue
        # nor are they normal: `.`, `pkg/..` are folders, `pkg//mod.py` a tracked file (red team 16a, R16a-2)
        if os.path.normpath(path) != path or (os.path.isdir(full) and not os.path.islink(full)):
            continue
        if os.path.lexists(full):
            os.unlink(full)
    return patch


def git_file():
    """Where the image keeps its git dir outside the work tree (GIT_DIR: images/checked-out, the SWE-bench
    export), the tests still find the repository at /testbed/.git, as under `sweserve run`: whatever the
    submission left there goes (git never read it), and a `.git` file naming the real git dir takes its place."""
    git_dir = os.environ.get("GIT_DIR")
    if not git_dir:
        return
    dot = os.path.join(WORKDIR, ".git")
    if os.path.isdir(dot) and not os.path.islink(dot):
        shutil.rmtree(dot)
    elif os.path.lexists(dot):
        os.unlink(dot)
    with open(dot, "w") as fh:
        fh.write(f"gitdir: {git_dir}\n")


def test_env(extra=None):
    """The tests' environment: this process's, less the interpreter's switches and the git dir the image names
    (the tests find it through /testbed/.git, `git_file`), then the task's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") and k not in ("GIT_DIR", "GIT_WORK_TREE")}
    env.update({k: v for k, v in (extra or {}).items() if not k.startswith("PYTHON")})
    return env


class NotRegular(OSError):
    pass


class TooLarge(Exception):
    pass


READ_LIMIT = 16 * 2**20  # as the host's `Sandbox.read_file`: a pytest config past it is not read


def read_regular(full, limit=READ_LIMIT):
    """The text of the file at `full` where that is a regular file, not a link (as the host reads it) and no more
    than `limit` bytes (TooLarge past it): a submission's link to a device or a pipe would hold this root process
    (its read never ends) past the harness's time limit, and the trial would end as the harness's error, with no
    verdict (red team 15e, R15e-1); a file of GBs (a deflated binary literal of a few MB writes one, or a link to
    an image's library) cost the verifier its memory before the tests ran (red team 23j, R23j-1)."""
    fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_NOCTTY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegular(full)
        chunks, size = [], 0
        while size <= limit:
            data = os.read(fd, min(1 << 20, limit + 1 - size))
            if not data:
                break
            chunks.append(data)
            size += len(data)
        if size > limit:
            raise TooLarge(full)
        return b"".join(chunks).decode("utf-8", "replace")
    finally:
        os.close(fd)


def inside(full):
    """Whether a path's folder is inside the work tree, links resolved: only there does this root process
    remove what a submission named."""
    folder = os.path.realpath(os.path.dirname(full))
    return folder == WORKDIR or folder.startswith(WORKDIR + "/")


def untracked():
    """Untracked files the image did not have, removed once the tree is back at base: everything but what its
    install left, the paths the task image's .git/info/exclude lists one by one (`/path`); whatever .gitignore
    files, or that file's own patterns (`*.pyc`, `__pycache__/`), say. A file they hide is no part of the
    submission (as in `sweserve run`'s diff), and must not stay on disk either: a submission's .gitignore kept
    a conftest.py beside the hidden tests through every reset (red team 12b, R12b-3), and a .pyc the patterns
    hid was imported in place of its source (red team 13, R13-3)."""
    exclude = git("rev-parse", "--git-path", "info/exclude").stdout.strip()
    exclude = exclude if os.path.isabs(exclude) else os.path.join(WORKDIR, exclude)
    try:
        with open(exclude, encoding="utf-8", errors="replace") as fh:
            own = [line for line in fh.read().splitlines() if line.startswith("/")]
    except OSError:
        own = []
    listed = os.path.join(HERE, "image-files.exclude")
    with open(listed, "w", encoding="utf-8") as fh:
        fh.write("".join(line + "\n" for line in own))
    found = _z(git("ls-files", "--others", "-z", f"--exclude-from={listed}").stdout)
    return [p for p in found if os.path.lexists(os.path.join(WORKDIR, p))]


def submit(cfg, patch):
    """The submission on base with `git apply --index`; {path: git status letter} of what it touched."""
    with open(patch, "rb") as fh:
        empty = not fh.read().strip()
    if not empty:
        proc = git("apply", "--index", "--binary", "--whitespace=nowarn", patch, check=False)
        if proc.returncode != 0:
            raise Verdict("patch_failed", git_words(proc) or "git apply failed")
    names = _z(git("diff", "--cached", "--name-status", "-z", "--no-renames", cfg["base_commit"]).stdout)
    return {names[i + 1]: names[i][0] for i in range(0, len(names) - 1, 2)}


def reset(cfg, changed, tests_patch, installed):
    base = cfg["base_commit"]
    hidden = sweserve_protocol.numstat_paths(git("apply", "--numstat", "-z", tests_patch).stdout) | set(cfg["test_files"])
    files = set(_z(git("ls-files", "-z").stdout))
    added = {p for p, s in changed.items() if s == "A"}
    base_files = (files - added) | {p for p, s in changed.items() if s == "D"}

    def is_test(path):
        return path in hidden or any(fnmatch.fnmatchcase(path, g) for g in cfg["test_paths"])

    def config_changed(path):
        name = path.rsplit("/", 1)[-1]
        old = git("show", f"{base}:{path}", check=False)
        try:
            now = read_regular(os.path.join(WORKDIR, path))
        except OSError:  # absent, a link, a device, a folder, a pipe (read as absent, as the host reads it)
            now = None
        except TooLarge:  # a config this process will not read whole: base's goes back in its place (R23j-1)
            return True
        before = old.stdout if old.returncode == 0 else None
        return sweserve_resets.pytest_section(name, before) != sweserve_resets.pytest_section(name, now)

    resets = sweserve_resets.plan_resets(changed, is_test, sweserve_resets.package_dirs(files), config_changed,
                                         frozenset(installed) - sweserve_resets.repo_names(base_files))
    restore = [r.path for r in resets if r.existed]
    for r in resets:  # the submission's new paths first: one may stand where base has a folder to restore (R14a-1)
        full = os.path.join(WORKDIR, r.path)
        if not r.existed and os.path.isdir(full) and not os.path.islink(full):
            # a submodule entry: `git apply --index` made a folder of it, which `sweserve run`'s `rm -f` cannot
            # remove either: its verdict, not this process's death (red team 16a, R16a-3)
            raise Verdict("failed", "the hidden tests could not be set up on this submission")
        if not r.existed and os.path.lexists(full):
            os.unlink(full)
    if restore:
        git("checkout", base, "--", *restore)
    proc = git("apply", "--binary", "--whitespace=nowarn", tests_patch, check=False)
    if proc.returncode != 0:
        # validation applied it on the null and oracle submissions: on this one, the submission's doing (R23e-2)
        raise Verdict("failed", "the hidden tests could not be set up on this submission (tests.patch did not apply)")
    return resets


def grading_plan(cfg, sources):
    """(files to plant {path under /testbed: text}, check(outcomes, exit status) -> (outcomes by real id,
    problems), unmask(output) -> output with real names).

    The export's plan (`plan_file`, root-only, deleted once read: see sweserve_plan.py): the graded tests,
    their mutation twins and canaries as `sweserve run` plants them, every name and each scope's order drawn
    here, now; the map back stays in this process. Without one (an export made without the task's clone, of
    a task without twins), plain canaries (sweserve_canaries)."""
    plan_file = cfg.get("plan_file")
    if plan_file:
        try:
            with open(plan_file) as fh:
                shipped = json.load(fh)
            os.unlink(plan_file)
            texts, members = sweserve_plan.plant(shipped)
        except (OSError, ValueError, KeyError, TypeError, sweserve_plan.PlanError) as exc:
            raise Verdict("error", f"the export's grading plan cannot be planted: {exc}") from None
        return (texts, lambda outcomes, exit_status: sweserve_plan.read(members, outcomes, exit_status),
                lambda output: sweserve_plan.unmask(members, output))
    task = types.SimpleNamespace(FAIL_TO_PASS=cfg["FAIL_TO_PASS"], PASS_TO_PASS=cfg["PASS_TO_PASS"],
                                 test=types.SimpleNamespace(runner=cfg["runner"], files=cfg["test_files"]))
    workdir = os.path.relpath(cfg["workdir"], WORKDIR)  # the tree after the resets and tests.patch, as run reads it
    checks = sweserve_twins.tree_checks(WORKDIR, cfg["test_files"], workdir, sources,
                                        cfg["env"].get("PYTEST_ADDOPTS", ""))
    plan = sweserve_canaries.plan(task, sources, checks)
    return (plan.texts, lambda outcomes, exit_status: sweserve_canaries.check(plan.canaries, outcomes, exit_status),
            lambda output: output)


def run_boot(cfg, run_config_path, timeout):
    """The boot script as a child of this root process; its output through a pipe only this process holds.
    Returns (output, exit status as docker reports it, timed out, truncated)."""
    env = test_env(cfg["env"])
    proc = subprocess.Popen([cfg["python"], "-I", os.path.join(HERE, "sweserve_boot.py"), run_config_path],
                            cwd=cfg["workdir"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    chunks, size, truncated, timed_out = [], 0, False, False
    deadline, ended = time.monotonic() + timeout, None
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    while True:
        now = time.monotonic()
        left = deadline - now
        if left <= 0:
            timed_out = True
            break
        if ended is None and proc.poll() is not None:
            ended = now
        # the runner ended: all it wrote is in the pipe by now, read for a short grace and no longer. A process it
        # left (a session of its own) that keeps writing held a finished run to the tests' whole time limit, and
        # had it read as timed out (red team 23n, R23n-3)
        if ended is not None and now - ended > DRAIN_S:
            break
        ready, _, _ = select.select([fd], [], [], min(left, 1.0 if ended is None else DRAIN_S))
        if not ready:
            if ended is not None or proc.poll() is not None:
                break  # the runner ended; a child of it holds the pipe open
            continue
        data = os.read(fd, 1 << 16)
        if not data:
            break
        size += len(data)
        if size > OUTPUT_LIMIT:
            truncated = True
            break
        chunks.append(data)
    for pid_group in (proc.pid,):
        try:
            os.killpg(pid_group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    sweserve_drop.kill_all(sweserve_drop.account(cfg["user"])[0])
    try:
        code = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        code = -9
    proc.stdout.close()
    code = 128 - code if code < 0 else code
    return b"".join(chunks).decode("utf-8", "replace"), code, timed_out, truncated


def runner_facts(cfg):
    """The digest of pytest's installed files and the harness, and the image's installed module names, from
    the tests' interpreter before the submission is applied (as the host's first look takes them)."""
    boot = [cfg["python"], "-I", os.path.join(HERE, "sweserve_boot.py")]
    env = test_env()
    facts = []
    for flag in ("--manifest", "--installed", "--plugins"):
        proc = subprocess.run(boot + [flag], cwd="/", env=env, capture_output=True, text=True)
        if proc.returncode != 0 or not proc.stdout.strip():
            raise Verdict("error", "the test runner cannot start in the task image")
        facts.append(proc.stdout.strip().splitlines()[-1])
    return facts[0], json.loads(facts[1]), json.loads(facts[2])


def grade(cfg):
    """The verdict: (status, reason, outcomes of graded tests, details, test output)."""
    tests_patch = os.path.join(HERE, "tests.patch")
    patch = to_base(cfg)
    manifest, installed, image_plugins = runner_facts(cfg)
    # the image's own pytest plugins, loaded by module as `sweserve run` loads them (`verifier._plugins`): with
    # autoload off, a hidden `@pytest.mark.anyio` test could not run here (red team 16a, R16a-1)
    plugins = list(dict.fromkeys([*cfg["plugins"], *(p for p in image_plugins if isinstance(p, str))]))
    changed = submit(cfg, patch)
    resets = reset(cfg, changed, tests_patch, installed)
    git_file()
    os.unlink(tests_patch)  # applied: nothing in the box names the real tests any more (root's alone even so)
    sources = {}
    for f in cfg["test_files"]:
        try:
            with open(os.path.join(WORKDIR, f), encoding="utf-8") as fh:
                sources[f] = fh.read()
        except (OSError, UnicodeDecodeError):
            pass
    planted, check, unmask = grading_plan(cfg, {f: t for f, t in sources.items() if f.endswith(".py") and t.strip()})
    for f, text in planted.items():
        with open(os.path.join(WORKDIR, f), "w", encoding="utf-8") as fh:
            fh.write(text)
    nonce = secrets.token_hex(16)
    nonce_file = os.path.join(HERE, ".nonce")
    run_config = sweserve_protocol.boot_config(
        cfg["runner"], cfg["test_files"], cfg["workdir"], cfg["env"].get("PYTHONPATH", ""), plugins,
        nonce_file, cfg["user"], [WORKDIR] + cfg.get("lock", []), [os.path.dirname(HERE)] + cfg.get("private", []))
    run_config_path = os.path.join(HERE, "run.json")
    for path, text in ((run_config_path, json.dumps(run_config)), (nonce_file, nonce)):
        with open(path, "w") as fh:
            fh.write(text)
    details = {"resets": [r.describe() for r in resets]}
    output, code, timed_out, truncated = run_boot(cfg, run_config_path, cfg["timeout_s"])
    events, malformed, output = sweserve_protocol.read_stream(output, nonce)
    output = unmask(output)  # shown only after the verdict
    # a run cut short is the submission's doing, `failed` as `sweserve run` grades it (trial._graded): never an
    # error, which a reviewer or a harness redoes, a free resample (red team 23e, R23e-2; R14a-1)
    if timed_out:
        return "failed", f"hidden tests timed out after {int(cfg['timeout_s'])}s", {}, details, output
    if truncated:
        return "tampered", "the test output overflowed what the verifier keeps", {}, details, output
    if not any("start" in e for e in events) or not any("end" in e for e in events):
        return "failed", f"test runner exited {code} before reporting all outcomes", {}, details, output
    problems = sweserve_protocol.stream_problems(events, manifest, code, malformed)
    outcomes, _, _ = sweserve_protocol.merge_events(events)
    ends = [e["end"] for e in events if isinstance(e.get("end"), int)]
    outcomes, forged = check(outcomes, ends[-1] if ends else None)
    problems = sorted(set(problems) | set(forged))
    graded = {t: outcomes.get(t, "missing") for t in cfg["FAIL_TO_PASS"] + cfg["PASS_TO_PASS"]}
    details["tampered"] = problems
    if problems:
        return "tampered", "; ".join(problems), graded, details, output
    ok = all(o == "passed" for o in graded.values())
    return ("resolved" if ok else "failed"), None, graded, details, output


def unmarked(text):
    """`text` with no two '>' side by side, so none of the harness's markers (`>>>>> ...`) is in it: a run of any
    length is spaced out (a plain replacement of five left `>>>>>` in a run of nine: red team 23e, R23e-1)."""
    return text.replace(">>", "> >").replace(">>", "> >")


def visible(text):
    """`text` with every control character but tab and newline written as an escape (`\\x1b`): in a terminal a
    reviewer reads the log in, test output moved the cursor up and redrew the verdict's lines (red team 23j,
    R23j-4)."""
    return text.translate(CONTROLS)


CONTROLS = {c: f"\\x{c:02x}" for c in [*range(32), *range(0x7f, 0xa0)] if chr(c) not in "\t\n"}


def one_line(text):
    """`text` as `visible` writes it, and as one line: every character `str.splitlines` breaks a line at (a
    newline; \\u2028, \\u2029 that editors break at too) an escape. The verdict's reason quotes git on the
    submission's own path names (`"b/x\\nsweserve: resolved"`): a second verdict line, without the "| " that
    marks the submission's words (red team 23n, R23n-1)."""
    return visible(text).translate(BREAKS)


BREAKS = {ord("\n"): "\\n", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def shown(output):
    """Test output as the harness may show it: no line it parses as an outcome, none of its markers, nothing
    a terminal acts on."""
    return "\n".join("| " + visible(unmarked(line)) for line in output.splitlines())


def verdict_line(status, reason):
    return f"sweserve: {status}" + (f" ({reason})" if reason else "")


def report_swebench(cfg, status, reason, graded, details, output):
    clean = status in ("resolved", "failed")
    lines = [START]
    for test_id in cfg["FAIL_TO_PASS"] + cfg["PASS_TO_PASS"]:
        outcome = graded.get(test_id, "missing") if clean else "failed"
        lines.append(f"{WORDS.get(outcome, 'FAILED')} {sweserve_protocol.log_name(test_id)}")
    lines += [f"{EXIT_CODE}: {0 if status == 'resolved' else 1}", END,
              # the reason may quote git on the submission's paths, the resets name them: unmarked too (R23e-1)
              one_line(unmarked(verdict_line(status, reason))),
              one_line(unmarked(json.dumps(details))),
              shown(output)]
    sys.stdout.write("\n".join(lines) + "\n")


def report_harbor(cfg, status, reason, graded, details, output):
    out = cfg["verifier_dir"]
    # test-output.txt as the tests printed it, less what a terminal acts on: a reviewer's `cat` of this folder
    # had the output move the cursor and rewrite what is shown (red team 23n, R23n-2; R23j-4)
    record = {"status": status, "reason": reason,
              "fail_to_pass": {t: graded.get(t, "missing") for t in cfg["FAIL_TO_PASS"]},
              "pass_to_pass": {t: graded.get(t, "missing") for t in cfg["PASS_TO_PASS"]}, **details}
    for name, text in (("sweserve.json", json.dumps(record, indent=2)), ("test-output.txt", visible(output)),
                       ("reward.txt", "1\n" if status == "resolved" else "0\n")):
        path = os.path.join(out, name)
        if os.path.lexists(path):
            os.unlink(path)
        with open(path, "w") as fh:
            fh.write(text)
    print(one_line(verdict_line(status, reason)))


def main(argv):
    with open(argv[1]) as fh:
        cfg = json.load(fh)
    report = report_harbor if cfg["format"] == "harbor" else report_swebench
    sweserve_drop.private(os.path.dirname(HERE))  # tests.patch, this config: the test user reads none of them
    for path in cfg.get("private", []):
        if os.path.isdir(path):
            sweserve_drop.private(path)
    for path in cfg.get("private_files", []):  # SWE-bench's /eval.sh holds this harness, the plan and tests.patch
        if os.path.isfile(path) and not os.path.islink(path):
            os.chown(path, 0, 0)
            os.chmod(path, 0o600)
    if cfg["format"] == "harbor":
        os.makedirs(cfg["verifier_dir"], exist_ok=True)
        sweserve_drop.lock([cfg["verifier_dir"]])
        os.chmod(cfg["verifier_dir"], 0o755)
    try:
        status, reason, graded, details, output = grade(cfg)
    except Verdict as v:
        status, reason, graded, details, output = v.status, v.reason, {}, {}, ""
    except Exception as exc:  # noqa: BLE001 - whatever a submission made of it, the record says so: never a bare
        # traceback with no status, reason or resets for the reviewer (red team 16a's advice), and never a pass
        status, reason, graded, details, output = "error", f"the verifier failed: {type(exc).__name__}: {exc}"[
            :500].encode("utf-8", "replace").decode(), {}, {}, ""
    report(cfg, status, reason, graded, details, output)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
