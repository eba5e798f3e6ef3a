"""A fifteenth red team's (15d) attacks on what a candidate's own attempt can steer: the status it ends in (an
`error` that `run --retry-errors` redoes and `assess`'s fit leaves out), what the host reads of what it left,
the endpoint probe, and the exports' in-box verifier. Each test asserts the defended behaviour: it FAILS while the
attack wins. The demo's task 103 in real sandboxes, as tests/test_attacks_redteam14a.py runs it.

- R15d-1 (results file bricked; every reader crashes): a command agent with `trajectory: codex` prints two
  `turn.completed` events with 4,300-digit `input_tokens`; `parse_codex` sums them to 4,301 digits, the result
  line is written, pydantic's reader refuses it and `read_results`' fallback `json.loads` raises a bare ValueError
  (int_max_str_digits): `report`, a resumed `run`, `--retry-errors` all die on the whole file.
- R15d-2 (self-selected retry): `cd / && rm -rf /testbed` (or `mv`): dockerd's archive of /testbed is a 404,
  `InfraError("docker")`: `error`, redone (a human's session the same: left out of the ability fit).
- R15d-3 (export verifier dies, no verdict): a nested repository (`vendor/.git/{HEAD,objects,refs}`) hidden by a
  `.gitignore`: `sweserve_verify.to_base` `os.unlink`s `vendor/` (IsADirectoryError): no SWE-bench markers, no
  Harbor reward.txt.
- R15d-4 (host memory): an agent with `egress:` sends refused requests with 30 KB URLs (11 MB/s of audit log);
  `EgressProxy.audit_log` read the whole log into the host's memory (24 MB in 2 s here; ~10 GB in 900 s).
- R15d-5 (self-selected retry, endpoint-dependent): on an endpoint that serves requests in order and computes
  abandoned ones, a step that jumps the context past the time-out makes `chat`'s own retries queue behind it, and
  the probe (`_endpoint_answers`, retried the same way) times out behind them: `error`, redone.

Tried, not reproduced (no test): a file `git diff --binary` cannot hold in the grade box's memory (300 MB box,
250 MB random file: diffed, `submission too large`, kind `limit`); a command exiting 203 after deleting the
checkout marker (the instruction's `put_file` checks the tree out before the command's exec); a per-minute byte
budget (429) the conversation used up (the small probe fits what is left, and is answered).
"""

from __future__ import annotations

import pytest
from fake_model import Served
from test_attacks_redteam14a import _command_run

from sweserve.agents.command import CommandAgent
from sweserve.agents.config import CommandAgentConfig
from sweserve.demo import files
from sweserve.evaluation.evaluate import pending, run_evaluation
from sweserve.evaluation.results import read_results

DIST = "sweserve-demo__sglang-mini-103"
PATH = "python/sglang/srt/distributed/parallel_state.py"
FIX = f"cat > {PATH} <<'EOF'\n{files.PR_DISTRIBUTED[PATH]}EOF\n"


# --- R15d-1: token counts the host sums past what its own results reader takes back -----------------------------

# two Codex `turn.completed` events, each with an input_tokens of 4,300 nines: json.loads takes each (Python's
# int_max_str_digits is 4,300), `parse_codex` sums them to 4,301 digits, the result line is written with it, and
# pydantic's JSON reader refuses it ("number out of range"): `read_results` raises for the whole results file
NINES = "$(head -c 4300 /dev/zero | tr '\\0' 9)"
HUGE_TOKENS = (f"n={NINES}; for i in 1 2; do "
               "printf '{\"type\": \"turn.completed\", \"usage\": {\"input_tokens\": %s, \"output_tokens\": 1}}\\n' "
               "\"$n\"; done")


@pytest.mark.docker
def test_token_counts_in_the_agents_record_do_not_poison_the_results_file(demo, tmp_path):
    """R15d-1: a command agent with `trajectory: codex` prints two usage events; the trial's result line is
    written, and then no reader of the file (report, resume, --retry-errors) can read any result in it."""
    bundle = demo.bundle(DIST)
    out = tmp_path / "counter.jsonl"
    cfg = CommandAgentConfig(kind="command", name="counter", command=FIX + HUGE_TOKENS, trajectory="codex")
    agent = CommandAgent(cfg.command, cfg=cfg)
    run_evaluation(demo.ctx, [bundle], agent, out)
    (r,) = read_results(out)  # raised SweserveError: "field ... Invalid JSON: number out of range"
    assert r.status == "resolved", (r.status, r.reason)
    assert pending([bundle], agent, 1, out, retry_errors=True) == []


# --- R15d-2: the candidate takes /testbed away: the backend's copy of the tree fails as Docker's error ------------

