"""Attacks on the clock and on the verdict's channel (issue #15, point 2).

- Stopping the clock: a SIGSTOP from inside the container to every process, the `timeout` that keeps the
  limit included, in the candidate phase (a command agent, the API agent's tool server, a human session) and
  at grading (code the hidden tests import). The host's deadline (`environment/watchdog.py`) must end each in
  bounded time with a `failed`/timed-out result. Each trial runs in a thread joined with a bound, so a
  regression fails the test instead of hanging it.
- A malformed outcome stream: events of any shape behind the run's nonce must give `tampered` (or a fail-closed
  `TestRunError`), never an internal error. Fuzzed with a seeded generator of random and adversarial events.
"""

from __future__ import annotations

import io
import json
import random
import sys
import tarfile
import threading
import time

import pytest

from sweserve.environment.sandbox import ExecResult
from sweserve.environment.watchdog import Deadline
from sweserve.evaluation.grading import TestRunError, read_stream, run_tests
from sweserve.models import Task, TestSpec

F2P = "test/srt/test_parallel_state.py::test_uneven_split_covers_everything"
P2P = "test/srt/test_parallel_state.py::test_even_split"
DIST = "sweserve-demo__sglang-mini-103"
SRC = "python/sglang/srt/distributed/parallel_state.py"  # imported by DIST's hidden tests


# --- the host's deadline itself ------------------------------------------------------------------------------

def test_a_deadline_kills_once_past_its_limit_and_closes_the_wait_later():
    calls = []
    with Deadline(0.2, lambda: calls.append(("kill", time.monotonic())),
                  lambda: calls.append(("close", time.monotonic())), grace=0.1, close_after=0.2) as clock:
        time.sleep(0.8)
    assert clock.fired and [c for c, _ in calls] == ["kill", "close"]
    assert calls[1][1] - calls[0][1] >= 0.19


def test_a_block_that_ends_in_time_is_never_killed():
    calls = []
    with Deadline(0.3, lambda: calls.append("kill"), grace=0.1) as clock:
        time.sleep(0.05)
    time.sleep(0.6)
    assert not clock.fired and calls == []


def test_a_kill_that_fails_still_closes_the_wait():
    closed = threading.Event()

    def kill():
        raise RuntimeError("engine down")

    with Deadline(0.05, kill, closed.set, grace=0, close_after=0.05):
        assert closed.wait(2)


# --- the outcome stream: strict schema, fuzzed ---------------------------------------------------------------

class _Container:
    def __init__(self, box):
        self.box = box

    def put_archive(self, path, data):
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for m in tar.getmembers():
                if m.name.endswith(".nonce"):
                    self.box.nonce = tar.extractfile(m).read().decode()

    def exec_run(self, *args, **kwargs):
        return 0, b""


class _Box:
    """A grade sandbox whose test run prints the given events behind the run's nonce (raw lines as given)."""
    test_user = "nobody"

    def __init__(self, lines, exit_code=1):
        self.lines, self.exit_code, self.nonce = lines, exit_code, None
        self.container = _Container(self)

    def put_file(self, path, data, mode=0o644):
        pass

    def exec(self, command, timeout, workdir=None, env=None, user=None):
        text = "".join(f"\n@@sweserve:{self.nonce}:{line}\n" for line in self.lines)
        return ExecResult(self.exit_code, "collected 2 items" + text, output_bytes=len(text))


TASK = Task(task_id="o__r-1", repo="o/r", profile="p", pr_number=1, title="t", base_commit="a" * 40,
            merge_commit="b" * 40, family="decoding", created_at="2026-01-01T00:00:00Z",
            test=TestSpec(runner="pytest", files=["test/srt/test_parallel_state.py"]),
            FAIL_TO_PASS=[F2P], PASS_TO_PASS=[P2P])
START, END = {"start": "d"}, {"end": 1}
HONEST = [{"id": F2P, "outcome": "failed", "message": "assert 1 == 2"}, {"id": P2P, "outcome": "passed"}]
KEYS = ["id", "outcome", "message", "skip", "start", "end", "nonce", "", "ID", "outcome "]


