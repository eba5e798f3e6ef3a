"""Mining speed, before and after batching git: commits scanned per second, measured in one run.

"before" is sweserve/dataset/mining.py as it was at BEFORE_REV (GitPython walking commits and two to four
`git` processes per PR), loaded from this repository's history; "after" is the current mine(). Both mine
the same history into throw-away folders, best of --repeat runs each, on:

* a generated fixture (fast-import; --commits commits, two in three a PR changing code and tests);
* the sgl-project/sglang-jax mirror cloned to /tmp, its history rewritten without the blobs the snapshot
  lacks (both versions must be able to read every PR).

    python benchmarks/mining_speed.py [--commits 600] [--repeat 3] [--skip-real]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sweserve.dataset.gitio import Git  # noqa: E402
from sweserve.dataset.mining import mine, open_repo  # noqa: E402
from sweserve.dataset.profiles import load_profile  # noqa: E402
from sweserve.dataset.requirements import dependency_set  # noqa: E402

BEFORE_REV = "3f09972"  # the last commit with the per-commit GitPython miner
MIRROR = Path("/work/.mirror/sgl-project+sglang-jax/repo")
REAL_CLONE = Path("/tmp/sweserve-bench-sglang-jax")


def legacy_module() -> types.ModuleType:
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{BEFORE_REV}:sweserve/dataset/mining.py"],
                            capture_output=True, text=True, check=True).stdout
    module = types.ModuleType("legacy_mining")
    sys.modules[module.__name__] = module
    exec(compile(source, f"{BEFORE_REV}:sweserve/dataset/mining.py", "exec"), module.__dict__)
    # it handed its GitPython Repo to dependency_set, which now reads through sweserve's own Git only
    module.dependency_set = lambda repo, *args: dependency_set(Git(Path(repo.working_dir)), *args)
    return module


def fixture(path: Path, commits: int) -> Path:
    """A history of `commits` commits via git fast-import: PRs touching code + tests, and plain pushes."""
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    out = []
    mark = 0
    pyproject = '[project]\nname = "sgl-jax"\ndependencies = ["numpy>=1.26", "jax[cpu]==0.6.2"]\n'
    for n in range(commits):
        mark += 1
        ts = 1_700_000_000 + n * 3600
        area = ["mem_cache", "managers", "layers", "speculative", "models"][n % 5]
        files = {f"python/sgl_jax/srt/{area}/mod_{n % 37}.py": f"VALUE = {n}\n" + "x = 1\n" * (n % 50),
                 "python/pyproject.toml": pyproject if n % 100 else pyproject.replace("1.26", f"1.{26 + n // 100}")}
        if n % 3 != 2:
            files[f"test/srt/{area}/test_mod_{n % 37}.py"] = f"def test_v():\n    assert {n}\n"
            msg = f"[{area}] change {n} (#{1000 + n})\n\nBody of change {n}.\n"
        else:
            msg = f"direct push {n}\n"
        out.append(f"commit refs/heads/main\nmark :{mark}\ncommitter T <t@t.invalid> {ts} +0000\n"
                   f"data {len(msg.encode())}\n{msg}")
        if n:
            out.append(f"from :{mark - 1}\n")
        for p, text in files.items():
            out.append(f"M 100644 inline {p}\ndata {len(text.encode())}\n{text}\n")
    subprocess.run(["git", "-C", str(path), "fast-import", "--quiet"], input="".join(out).encode(), check=True)
    subprocess.run(["git", "-C", str(path), "reset", "-q", "--hard", "main"], check=True)
    return path


def real_history() -> tuple[Path, int] | None:
    """The sglang-jax clone (`real_clone`) and its number of first-parent commits, or None (with a line printed)
    when there is no mirror to clone."""
    repo = real_clone()
    if repo is None:
        print("no sglang-jax mirror: fetch sgl-project/sglang-jax first")
        return None
    commits = int(subprocess.run(["git", "-C", str(repo), "rev-list", "--first-parent", "--count", "HEAD"],
                                 capture_output=True, text=True, check=True).stdout)
    return repo, commits


def real_clone() -> Path | None:
    """The sglang-jax mirror cloned to /tmp, history rewritten without the blobs the snapshot lacks."""
    if (REAL_CLONE / ".git").exists():
        return REAL_CLONE
    if not MIRROR.exists():
        return None
    bare = REAL_CLONE.with_suffix(".git")
    shutil.rmtree(bare, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(MIRROR), str(bare)], check=True)
    git = ["git", "-C", str(bare)]
    missing = {ln[1:] for ln in subprocess.run([*git, "rev-list", "--objects", "HEAD", "--missing=print"],
                                               capture_output=True, text=True).stdout.split() if ln.startswith("?")}
    paths = set()
    if missing:
        for commit in subprocess.run([*git, "rev-list", "HEAD"], capture_output=True, text=True).stdout.split():
            for line in subprocess.run([*git, "ls-tree", "-r", commit], capture_output=True, text=True).stdout.splitlines():
                meta, p = line.split("\t", 1)
                if meta.split()[2] in missing:
                    paths.add(p)
    if paths:
        quoted = " ".join(f"'{p}'" for p in sorted(paths))
        subprocess.run([*git, "filter-branch", "-f", "--index-filter",
                        f"git rm -q --cached --ignore-unmatch {quoted}", "HEAD"],
                       check=True, capture_output=True, env={**os.environ, "FILTER_BRANCH_SQUELCH_WARNING": "1"})
    subprocess.run(["git", "clone", "-q", str(bare), str(REAL_CLONE)], check=True)
    shutil.rmtree(bare, ignore_errors=True)
    return REAL_CLONE


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def measure(fn) -> tuple[float, float, object]:
    """Wall seconds, CPU seconds (this process and its git children) and the result of one call."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    result = fn()
    return time.perf_counter() - wall, cpu_seconds() - cpu, result