@pytest.mark.docker
@pytest.mark.parametrize("command", ["cd / && mv /testbed /testbed.gone", "cd / && rm -rf /testbed"],
                         ids=["moved", "removed"])
def test_a_tree_the_candidate_took_away_is_graded_not_a_redone_error(demo, tmp_path, command):
    """R15d-2: `export_tree` asks dockerd for /testbed's archive; with no /testbed dockerd answers 404, which
    `docker_errors` makes `InfraError("docker")`: `error`, kind `docker`, redone by --retry-errors. The sandbox
    is there (the host reached it): an absent tree is the attempt's own doing, an empty submission."""
    r, redo = _command_run(demo, tmp_path, FIX + command)
    assert r.status in ("failed", "patch_failed"), (r.status, r.error_kind, r.reason)
    assert redo == []


# --- R15d-3: the exports' verifier unlinks a nested repository's folder ------------------------------------------

def _git(cwd, *args):
    import subprocess

    return subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=a", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout


def verifier_at_base(tmp_path):
    """The in-box verifier's module, and a work tree of one commit for it: (module, tree, base commit)."""
    from tests.test_attacks_redteam11 import _verify_module

    tree = tmp_path / "testbed"
    tree.mkdir()
    _git(tree, "init", "-q")
    (tree / "mod.py").write_text("x = 1\n")
    _git(tree, "add", "-A")
    _git(tree, "commit", "-qm", "base")
    return _verify_module(), tree, _git(tree, "rev-parse", "HEAD").strip()


def test_a_nested_repository_in_the_tree_does_not_crash_the_export_verifier(tmp_path, monkeypatch):
    """R15d-3: the in-box verifier (`sweserve_verify.to_base`, the Harbor and SWE-bench exports) removes every
    untracked path `git ls-files --others` lists once the tree is back at base, with `os.unlink`. A folder holding
    a `.git` folder (HEAD, objects/, refs/: three text files) is a nested repository, which git lists as one entry,
    `vendor/`, and `git clean -qfd` keeps (it takes -ff); a `.gitignore` naming it keeps `git add -A` from refusing
    it. `os.unlink("/testbed/vendor/")` raises IsADirectoryError, which no handler of `main` catches: the verifier
    dies before it writes anything (no SWE-bench markers: an `error` instance; no Harbor reward.txt: an exception,
    which a job's retry config redoes). In a Harbor task the agent leaves the tree as it likes; in SWE-bench's
    harness `patch --fuzz`'s fallback writes `vendor/.git/...` (R12b-1's route)."""
    verify, tree, base = verifier_at_base(tmp_path)
    # what the candidate leaves: a change, and a nested repository its .gitignore hides from `git add -A`
    (tree / "mod.py").write_text("x = 2\n")
    (tree / ".gitignore").write_text("vendor/\n")
    for path, text in {"vendor/.git/HEAD": "ref: refs/heads/main\n", "vendor/.git/objects/info/x": "x\n",
                       "vendor/.git/refs/heads/x": "x\n", "vendor/lib.py": "y = 1\n"}.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(text)
    monkeypatch.setattr(verify, "WORKDIR", str(tree))
    monkeypatch.setattr(verify, "HERE", str(tmp_path))
    monkeypatch.delenv("GIT_DIR", raising=False)
    try:
        patch = verify.to_base({"base_commit": base, "format": "harbor"})
    except verify.Verdict:
        return  # a verdict is reported (markers, reward.txt): the defended outcome
    except OSError as exc:
        pytest.fail(f"the export's verifier died of {exc.__class__.__name__}: {exc}")
    assert "x = 2" in open(patch).read()


# --- R15d-4: the egress proxy's audit log, read whole into the host's memory -----------------------------------

FLOOD = r'''python3 - <<'PYEOF'
import http.client, os, time
host, port = os.environ["HTTP_PROXY"].rsplit("/", 1)[-1].rsplit(":", 1)
path, sent, t0 = "http://refused.invalid/" + "a" * 30000, 0, time.time()
conn = None
while sent < 800:
    try:
        conn = conn or http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", path)
        conn.getresponse().read()
        sent += 1
    except Exception as exc:
        conn = None
print("FLOOD sent", sent, "in", round(time.time() - t0, 1), "s")
PYEOF
'''


