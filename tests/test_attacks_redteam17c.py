"""Red team 17c: grading integrity (the grade sandbox's diff of the candidate's tree, the hidden tests' run, the
exports' verifier).

Each test is written to fail while the attack works and to pass once it is defended; controls keep honest
behaviour working. Docker, the demo's tasks.

- R17c-1 (host disk, every run): a sandbox's writable layer is capped (`disk_gb`: the watchdog's `SizeRw`, and
  `RLIMIT_FSIZE`), but not what its PID 1 writes to its stdout: Docker's logging driver (json-file by default,
  no size cap) keeps that on the host, under /var/lib/docker, outside the layer. The candidate is root in its
  sandbox and `/proc/1/fd/1` is the init's stdout: `yes > /proc/1/fd/1` grows a host file at hundreds of MB a
  second for as long as the candidate's time limit lasts, while the watchdog sees nothing. The host's disk
  fills: every other trial on it (another candidate's honest solution) ends in an error, sweserve's own state
  and results with them. Defence: sandboxes are created with no logging driver (`log_config` type "none";
  sweserve never reads a sandbox's logs): what a sandbox's init writes is not kept anywhere.

Tried and held: a 600 MB random file (over git's bigFileThreshold) in a task with 0.75 GB of memory, to have
`git diff --binary` OOM-killed in the grade sandbox (NO_DIFF, an `InfraError` redone by --retry-errors): git
was not killed, the 773 MB patch is `error` of kind `limit`, never redone. Read, not run, held: resets of
paths with invalid UTF-8 (decoded with U+FFFD, so `rm -f` misses them) only reach names that are not protected
ones (every protected name is exact ASCII; only folders above it could hold such bytes, and no such folder is on
sys.path or a conftest's way); the export verifier's `kill_all` under a fork bomb (a fork that fails is an
`error` verdict, reward 0, never a pass).

Leads, not built: the egress proxy's container (egress.py) is created with the daemon's logging driver too and
its logs are read; a command agent with `egress:` whose refused requests the proxy logs grows a host file the
same way (needs the proxy image). The exports' `sweserve_drop.drop` ignores prctl's return value: where
`PR_SET_NO_NEW_PRIVS` fails, a set-uid binary in the image gives the tests root (the SWE-bench harness and
Harbor start containers without Docker's no-new-privileges).
"""

from __future__ import annotations

import pytest
from docker.errors import APIError

from sweserve.agents.command import CommandAgent
from sweserve.agents.config import CommandAgentConfig
from sweserve.demo import files
from sweserve.environment.docker_sandbox import labels, run_kwargs
from sweserve.evaluation.evaluate import pending, run_evaluation
from sweserve.evaluation.results import read_results
from sweserve.models import Resources

pytestmark = pytest.mark.docker
DIST = "sweserve-demo__sglang-mini-103"
PATH = "python/sglang/srt/distributed/parallel_state.py"
FIX = f"cat > {PATH} <<'EOF'\n{files.PR_DISTRIBUTED[PATH]}EOF\n"


def _command_run(demo, tmp_path, command, name="doubter", memory_gb=None):
    cfg = CommandAgentConfig(kind="command", name=name, command=command)
    agent = CommandAgent(cfg.command, cfg=cfg)
    bundle = demo.bundle(DIST)
    if memory_gb is not None:
        bundle.task.resources.memory_gb = memory_gb
    out = tmp_path / f"{name}.jsonl"
    run_evaluation(demo.ctx, [bundle], agent, out)
    (r,) = read_results(out)
    return r, pending([bundle], agent, 1, out, retry_errors=True)


# --- R17c-1: the sandbox's init's stdout, kept by Docker on the host outside every disk limit ------------------------


def _kept_log_bytes(container) -> int:
    """What Docker keeps of a container's stdout/stderr (0 when its logging driver keeps nothing)."""
    try:
        return sum(len(chunk) for chunk in container.logs(stream=True, follow=False))
    except APIError:  # "configured logging driver does not support reading": nothing is kept
        return 0


@pytest.fixture
def bare_sandbox(docker_client):
    """A container with the options every sandbox is created with (`docker_sandbox.run_kwargs`: what
    `DockerSandbox.start` passes), from the base image, no network."""
    made = []

    def start(**resources):
        container = docker_client.containers.run(
            "sweserve-base:bookworm", ["sleep", "infinity"], detach=True, network_mode="none",
            labels=labels("r17c", "log-flood", "candidate"), **run_kwargs(Resources(**resources), [], 2))
        made.append(container)
        return container
    yield start
    for container in made:
        container.remove(force=True)


@pytest.mark.parametrize("where", ["/proc/1/fd/1", "/proc/1/fd/2", "/proc/$(pgrep -x sleep | head -1)/fd/1"],
                         ids=["init-stdout", "init-stderr", "sleep-stdout"])
def test_r17c_1_what_a_sandbox_writes_to_its_inits_stdout_is_not_kept_on_the_host(bare_sandbox, where):
    """32 MB written to the init's stdout by root in the candidate sandbox (`disk_gb` 0.01, far below it). Before:
    Docker kept all 32 MB in the container's json log on the host (the watchdog measures the writable layer only),
    and a longer `yes` fills the host's disk. After: nothing of it is kept."""
    box = bare_sandbox(disk_gb=0.01)
    code, out = box.exec_run(["sh", "-c", f"head -c 32M /dev/zero > {where}; echo done"])
    assert b"done" in out, out[-300:]
    kept = _kept_log_bytes(box)
    assert kept < 2**20, f"Docker kept {kept} bytes of the sandbox's stdout on the host, outside its disk limit"


def test_r17c_1_control_commands_output_still_reaches_the_host(bare_sandbox):
    box = bare_sandbox()
    code, out = box.exec_run(["sh", "-c", "echo hello; echo oops >&2; exit 3"])
    assert b"hello" in out and b"oops" in out and code == 3