def compare(name: str, repo: Path, profile_name: str, repeat: int, legacy) -> None:
    """Before and after, alternated so both see the same load on a shared machine; best of repeat each."""
    profile = load_profile(profile_name)
    commits = int(subprocess.run(["git", "-C", str(repo), "rev-list", "--first-parent", "--count", "HEAD"],
                                 capture_output=True, text=True, check=True).stdout)

    def run(impl, opener):
        def go():
            with tempfile.TemporaryDirectory() as tmp:
                report = impl(opener(repo), profile, Path(tmp) / "tasks")
                return len(report.written)
        return go

    best = {"before": (float("inf"), float("inf"), 0), "after": (float("inf"), float("inf"), 0)}
    for _ in range(repeat):
        # each version opens the clone its own way (the legacy one as a GitPython Repo)
        for label, impl, opener in (("before", legacy.mine, legacy.open_repo), ("after", mine, open_repo)):
            wall, cpu, n = measure(run(impl, opener))
            b = best[label]
            best[label] = (min(b[0], wall), min(b[1], cpu), n)
    (wb, cb, nb), (wa, ca, na) = best["before"], best["after"]
    print(f"{name}: {commits} first-parent commits, tasks before/after {nb}/{na}")
    print(f"  before  wall {wb:6.2f} s = {commits / wb:6.1f} commits/s   cpu {cb:6.2f} s = {commits / cb:6.1f} commits/cpu-s")
    print(f"  after   wall {wa:6.2f} s = {commits / wa:6.1f} commits/s   cpu {ca:6.2f} s = {commits / ca:6.1f} commits/cpu-s")
    print(f"  ratio   wall x{wb / wa:.2f}   cpu x{cb / ca:.2f}   (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=600)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-real", action="store_true")
    args = ap.parse_args()
    legacy = legacy_module()
    with tempfile.TemporaryDirectory() as tmp:
        repo = fixture(Path(tmp) / "fixture", args.commits)
        compare("generated fixture", repo, "sglang-jax", args.repeat, legacy)
    if not args.skip_real:
        clone = real_clone()
        if clone is None:
            print(f"sglang-jax: no mirror at {MIRROR}; skipped")
        else:
            compare("sgl-project/sglang-jax", clone, "sglang-jax", args.repeat, legacy)
    return 0


if __name__ == "__main__":
    sys.exit(main())