def conforms(event) -> bool:
    """The runner's schema, written independently of the code under test: exact types (a bool is no int)."""
    if type(event) is not dict:
        return False
    if "start" in event:
        return set(event) == {"start"} and type(event["start"]) is str
    if "end" in event:
        return set(event) == {"end"} and type(event["end"]) is int
    return (set(event) <= {"id", "outcome", "message", "skip"} and type(event.get("id")) is str
            and event.get("outcome") in ("passed", "failed", "error", "skipped")
            and all(type(event[k]) is str or event[k] is None for k in ("message", "skip") if k in event))


def random_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(11 if depth < 3 else 7)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, 1, -1, 2**63, -(2**70), rng.randrange(-1000, 1000)])
    if kind == 3:
        return rng.choice([0.0, 1.5, float("inf"), float("-inf"), float("nan"), 1e308])
    if kind in (4, 5):
        return rng.choice(["", "passed", "failed", "skipped", "error", "missing", F2P, P2P, "d", "\x00",
                           "\ud800", "é" * 3, "@@sweserve:", "x" * rng.randrange(1, 5000)])
    if kind == 6:
        return rng.choice([[], {}, [F2P], {"id": F2P}])
    if kind in (7, 8):
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(KEYS): random_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def mutate(rng: random.Random, event: dict):
    """An honest event bent one way: a value of another type, a key added or dropped, or something else."""
    e = dict(event)
    how = rng.randrange(5)
    if how == 0:
        e[rng.choice(list(e))] = random_value(rng)
    elif how == 1:
        e[rng.choice(KEYS)] = random_value(rng)
    elif how == 2 and len(e) > 1:
        del e[rng.choice(list(e))]
    elif how == 3:
        return random_value(rng)
    else:
        e["outcome"] = rng.choice([["passed"], {"passed": 1}, ("passed",), 1, True, None, "PASSED"])
    return e


def raw_line(rng: random.Random) -> tuple[str, bool]:
    """A line after the marker, and whether it conforms."""
    if rng.random() < 0.15:
        return rng.choice(['{"id": "x", "outcome": "passed"', "not json", "", "[" * 5000 + "]" * 5000,
                           '{"id": "x", "outcome": "passed"} trailing', "nul\x00l", '{"end": 1}{"end": 1}',
                           '{"end": ' + "9" * 5000 + "}", '{"id": "x", "outcome": "passed", "id": ["x"]}']), False
    roll = rng.random()
    if roll < 0.1:  # a well-formed event of the schema: no sign of forging by itself
        event = {"id": rng.choice([F2P, P2P, "test/t.py::test_new"]), "outcome": rng.choice(["failed", "error"]),
                 "message": rng.choice(["", "E   assert 0", "é\x00" * 3])}
    else:
        event = mutate(rng, rng.choice(HONEST)) if roll < 0.6 else random_value(rng)
    return json.dumps(event), conforms(event) and "start" not in event and "end" not in event


@pytest.fixture
def fake_put_tree(monkeypatch):
    monkeypatch.setattr(_Box, "copy_tree_in", lambda self, path, data: self.container.put_archive(path, data),
                        raising=False)  # Sandbox.copy_tree_in


def test_the_crash_of_the_red_team_is_tampering(fake_put_tree):
    """A list where a string was expected crashed the harness (`unhashable type: 'list'`)."""
    for bad in ({"id": F2P, "outcome": ["passed"]}, {"id": [F2P], "outcome": "passed"}, {"end": True},
                {"start": ["d"]}, {"id": F2P, "outcome": "passed", "message": {"a": 1}}):
        lines = [json.dumps(e) for e in (START, *HONEST, bad, END)]
        run = run_tests(_Box(lines), TASK, 60, "d")
        assert run.tampered, bad


