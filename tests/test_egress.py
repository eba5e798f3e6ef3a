"""Model-only egress: the config, the proxy addon's policy (on the host), and the proxy for real (Docker)."""

import hashlib
import importlib.util
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from sweserve.agents.command import CommandAgent
from sweserve.agents.config import CommandAgentConfig
from sweserve.errors import SweserveError

ADDON_PATH = Path(__file__).resolve().parent.parent / "images/proxy/egress_addon.py"


def load_addon():
    spec = importlib.util.spec_from_file_location("egress_addon", ADDON_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


addon = load_addon()


def cfg(**kw):
    return CommandAgentConfig(kind="command", name="a", command="true", **kw)


def test_egress_endpoints_become_origins():
    c = cfg(egress=["http://10.0.0.5:30000/v1", "https://api.example.com", "HTTP://Model.Local"])
    assert c.egress == ["http://10.0.0.5:30000", "https://api.example.com:443", "http://model.local:80"]
    agent = CommandAgent(c.command, cfg=c)
    assert agent.egress == c.egress and agent.closed_book is False
    assert agent.config_hash() != CommandAgent(c.command, cfg=cfg()).config_hash()
    # without egress (or trajectory) the hash is what it was before the fields existed: earlier results resume
    before = cfg().model_dump_json(exclude={"name", "egress", "closed_book", "models", "trajectory"})
    assert CommandAgent("true", cfg=cfg()).config_hash() == hashlib.sha256(before.encode()).hexdigest()[:16]


@pytest.mark.parametrize("bad, needle", [
    (dict(egress=["ftp://x:21"]), "http(s)://host:port"),
    (dict(egress=["http://user:pw@x:1"]), "no credentials"),
    (dict(egress=["http://x:99999"]), "out of range"),
    (dict(closed_book=True), "closed_book needs"),
    (dict(egress=["https://api.example.com"], closed_book=True, models=["m"]), "plain http"),
    (dict(egress=["http://10.0.0.5:30000"], closed_book=True), "closed_book needs `models`"),
    (dict(egress=["http://10.0.0.5:30000"], models=["m"]), "only with closed_book"),
])
def test_bad_egress_configs_are_refused(tmp_path, bad, needle):
    from sweserve.agents.config import load_agent_config

    path = tmp_path / "a.yaml"
    path.write_text(json.dumps({"kind": "command", "name": "a", "command": "true", **bad}))
    with pytest.raises(SweserveError, match="a.yaml") as info:
        load_agent_config(path)
    assert needle in str(info.value)


def test_shipped_mini_swe_agent_config_names_its_endpoint():
    from importlib import resources

    from sweserve.agents.config import load_agent_config

    c = load_agent_config(resources.files("sweserve.harness").joinpath("agents", "mini-swe-agent.yaml"))
    assert c.egress and c.closed_book and c.models == ["default"]  # what litellm sends for -m openai/default
    (endpoint,) = c.egress
    assert f"api_base={endpoint}/v1" in c.command and "--exit-immediately" in c.command


def test_closed_book_strips_hosted_tools_and_keeps_the_agents_own():
    body = {"model": "m", "web_search_options": {}, "tool_choice": "auto", "tools": [
        {"type": "function", "function": {"name": "bash"}},
        {"type": "web_search_preview"}, {"type": "code_interpreter", "container": {"type": "auto"}},
        {"type": "web_search_20250305", "name": "web_search"}, {"google_search": {}},
        {"type": "mcp", "server_url": "https://x"}, {"name": "client_tool", "input_schema": {}},
    ]}
    stripped = addon.strip_hosted_tools(body)
    assert stripped == ["web_search_options", "web_search_preview", "code_interpreter", "web_search_20250305",
                        "google_search", "mcp"]
    assert body["tools"] == [{"type": "function", "function": {"name": "bash"}},
                             {"name": "client_tool", "input_schema": {}}] and body["tool_choice"] == "auto"
    only_hosted = {"tools": [{"type": "web_search"}], "tool_choice": "required"}
    assert addon.strip_hosted_tools(only_hosted) == ["web_search"] and only_hosted == {}
    assert addon.strip_hosted_tools(["not", "a", "dict"]) == [] and addon.strip_hosted_tools({"tools": "x"}) == []


class FakeFlow:
    def __init__(self, method, scheme, host, port, body=b"", ctype="application/json"):
        self.request = SimpleNamespace(method=method, scheme=scheme, host=host, port=port, content=body,
                                       headers={"content-type": ctype},
                                       url=f"{scheme}://{host}:{port}/v1/chat/completions")
        self.client_conn = SimpleNamespace(peername=("10.1.1.2", 5555))
        self.response = None


def test_addon_allows_exactly_the_named_origins_and_logs_everything(tmp_path, monkeypatch):
    refused = []
    monkeypatch.setattr(addon.Egress, "refuse", staticmethod(lambda flow, what: refused.append(what)))
    e = addon.Egress(["http://10.0.0.5:30000", "https://api.example.com:443"], True, tmp_path)
    body = json.dumps({"tools": [{"type": "web_search"}, {"type": "function"}]}).encode()
    ok = FakeFlow("POST", "http", "10.0.0.5", 30000, body)
    e.request(ok)
    plain = FakeFlow("POST", "http", "10.0.0.5", 30000, body, ctype="text/plain")  # servers may parse it anyway
    e.request(plain)
    e.request(FakeFlow("POST", "http", "10.0.0.5", 30001))  # same host, other port
    e.request(FakeFlow("GET", "http", "API.example.com", 443))  # https origin asked over plain http
    e.http_connect(FakeFlow("CONNECT", "http", "api.example.com", 443))
    e.http_connect(FakeFlow("CONNECT", "http", "10.0.0.5", 30000))  # a tunnel to a plain-http origin
    assert json.loads(ok.request.content) == json.loads(plain.request.content) == {"tools": [{"type": "function"}]}
    assert refused == ["http://10.0.0.5:30001", "http://API.example.com:443", "CONNECT 10.0.0.5:30000"]
    log = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [(r["method"], r["allowed"]) for r in log] == [("POST", True), ("POST", True), ("POST", False),
                                                           ("GET", False),
                                                           ("CONNECT", True), ("CONNECT", False)]
    assert log[0]["stripped"] == ["web_search"] and log[0]["client"] == "10.1.1.2"


# --- the proxy for real: a scripted model in its own container, reachable only through the proxy -------------

DIST = "sweserve-demo__sglang-mini-103"
FIX_PATH = "python/sglang/srt/distributed/parallel_state.py"


class ModelContainer:
    """tests/fake_model.py serving a script in a container on Docker's default bridge, beside the proxy's
    way out: the sandbox's --internal network has no route to it, so only the proxy can reach it."""

    def __init__(self, client, script, port=8000):
        import io
        import tarfile

        from sweserve.environment.docker_sandbox import labels

        self.port = port
        self.container = client.containers.create(
            "sweserve-base:bookworm", ["python3", "/srv/fake_model.py", str(port), "/srv/script.json"],
            labels=labels("egress-test", "fake-model", "model"), network="bridge")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name, data in (("fake_model.py", (Path(__file__).parent / "fake_model.py").read_bytes()),
                               ("script.json", json.dumps(script).encode())):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        self.container.put_archive("/srv", buf.getvalue())
        self.container.start()
        self.container.reload()
        self.ip = self.container.attrs["NetworkSettings"]["Networks"]["bridge"]["IPAddress"]
        code, _ = self.container.exec_run(["python3", "-c", "import socket, time\nfor _ in range(100):\n try:\n"
                                           f"  socket.create_connection(('127.0.0.1', {port}), 1); break\n"
                                           " except OSError: time.sleep(0.1)"])
        assert code == 0

    @property
    def endpoint(self):
        return f"http://{self.ip}:{self.port}"

    def requests(self):
        lines = self.container.logs(stderr=False).decode().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def remove(self):
        self.container.remove(force=True)


@pytest.fixture
def model_container(docker_client):
    made = []

    def start(script):
        made.append(ModelContainer(docker_client, script))
        return made[-1]
    yield start
    for m in made:
        m.remove()


def probe(url, proxy=True, tools=(), model="m"):
    """A python3 one-liner for the sandbox: POST to url, print what happened (no curl in the task image)."""
    opener = "urllib.request.build_opener()" if proxy else "urllib.request.build_opener(urllib.request.ProxyHandler({}))"
    body = json.dumps({"model": model, "tools": list(tools)})  # JSON without true/false/null is a Python literal
    assert "'" not in body
    return ("python3 -c 'import urllib.request, json\ntry:\n"
            f" r = {opener}.open(urllib.request.Request(\"{url}\", data=json.dumps({body}).encode(), "
            "headers={\"Content-Type\": \"application/json\"}), timeout=5); print(\"PROBE\", r.status)\n"
            "except Exception as e: print(\"PROBE-FAILED\", e)'")


@pytest.mark.docker
def test_the_proxy_image_is_built_when_absent(demo):
    """Built from its recipe under a tag no machine has yet (a base of its own), not found left over from before.

    The build step of `ImageBuilder.proxy` was once lost in a merge and nothing noticed: every machine that ran
    the tests still had the image, so only a fresh one failed.
    """
    client = demo.ctx.host.client
    base = f"sweserve-base:proxy-probe-{os.getpid()}"
    client.images.get("sweserve-base:bookworm").tag(base)
    try:
        tag = demo.ctx.host.builder.proxy(base=base)
        assert tag and client.images.get(tag).labels.get("sweserve") == "1"
    finally:
        for t in (locals().get("tag"), base):
            if t:
                client.images.remove(t, force=True)


@pytest.mark.docker
def test_command_agent_reaches_only_its_endpoint_and_everything_is_audited(demo, tmp_path, model_container):
    from sweserve.evaluation.evaluate import run_evaluation
    from sweserve.evaluation.results import read_results

    model = model_container([{"role": "assistant", "content": "ok"}])
    chat = f"{model.endpoint}/v1/chat/completions"
    command = "; ".join([
        'echo "proxy=$HTTP_PROXY"',
        probe(chat, tools=[{"type": "web_search"}, {"type": "function", "function": {"name": "bash"}}]),
        probe("http://example.com/"),
        probe(f"http://{model.ip}:22/"),
        probe("http://mitm.it/"),  # mitmproxy's own onboarding app must not answer either
        probe(chat, proxy=False),
        probe(f"{model.endpoint}/update_weights_from_disk"),  # the model's origin, a server's admin path
    ])
    c = CommandAgentConfig(kind="command", name="egress-probe", command=command, egress=[model.endpoint],
                           closed_book=True, models=["m"])
    out = tmp_path / "r.jsonl"
    run_evaluation(demo.ctx, [demo.bundle(DIST)], CommandAgent(c.command, cfg=c), out)
    (r,) = read_results(out)
    assert r.agent_run is not None, (r.status, r.reason)
    log = r.agent_run.log_tail
    assert "proxy=http://" in log and log.count("PROBE 200") == 1, log
    assert log.count("PROBE-FAILED HTTP Error 403") == 4, log
    assert "PROBE-FAILED <urlopen error" in log, log  # direct, around the proxy: no route
    (seen,) = model.requests()
    assert seen["tools"] == [{"type": "function", "function": {"name": "bash"}}]  # closed book
    audit = [json.loads(line) for line in (tmp_path / r.trial_dir / "egress.log").read_text().splitlines()]
    assert [(a["url"], a["allowed"]) for a in audit] == [
        (chat, True), ("http://example.com/", False), (f"http://{model.ip}:22/", False), ("http://mitm.it/", False),
        (f"{model.endpoint}/update_weights_from_disk", False)]
    assert audit[0]["stripped"] == ["web_search"]
    # no record of its own: the tokens are the proxy's count of the one answer (the scripted model's 100 and 20)
    assert (r.agent_run.prompt_tokens, r.agent_run.completion_tokens, r.agent_run.usage_from) == (100, 20, "proxy")
    assert r.agent_run.metered.complete and r.agent_run.metered.requests == 1
    left = demo.ctx.host.client.containers.list(all=True, ignore_removed=True, filters={"label": f"sweserve.run={demo.ctx.run_id}"})
    assert [x for x in left if x.labels.get("sweserve.role") == "egress"] == []


@pytest.mark.docker
def test_without_egress_a_command_agent_has_no_network(demo, model_container):
    from sweserve.evaluation.trial import evaluate_task

    model = model_container([{"role": "assistant", "content": "ok"}])
    c = CommandAgentConfig(kind="command", name="offline", command=f'echo "proxy=${{HTTP_PROXY:-none}}"; '
                           f'echo "links=$(ls /sys/class/net | tr "\\n" " ")"; '
                           f'{probe(f"{model.endpoint}/v1/chat/completions", proxy=False)}')
    r = evaluate_task(demo.ctx, demo.bundle(DIST), CommandAgent(c.command, cfg=c))
    assert "proxy=none" in r.agent_run.log_tail and "PROBE-FAILED" in r.agent_run.log_tail
    assert "links=lo \n" in r.agent_run.log_tail, r.agent_run.log_tail  # no network at all: loopback alone
    assert model.requests() == []


@pytest.mark.docker
@pytest.mark.slow
def test_mini_swe_agent_from_pypi_solves_a_task_through_the_proxy(demo, tmp_path, model_container):
    """The shipped mini-swe-agent config, pointed at a scripted model only the proxy can reach."""
    from importlib import resources

    from fake_model import tool_call

    from sweserve.agents.config import load_agent_config
    from sweserve.demo import files
    from sweserve.evaluation.evaluate import run_evaluation
    from sweserve.evaluation.results import read_results

    me = "http://$SELF"  # the model's own address, filled in by the model container
    script = [
        tool_call("bash", {"command": "; ".join([probe("http://example.com/"), probe(f"{me}/v1/x", proxy=False),
                                                 probe(f"{me}/v1/chat/completions", tools=[{"type": "code_interpreter"}],
                                                       model="default"),
                                                 # a model that searches by its name: not the one the config pins
                                                 probe(f"{me}/v1/chat/completions", model="gpt-4o-search-preview")])},
                  "c1"),
        {"role": "assistant", "content": "answer to the probe"},
        tool_call("bash", {"command": f"cat > {FIX_PATH} <<'EOF'\n{files.PR_DISTRIBUTED[FIX_PATH]}EOF"}, "c2"),
        tool_call("bash", {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}, "c3"),
    ]
    model = model_container(script)
    shipped = resources.files("sweserve.harness").joinpath("agents", "mini-swe-agent.yaml").read_text()
    path = tmp_path / "mini.yaml"
    path.write_text(shipped.replace("http://172.17.0.1:30000", model.endpoint))
    cfg = load_agent_config(path)
    out = tmp_path / "mini.jsonl"
    run_evaluation(demo.ctx, [demo.bundle(DIST)], CommandAgent(cfg.command, cfg=cfg, env={}), out)
    (r,) = read_results(out)
    assert r.agent_run is not None, (r.status, r.reason)
    seen = model.requests()
    assert r.status == "resolved", (r.reason, r.agent_run.log_tail[-2000:], len(seen))
    assert r.agent_run.exit_code == 0 and FIX_PATH in r.model_patch
    assert len(seen) == 4 and seen[0]["tools"][0]["function"]["name"] == "bash"
    assert seen[1] == {"model": "default"}  # closed book: the probe's only tool (code_interpreter) was stripped
    observation = json.loads(seen[2]["messages"][-1]["content"])["output"]  # mini's observation of step 1
    assert observation.count("PROBE-FAILED HTTP Error 403") == 2 and "PROBE 200" in observation
    assert "PROBE-FAILED <urlopen error" in observation  # straight to the model, around the proxy: no route
    audit = [json.loads(line) for line in (tmp_path / r.trial_dir / "egress.log").read_text().splitlines()]
    allowed = [a["url"] for a in audit if a["allowed"]]
    assert len(allowed) == 4 and all(u.startswith(model.endpoint) for u in allowed), audit
    refused = [a for a in audit if not a["allowed"]]
    assert [a["url"] for a in refused] == ["http://example.com/", f"{model.endpoint}/v1/chat/completions"], audit
    assert "'gpt-4o-search-preview' is not one the agent's config names" in refused[1]["note"], audit
    # its own trajectory, copied out of the sandbox, records 3 model calls at the scripted model's usage of 100
    # prompt and 20 completion tokens each; the proxy metered 4 answers (the 4th request was the probe's, sent
    # by a command the agent ran): the proxy's count stands, and the difference is flagged
    run = r.agent_run
    assert (run.steps, run.prompt_tokens, run.completion_tokens, run.usage_from) == (3, 400, 80, "proxy"), run
    assert run.metered.complete and (run.metered.requests, run.metered.metered) == (4, 4), run.metered
    assert any(f.startswith("usage_disagrees: the agent's record says 300 prompt") for f in run.flags), run.flags
    trajectory = json.loads((tmp_path / r.trial_dir / "trajectory.json").read_text())
    assert trajectory["trajectory_format"] == "mini-swe-agent-1.1" and trajectory["info"]["exit_status"] == "Submitted"
    steps = json.loads((tmp_path / r.trial_dir / "steps.json").read_text())
    assert [s["command"].split(" ", 1)[0] for s in steps] == ["python3", "cat", "echo"], steps


@pytest.mark.docker
def test_a_tunnel_naming_another_tls_server_is_refused_by_the_real_proxy(docker_client):
    """mitmproxy 11 in the proxy image, a TLS server on an allowed https origin beside it, and openssl's client
    through the proxy: the ClientHello that names the origin gets the server's certificate; one naming another
    site (domain fronting: a CDN routes by SNI) fails its handshake, and the audit log says why."""
    from sweserve.environment.images import ImageBuilder, read_ca_bundle

    image = ImageBuilder(docker_client, read_ca_bundle(None)).proxy()
    script = "\n".join([
        "set -u; cd /tmp",
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout k.pem -out c.pem -subj /CN=localhost -days 1 2>/dev/null",
        "openssl s_server -accept 8443 -cert c.pem -key k.pem -www -quiet >/dev/null 2>&1 &",
        "SWESERVE_EGRESS_ALLOW='[\"https://localhost:8443\"]' SWESERVE_EGRESS_DIR=/tmp/eg /opt/mitmproxy/bin/mitmdump "
        "-q --listen-host 127.0.0.1 --listen-port 3128 --set confdir=/tmp/mitmproxy --set onboarding=false "
        "-s /opt/sweserve/egress_addon.py >/tmp/mitm.log 2>&1 &",
        "for i in $(seq 300); do test -f /tmp/eg/ready && break; sleep 0.1; done",
        "for name in localhost evil.example; do",
        "  out=$(echo | timeout 20 openssl s_client -proxy 127.0.0.1:3128 -connect localhost:8443 -servername $name "
        "2>&1)",
        "  if echo \"$out\" | grep -q 'BEGIN CERTIFICATE'; then echo \"TLS-$name ok\"; else echo \"TLS-$name refused\"; fi",
        "done",
        "cat /tmp/eg/audit.jsonl",
    ])
    out = docker_client.containers.run(image, ["-c", script], entrypoint="bash", remove=True, network_mode="none",
                                       stdout=True, stderr=True).decode()
    assert "TLS-localhost ok" in out and "TLS-evil.example refused" in out, out
    audit = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [(a["method"], a["allowed"]) for a in audit] == [("CONNECT", True), ("CONNECT", True), ("TLS", False)], out
    assert "evil.example" in audit[-1]["url"] and "not the host the CONNECT named" in audit[-1]["note"]