@pytest.mark.docker
def test_the_egress_audit_log_is_read_within_a_bound(demo, tmp_path):
    """R15d-4 (R14a's lead, built): a command agent with `egress:` sends refused requests with 30 KB URLs through
    its proxy; each is one line of the proxy's audit log, which has no cap (the proxy container has no disk
    limit), and `EgressProxy.audit_log` reads it whole into the host's memory (`b"".join(stream)`, then the
    tar's copy, then the decoded text) and writes it to the trial folder. Every other file read out of a sandbox
    is capped (16 MB); this one grows with what the candidate sends, for as long as its time limit lets it:
    past the host's memory, the sweserve process (every trial of the run) is what the OOM killer ends."""
    import time

    cfg = CommandAgentConfig(kind="command", name="flooder", command=FIX + FLOOD,
                             egress=["http://10.255.255.1:9"])
    agent = CommandAgent(cfg.command, cfg=cfg)
    out = tmp_path / "flooder.jsonl"
    t0 = time.monotonic()
    run_evaluation(demo.ctx, [demo.bundle(DIST)], agent, out)
    (r,) = read_results(out)
    log = tmp_path / r.trial_dir / "egress.log"
    size = log.stat().st_size if log.exists() else 0
    print("R15d-4:", r.status, r.reason, "egress.log", size, "bytes;", r.agent_run and r.agent_run.log_tail[-200:],
          round(time.monotonic() - t0, 1), "s")
    assert r.status == "resolved", (r.status, r.error_kind, r.reason)
    assert size <= 16 * 2**20 + 4096, f"the host read and kept an audit log of {size / 2**20:.1f} MB"


# --- R15d-5: the endpoint probe, asked at once, queued behind the conversation's own abandoned requests ----------

class InOrderModel(Served):
    """A scripted chat endpoint that answers one request at a time, in the order they came, and takes longer the
    longer the request (a single-slot server's prefill: 1 s per 1,000 bytes past the first 20,000); a request whose
    client gave up is still computed (no cancel on disconnect), as in a server without one."""

    def __init__(self, script: list):
        import json
        import threading
        import time
        from http.server import BaseHTTPRequestHandler, HTTPServer

        self.sizes: list[int] = []
        model, answered = self, [0]

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                model.sizes.append(len(raw))
                time.sleep(max(0, len(raw) - 20_000) / 1000)
                entry = script[min(answered[0], len(script) - 1)]
                answered[0] += 1
                payload = json.dumps({"id": "r", "object": "chat.completion",
                                      "choices": [{"index": 0, "message": entry, "finish_reason": "stop"}],
                                      "usage": {"prompt_tokens": len(raw) // 4, "completion_tokens": 20}}).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)  # one request at a time
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)


@pytest.mark.slow
@pytest.mark.docker
def test_a_time_out_the_conversation_caused_is_not_a_redone_error_on_an_in_order_endpoint(demo, tmp_path):
    """R15d-5: after the fix the agent asks for four 9,000-character outputs in one step: its next request takes
    longer than the client waits (20 s against 5 s here; 120 s by default, so some 500 KB of context at this
    rate): `chat` retries it twice (each copy queued behind the abandoned one), then `_endpoint_answers` asks the
    run's first request, queued behind all three, and retries it twice: each times out too, and the attempt is
    `error` of kind `agent`, redone. The endpoint was never down: every probe was answered, late. (With one
    9,000-character step the probe's third try was answered: `model_refused`; the agent picks the jump.)"""
    r, redo, sizes = flooded_run(demo, tmp_path, 4, "waiter")
    assert r.status == "resolved", (r.status, r.error_kind, r.reason, sizes)
    assert redo == []


def flooded_run(demo, tmp_path, outputs: int, name: str):
    """The API agent on InOrderModel: it applies the fix, then asks for `outputs` 9,000-character outputs in one
    step (that many bash calls in one message: the next request far past what the endpoint answers in 5 s).
    The result, what `--retry-errors` would redo, and the size of each request the endpoint computed."""
    from fake_model import tool_call

    from sweserve.agents.api import ApiAgent
    from sweserve.agents.config import ApiAgentConfig

    calls = [tool_call("bash", {"command": f"python3 -c \"print('{i}' * 9000)\""}, f"f{i}")["tool_calls"][0]
             for i in range(outputs)]
    flood = {"role": "assistant", "content": None, "tool_calls": calls}
    script = [tool_call("bash", {"command": FIX}, "c1"), flood, flood, tool_call("submit", {}, "c9")]
    agent = ApiAgent(ApiAgentConfig(kind="api", name=name, model="fake-1", base_url="", request_timeout_s=5,
                                    max_observation_chars=10_000), env={})
    bundle = demo.bundle(DIST)
    out = tmp_path / f"{name}.jsonl"
    with InOrderModel(script) as model:
        agent.cfg = agent.cfg.model_copy(update={"base_url": model.base_url})
        run_evaluation(demo.ctx, [bundle], agent, out)
    (r,) = read_results(out)
    return r, pending([bundle], agent, 1, out, retry_errors=True), model.sizes