def test_a_fuzzed_stream_is_tampered_or_fails_closed_never_an_internal_error(fake_put_tree):
    rng = random.Random(15)
    seen = {"tampered": 0, "clean": 0, "failed": 0}
    for case in range(600):
        injected = [raw_line(rng) for _ in range(rng.randrange(1, 4))]
        lines = [json.dumps(START)] + [json.dumps(e) for e in HONEST]
        for line, _ in injected:
            lines.insert(rng.randrange(1, len(lines) + 1), line)
        lines.append(json.dumps(END))
        try:
            run = run_tests(_Box(lines), TASK, 60, "d")
        except TestRunError:
            seen["failed"] += 1
            continue
        except Exception as exc:  # the point of the test: nothing else may escape
            raise AssertionError(f"case {case}: {exc.__class__.__name__}: {exc}\n{lines}") from exc
        if all(ok for _, ok in injected):
            assert run.tampered == [], (case, lines, run.tampered)
            seen["clean"] += 1
        else:
            assert run.tampered, (case, lines)
            seen["tampered"] += 1
        assert run.outcomes[F2P] != "passed", (case, lines)  # the worst report of an id wins
    assert seen["tampered"] > 300 and seen["clean"] > 10, seen


def test_random_bytes_in_the_output_never_break_the_parser():
    rng = random.Random(7)
    nonce = "n" * 32
    for _ in range(300):
        parts = []
        for _ in range(rng.randrange(1, 20)):
            chunk = bytes(rng.randrange(256) for _ in range(rng.randrange(60))).decode("utf-8", "replace")
            parts.append(rng.choice([chunk, f"@@sweserve:{nonce}:" + chunk, f"@@sweserve:{nonce[:-1]}:{chunk}",
                                     chunk + f"@@sweserve:{nonce}:" + json.dumps(random_value(rng))]))
        stream = read_stream("\n".join(parts), nonce)
        assert all(isinstance(e, dict) for e in stream.events)
        assert stream.malformed + len(stream.events) == sum(p.count(f"@@sweserve:{nonce}:") for p in parts)


# --- stopping the clock: Docker ------------------------------------------------------------------------------

BOUND_S = 30  # beyond the limit: the host's grace, docker kill, and this machine's slowness


def _in_thread(fn, limit_s: float):
    """fn() in a thread joined for at most limit_s: a hang fails the test instead of blocking it."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            box["error"] = exc

    t0 = time.monotonic()
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(limit_s)
    assert not thread.is_alive(), f"still running after {limit_s:.0f}s: the clock was stopped"
    if "error" in box:
        raise box["error"]
    return box["value"], time.monotonic() - t0


def _trial(demo, agent, bundle):
    from sweserve.evaluation.trial import evaluate_task

    return evaluate_task(demo.ctx, bundle, agent)


def _write_cmd(path: str, text: str) -> str:
    return f"mkdir -p $(dirname {path}) && cat > {path} <<'SWEOF'\n{text}\nSWEOF\n"


@pytest.mark.docker
@pytest.mark.parametrize("attack", [
    "kill -STOP -1; kill -STOP $$",                     # everything, the timeout included, then itself
    "kill -STOP $PPID; exec sleep 100000",              # only the process keeping the limit, then hang
])
def test_sigstop_in_the_candidate_phase_ends_at_the_limit(demo, attack):
    from sweserve.agents.command import CommandAgent

    bundle = demo.bundle(DIST).model_copy(deep=True)
    bundle.task.resources.timeout_s = 8
    r, _ = _in_thread(lambda: _trial(demo, CommandAgent(attack, name="stop-clock"), bundle), 300)
    assert r.agent_run is not None and r.agent_run.exit_reason == "timed_out", r
    assert r.agent_run.wall_s < 8 + BOUND_S, r.agent_run.wall_s
    assert r.status == "failed", (r.status, r.reason)  # graded on what the tree held: nothing was fixed


@pytest.mark.slow
@pytest.mark.docker
def test_sigstop_of_the_api_agents_tool_server_ends_at_the_limit(demo):
    """The API agent's loop is on the host, but a step waits on the swe-rex server in the sandbox: stopped from
    inside, it held the step for aiohttp's 5 minutes. The host's clock ends it at the limit."""
    from fake_model import FakeModel, tool_call

    from sweserve.agents.api import ApiAgent
    from sweserve.agents.config import ApiAgentConfig

    bundle = demo.bundle(DIST).model_copy(deep=True)
    bundle.task.resources.timeout_s = 40  # swe-rex's start on a busy machine must not be what the limit ends
    with FakeModel([tool_call("bash", {"command": "kill -STOP -1; kill -STOP $$"})]) as fake:
        cfg = ApiAgentConfig(kind="api", name="stop-tools", model="fake-1", base_url=fake.base_url,
                             request_timeout_s=5, request_retries=0, command_timeout_s=60)
        r, _ = _in_thread(lambda: _trial(demo, ApiAgent(cfg, env={}), bundle), 300)
    assert r.agent_run.steps == 1, r.agent_run  # the stop was sent, then the step waited on the stopped server
    assert r.agent_run.exit_reason == "time_limit" and r.agent_run.error is None, r.agent_run
    assert r.agent_run.wall_s < 40 + BOUND_S, r.agent_run.wall_s
    assert r.status == "failed", (r.status, r.reason)


STOP_ALL = """
import os, signal
try:
    os.kill(-1, signal.SIGSTOP)  # every process of the container but this one: the timeout's too
