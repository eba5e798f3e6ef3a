"""Readiness end to end, with Docker: demo-like tasks of each defect kind are dropped with their reason while
the demo's good tasks stay ready; a file the clone cannot read is left out when no test needs it; a failing
repository export is reported in seconds, before any image is built."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweserve.dataset.taskstore import load_task, save_task
from sweserve.demo.fixture import PROFILE, REPO, build_demo_repo

pytestmark = pytest.mark.docker

OWNER, NAME = REPO.split("/")
PREFIX = f"{OWNER}__{NAME}"

SETUP = {  # a direct push (no PR) before the defect PRs
    "python/sglang/srt/models/wan2_1/__init__.py": "from sglang.srt.models.wan2_1.model import WanModel\n",
    "python/sglang/srt/models/wan2_1/model.py": "class WanModel:\n    def frames(self, n):\n        return n\n",
    "python/sglang/srt/layers/attention/__init__.py": "",
    "python/sglang/srt/layers/attention/rotary.py": "def rope_scale():\n    return 3.5\n",
    "test/srt/test_rotary.py": "from sglang.srt.layers.attention.rotary import rope_scale\n\n\n"
                               "def test_scale():\n    assert abs(rope_scale() - 3.14159) < 0.05\n",
    "python/sglang/srt/mem_cache/pool.py": "def make_pool(size):\n    return [None] * size\n",
    "python/sglang/srt/layers/quantization/fp8.py": "def fp8_max():\n    return 448\n",
    "assets/weights.bin": b"\0\1\2" * 1000,  # its object is removed from the clone: no test needs it
}

BODY = ("This change is described at length so that the statement is long enough for lint: it says what "
        "goes wrong today, what users see, and what must hold once it is fixed, without giving away the code.")

DEFECTS = [
    # structure only: the tests import the new package name and module, nothing checks the new behaviour
    (201, "[Model] Rename wan2_1 to wan and add its vae module", "structure_only", {
        "python/sglang/srt/models/wan2_1/__init__.py": None, "python/sglang/srt/models/wan2_1/model.py": None,
        "python/sglang/srt/models/wan/__init__.py": "from sglang.srt.models.wan.model import WanModel\n",
        "python/sglang/srt/models/wan/model.py":
            "class WanModel:\n    def frames(self, n):\n        return 4 * n + 1\n",
        "python/sglang/srt/models/wan/vae.py":
            "import math\n\n\ndef decode(z):\n    return [math.tanh(v) for v in z]\n",
        "test/srt/test_wan.py": "def test_wan_model_importable():\n    from sglang.srt.models.wan import WanModel\n"
                                "    assert WanModel\n\n\ndef test_vae_module():\n"
                                "    import sglang.srt.models.wan.vae  # noqa: F401\n",
    }),
    # relax only: the oracle moves the value, the test's bound is only widened to let it pass
    (202, "[Kernel] Rope scale closer to the reference", "relax_only_tests", {
        "python/sglang/srt/layers/attention/rotary.py": "def rope_scale():\n    return 3.2\n",
        "test/srt/test_rotary.py": "from sglang.srt.layers.attention.rotary import rope_scale\n\n\n"
                                   "def test_scale():\n    assert abs(rope_scale() - 3.14159) < 0.2\n",
    }),
    # cosmetic: the oracle only adds logging and a docstring
    (203, "[Cache] Say how big a new pool is", "cosmetic_oracle", {
        "python/sglang/srt/mem_cache/pool.py": "import logging\n\nlogger = logging.getLogger(__name__)\n\n\n"
                                               "def make_pool(size):\n    \"\"\"A pool of size empty slots.\"\"\"\n"
                                               "    logger.warning(\"allocating %d slots\", size)\n"
                                               "    return [None] * size\n",
        "test/srt/test_pool.py": "import logging\n\nfrom sglang.srt.mem_cache.pool import make_pool\n\n\n"
                                 "def test_pool_logs_its_size(caplog):\n    with caplog.at_level(logging.WARNING):\n"
                                 "        assert make_pool(3) == [None] * 3\n    assert '3 slots' in caplog.text\n",
    }),
    # accelerator only: the tests skip without a GPU (today's handling: rejected needs_accelerator)
    (204, "[Quant] fp8 e5m2 range", "needs_accelerator", {
        "python/sglang/srt/layers/quantization/fp8.py": "def fp8_max(e5m2=False):\n    return 57344 if e5m2 else 448\n",
        "test/srt/test_fp8.py": "import os\n\nimport pytest\n\n"
                                "from sglang.srt.layers.quantization.fp8 import fp8_max\n\n\n"
                                "@pytest.mark.skipif(not os.path.exists('/dev/nvidia0'), reason='needs a CUDA GPU')\n"
                                "def test_fp8_on_gpu():\n    assert fp8_max(e5m2=True) == 57344\n",
    }),
]


def git(repo: Path, *args: str, step: int) -> str:
    date = f"{1_767_225_600 + 100_000 + step * 3600} +0000"
    env = {**os.environ, "GIT_AUTHOR_NAME": "Demo Dev", "GIT_AUTHOR_EMAIL": "dev@sglang-mini.invalid",
           "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_NAME": "Demo Dev", "GIT_COMMITTER_EMAIL": "dev@sglang-mini.invalid",
           "GIT_COMMITTER_DATE": date, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True).stdout.strip()


def commit(repo: Path, message: str, files: dict, step: int) -> None:
    for rel, text in files.items():
        path = repo / rel
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    git(repo, "add", "-A", step=step)
    git(repo, "commit", "-q", "-m", message, step=step)


def drop_object(repo: Path, rev: str, path: str) -> None:
    blob = git(repo, "rev-parse", f"{rev}:{path}", step=0)
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()


def cli(*args, cwd: Path, timeout: float = 900):
    return subprocess.run([sys.executable, "-m", "sweserve.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow
def test_each_defect_is_dropped_with_its_reason_and_good_tasks_stay_ready(docker_client, tmp_path):
    repo = build_demo_repo(tmp_path / "repo")
    commit(repo, "vendor wan2_1, rotary, pool and fp8 helpers", SETUP, step=1)
    for i, (number, title, _, files) in enumerate(DEFECTS, 2):
        commit(repo, f"{title} (#{number})\n\n{BODY}", files, step=i)
    common = ["--tasks", str(tmp_path / "tasks"), "--state-dir", str(tmp_path / "state")]
    proc = cli("mine", "--repo", str(repo), "--profile", PROFILE, *common, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    drop_object(repo, "HEAD", "assets/weights.bin")  # the clone can no longer read it
    proc = cli("validate", "--runs", "1", "--repo-path", str(repo), *common, cwd=tmp_path)
    out = proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    tasks = {d.name: load_task(d) for d in (tmp_path / "tasks").iterdir() if (d / "task.json").exists()}
    good = [t for t in tasks.values() if t.pr_number < 200]
    assert len(good) == 6 and all(t.ready for t in good), {t.task_id: t.readiness for t in good if not t.ready}
    # every valid task records its forge odds, read in the clone, and the demo profile's bound (1: the demo's toy
    # tests compare few literals, so most keep no strong twin; a real profile's default is 0.25)
    odds = {t.pr_number: t.validation.forge_odds for t in good}
    assert all(t.validation.max_forge_odds == 1.0 for t in good) and all(o is not None for o in odds.values()), odds
    for number, _, reason, _ in DEFECTS:
        t = tasks[f"{PREFIX}-{number}"]
        assert not t.ready, (number, t.readiness)
        keys = [r.key for r in t.readiness.reasons]
        if reason == "needs_accelerator":
            assert keys == ["rejected:needs_accelerator"] and t.resources.needs_accelerator == "gpu"
        else:
            assert t.validated and keys == [f"signal:{reason}"], (number, keys, t.validation.reason)
    # the file git cannot read was left out of the tasks whose base holds it, with a note; they still validated
    assert tasks[f"{PREFIX}-202"].unreadable == ["assets/weights.bin"]
    # the funnel, at the end of validate and on its own, counts each drop by its reason
    assert "signal:structure_only 1" in out and "rejected:needs_accelerator 1" in out
    funnel = json.loads(cli("tasks", "funnel", "--json", *common, cwd=tmp_path).stdout)
    stages = {s["stage"]: s for s in funnel["stages"]}
    assert stages["tasks"]["count"] == 10 and stages["valid"]["count"] == 9 and stages["ready"]["count"] == 6
    assert stages["ready"]["dropped"] == {"signal:cosmetic_oracle": 1, "signal:relax_only_tests": 1,
                                          "signal:structure_only": 1}
    # every run's test output is kept and `tasks show` points to it
    structure = tasks[f"{PREFIX}-201"]
    logs = Path(structure.validation.logs)
    assert {"null-1.log", "oracle-1.log", "structure-1.log", "structure.patch"} <= {p.name for p in logs.iterdir()}
    assert "test_wan.py" in (logs / "structure-1.log").read_text()
    assert "rename to python/sglang/srt/models/wan/model.py" in (logs / "structure.patch").read_text()
    show = cli("tasks", "show", f"{PREFIX}-201", *common, cwd=tmp_path).stdout
    assert f"validation logs: {logs}" in show and "signal structure_only: FIRED" in show, show[-3000:]
    # run takes the ready tasks only, and says what it left out; results say which kind each task was
    proc = cli("run", "--agent", "null", f"{PREFIX}-202", f"{PREFIX}-101", "--output", str(tmp_path / "r.jsonl"),
               "--repo-path", str(repo), *common, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "left out 1 tasks not ready" in proc.stdout
    lines = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert [(r["task_id"], r["task_ready"]) for r in lines] == [(f"{PREFIX}-101", True)]


def test_a_rejected_task_keeps_the_logs_of_why_its_tests_failed(docker_client, tmp_path):
    repo = build_demo_repo(tmp_path / "repo")
    common = ["--tasks", str(tmp_path / "tasks"), "--state-dir", str(tmp_path / "state")]
    assert cli("mine", "--repo", str(repo), "--profile", PROFILE, *common, cwd=tmp_path).returncode == 0
    task_dir = tmp_path / "tasks" / f"{PREFIX}-102"
    # an oracle that breaks the tested function: no test passes after it, so no FAIL_TO_PASS
    oracle = (task_dir / "oracle.patch").read_text()
    broken = oracle.replace("+        kept.append(i)", "+        raise RuntimeError('broken oracle')", 1)
    (task_dir / "oracle.patch").write_text(broken)
    proc = cli("validate", "--runs", "1", "--repo-path", str(repo), f"{PREFIX}-102", *common, cwd=tmp_path)
    assert proc.returncode == 1
    task = load_task(task_dir)
    assert task.validation.reason.startswith("no FAIL_TO_PASS") and task.validation.logs
    after = (Path(task.validation.logs) / "oracle-1.log").read_text()
    assert "broken oracle" in after


def test_a_failing_repository_export_is_reported_in_seconds_before_any_image(docker_client, tmp_path):
    repo = build_demo_repo(tmp_path / "repo")
    common = ["--tasks", str(tmp_path / "tasks"), "--state-dir", str(tmp_path / "state")]
    assert cli("mine", "--repo", str(repo), "--profile", PROFILE, *common, cwd=tmp_path).returncode == 0
    task_id = f"{PREFIX}-106"
    task = load_task(tmp_path / "tasks" / task_id)
    task.dependencies = ["sweserve-never-built==0.0.1"]  # its env image cannot exist yet: nothing to reuse
    save_task(tmp_path / "tasks" / task_id, task)
    drop_object(repo, task.base_commit, "test/srt/test_radix_cache.py")  # a test file: the tests need it
    started = time.monotonic()
    proc = cli("validate", "--runs", "1", "--repo-path", str(repo), task_id, "--json", str(tmp_path / "v.json"),
               *common, cwd=tmp_path, timeout=60)
    took = time.monotonic() - started
    assert proc.returncode == 1 and took < 10, (took, proc.stdout, proc.stderr)
    (outcome,) = json.loads((tmp_path / "v.json").read_text())
    assert outcome["status"] == "error" and outcome["error_kind"] == "git"
    text = outcome["reason"]
    assert "test/srt/test_radix_cache.py" in text and '"exclude_paths": ["test/srt/test_radix_cache.py"]' in text
    from tag_helpers import env_tag as env_tag_of

    from sweserve.dataset.profiles import load_profile
    from sweserve.environment.images import read_ca_bundle

    env_tag = env_tag_of(load_profile(PROFILE), read_ca_bundle(None), task.dependencies)
    assert docker_client.images.list(name=env_tag) == []  # no env image was built for it
    assert load_task(tmp_path / "tasks" / task_id).validation is None  # an error of the clone: nothing recorded
    # with the exclude_paths line the profile asks for, the export check passes (the file is left out)
    profiles = tmp_path / "state" / "profiles"
    profiles.mkdir(parents=True, exist_ok=True)
    data = json.loads((Path(__file__).resolve().parent.parent / "sweserve/dataset/builtin_profiles/sglang-demo.json")
                      .read_text())
    data["exclude_paths"] = ["test/srt/test_radix_cache.py"]
    (profiles / "sglang-demo.json").write_text(json.dumps(data))
    from sweserve.config_search import ConfigSearch
    from sweserve.dataset.taskstore import load_bundle
    from sweserve.evaluation.context import Context
    from sweserve.evaluation.prerequisites import check_export

    ctx = Context.create(tmp_path / "state", repo_path=repo, search=ConfigSearch.for_project(tmp_path / "state"))
    try:
        bundle = load_bundle(tmp_path / "tasks" / task_id)
        check_export(ctx, bundle)
        assert bundle.task.unreadable == ["test/srt/test_radix_cache.py"]
    finally:
        ctx.close()