except OSError:
    pass
os.kill(os.getpid(), signal.SIGSTOP)
"""
STOP_CLOCK_AND_SPIN = """
import os, signal
try:
    os.kill(os.getppid(), signal.SIGSTOP)  # the `timeout` that runs the tests (root's: the test user may not)
except OSError:
    pass
while True:
    pass
"""


@pytest.mark.docker
@pytest.mark.parametrize("evil", [STOP_ALL, STOP_CLOCK_AND_SPIN], ids=["stop-all", "stop-clock-and-spin"])
def test_sigstop_at_grading_ends_at_the_test_limit(demo, evil):
    """Code the hidden tests import stops every process in the grade container: the host's deadline kills it."""
    from sweserve.agents.command import CommandAgent
    from sweserve.demo import files

    bundle = demo.bundle(DIST).model_copy(deep=True)
    bundle.task.resources.test_timeout_s = 10
    agent = CommandAgent(_write_cmd(SRC, files.PR_DISTRIBUTED[SRC] + "\n" + evil), name="stop-grading")
    r, _ = _in_thread(lambda: _trial(demo, agent, bundle), 300)
    assert r.status == "failed" and "timed out" in (r.reason or ""), (r.status, r.reason)
    assert any(SRC in flag for flag in r.flags), r.flags  # the scan's flags outlive the killed runner


@pytest.mark.slow
@pytest.mark.docker
def test_sigstop_in_a_human_session_ends_at_the_limit(demo, tmp_path):
    pexpect = pytest.importorskip("pexpect")
    from sweserve.evaluation.results import read_results

    limit = 20
    args = ["-m", "sweserve.cli", "session", DIST, "--candidate", "mallory", "--tasks", str(demo.tasks),
            "--state-dir", str(demo.root / "state"), "--repo-path", str(demo.repo),
            "--output", str(tmp_path / "human.jsonl"), "--time-limit", str(limit)]
    child = pexpect.spawn(sys.executable, args, cwd=str(tmp_path), encoding="utf-8", timeout=120,
                          dimensions=(50, 200))
    try:
        child.expect(r"s left\] /testbed# ")
        t0 = time.monotonic()
        child.sendline("kill -STOP -1; kill -STOP $$")
        child.expect("grading", timeout=limit + BOUND_S)
        assert time.monotonic() - t0 < limit + BOUND_S
        child.expect(pexpect.EOF, timeout=240)
    finally:
        child.close(force=True)  # a hung session must not outlive the test (gc reaps its container)
    (r,) = read_results(tmp_path / "human.jsonl")
    assert r.agent_run.exit_reason == "time_limit", r.agent_run
    assert r.status == "failed", (r.status, r.reason)
