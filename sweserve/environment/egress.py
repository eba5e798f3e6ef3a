"""Model-only egress for a candidate sandbox: a mitmproxy sidecar that lets through exactly the named endpoints.

The sandbox sits on an --internal network with no way out. When its agent's config names model endpoints
(`egress:`), a proxy container (image from `images/proxy/`, built locally) joins the sandbox's network
and a normal bridge; the agent's commands get HTTP(S)_PROXY pointing at it. The proxy's addon answers 403
to every other origin, writes every request, allowed or refused, to an audit log, meters the model's answers
(`metered`), and with `closed_book` keeps only the tools the client runs and the models the config names in
model requests. When the candidate phase ends the audit log is copied next to the trial and the proxy is
removed; it is labelled like every sweserve container, so `gc` reaps it if the harness dies first.
"""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import docker
import docker.errors

from sweserve.environment.docker_sandbox import LABEL, docker_errors, labels
from sweserve.environment.sandbox import WORKDIR, ExecResult, Sandbox
from sweserve.errors import InfraError
from sweserve.models import Metered

PORT = 3128
OUTSIDE = "bridge"  # the proxy's way out: Docker's default bridge (the host is its gateway, e.g. 172.17.0.1)
STATE_DIR = "/tmp/sweserve-egress"
METER_MAX_BYTES = 4096  # metered.json: a few counts
AUDIT_MAX_BYTES = 16 * 2**20  # of the audit log read into the trial folder, as every file read out of a sandbox
TAR_HEADERS_BYTES = 64 * 2**10  # what an archive of one file holds before the file's data, at most
READY_TIMEOUT_S = 60


def proxy_env(url: str) -> dict[str, str]:
    """The variables HTTP clients (curl, requests, httpx, litellm, pip) read their proxy from."""
    return {name: url for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")} | {
        "NO_PROXY": "", "no_proxy": ""}


class EgressProxy:
    """A running proxy container serving one sandbox network."""

    def __init__(self, container, url: str):
        self.container = container
        self.url = url

    @classmethod
    def start(cls, client: docker.DockerClient, image: str, network: str, allow: list[str], closed_book: bool,
              *, run_id: str, task_id: str, models: Sequence[str] = ()) -> "EgressProxy":
        with docker_errors("creating the egress proxy"):
            container = client.containers.create(
                image, labels=labels(run_id, task_id, "egress"), network=OUTSIDE,
                environment={"SWESERVE_EGRESS_ALLOW": json.dumps(allow),
                             "SWESERVE_EGRESS_CLOSED_BOOK": "1" if closed_book else "0",
                             "SWESERVE_EGRESS_MODELS": json.dumps(list(models)),
                             "SWESERVE_EGRESS_DIR": STATE_DIR},
                mem_limit="512m", pids_limit=256, security_opt=["no-new-privileges"], cap_drop=["ALL"],
                # it joins the sandbox's network and the bridge: it relays requests, and must never route packets
                # between them (a root agent can send raw frames to it; red team 15a's lead)
                sysctls={"net.ipv4.ip_forward": "0", "net.ipv6.conf.all.forwarding": "0"},
            )
        try:
            with docker_errors("starting the egress proxy"):
                client.networks.get(network).connect(container)
                container.start()
                ready = container.exec_run(["bash", "-c", f"for i in $(seq {READY_TIMEOUT_S * 10}); do "
                                            f"test -f {STATE_DIR}/ready && exit 0; sleep 0.1; done; exit 1"])
                container.reload()
            if ready.exit_code != 0:
                logs = container.logs(tail=5).decode("utf-8", "replace").strip().replace("\n", " | ")
                raise InfraError("network", f"the egress proxy did not start within {READY_TIMEOUT_S}s: {logs[-300:]}")
            address = container.attrs["NetworkSettings"]["Networks"][network]["IPAddress"]
        except BaseException:
            container.remove(force=True)
            raise
        return cls(container, f"http://{address}:{PORT}")

    def audit_log(self, max_bytes: int = AUDIT_MAX_BYTES) -> str:
        """The audit log, one JSON line per request ("" if the proxy saw none), its first `max_bytes` at most
        (then marked cut): the candidate writes it, a line per request it sends, as fast as it likes (some
        11 MB a second of refused 30 KB URLs); read whole it filled the host's memory (red team 15d, R15d-4)."""
        data, size = self._head("audit.jsonl", max_bytes, "reading the egress audit log")
        text = data.decode("utf-8", "replace")
        if size > max_bytes:
            text += f"\n[sweserve: the audit log was cut at {max_bytes} of its {size} bytes]\n"
        return text

    def metered(self) -> Metered:
        """What the proxy counted of the model's answers so far (`Metered`); a meter it cannot read is one of
        nothing, `unreadable` (incomplete): None was taken for an agent with no proxy, its record unchecked and
        unmarked (red team 18b, R18b-5)."""
        data, size = self._head("metered.json", METER_MAX_BYTES, "reading the egress meter")
        try:
            if data and size <= METER_MAX_BYTES:
                return Metered.model_validate_json(data)
        except ValueError:
            pass
        return Metered(unreadable=True)

    def _head(self, name: str, max_bytes: int, doing: str) -> tuple[bytes, int]:
        """The first `max_bytes` of a file in the proxy's state folder, and its size; (b"", 0) if there is none."""
        try:
            with docker_errors(doing):
                stream, stat = self.container.client.api.get_archive(self.container.id, f"{STATE_DIR}/{name}",
                                                                     chunk_size=1 << 16)
                size, head = int(stat.get("size", 0)), bytearray()
                try:  # the archive's head only: its headers and the log's first max_bytes
                    for chunk in stream:
                        head += chunk
                        if len(head) > max_bytes + TAR_HEADERS_BYTES:
                            break
                finally:
                    close = getattr(stream, "close", None)
                    if close:
                        close()
            with tarfile.open(fileobj=io.BytesIO(bytes(head)), mode="r|") as tar:
                member = tar.next()
                fh = tar.extractfile(member) if member is not None and member.isreg() else None
                return (fh.read(max_bytes), size) if fh is not None else (b"", 0)
        except (InfraError, tarfile.TarError):
            return b"", 0

    def remove(self) -> None:
        try:
            self.container.remove(force=True)
        except docker.errors.NotFound:
            pass


class ProxiedSandbox:
    """A sandbox whose commands all run with the proxy's variables (everything else is the sandbox's own), and
    whose model usage the proxy meters (`metered`)."""

    def __init__(self, box: Sandbox, env: dict[str, str], proxy: EgressProxy | None = None):
        self._box, self._env, self._proxy = box, env, proxy

    def metered(self) -> Metered | None:
        """The model usage the proxy counted from the model server's answers (None without a proxy)."""
        return self._proxy.metered() if self._proxy is not None else None

    def __getattr__(self, name):
        return getattr(self._box, name)

    def exec(self, command: str, timeout: float, workdir: str = WORKDIR, env: dict[str, str] | None = None,
             user: str | None = None) -> ExecResult:
        return self._box.exec(command, timeout, workdir=workdir, env={**self._env, **(env or {})}, user=user)

    def exec_stream(self, command: str, timeout: float, on_output: Callable[[bytes], None], workdir: str = WORKDIR,
                    env: dict[str, str] | None = None, user: str | None = None) -> ExecResult:
        return self._box.exec_stream(command, timeout, on_output, workdir=workdir, env={**self._env, **(env or {})},
                                     user=user)


def sandbox_networks(box) -> list[str]:
    """The sweserve networks a sandbox container is on (one per run today, one per sandbox later)."""
    with docker_errors("reading the sandbox's networks"):
        box.container.reload()
    names = list(box.container.attrs["NetworkSettings"]["Networks"])
    return [name for name in names if name.startswith(f"{LABEL}-")] or names


@contextmanager
def egress_for(host, box, allow: list[str], closed_book: bool, audit_path: Path | None, *,
               models: Sequence[str] = ()) -> Iterator[Sandbox]:
    """`box` (a DockerSandbox that `host`, a DockerHost, started) as the agent works in it: itself when nothing
    is allowed, else behind a proxy letting exactly `allow` through (`DockerSandbox.attach_egress`).

    The audit log is written to audit_path when the phase ends, whatever happened in it.
    """
    if not allow:
        yield box
        return
    image = host.builder.proxy()
    (network, *_) = sandbox_networks(box)
    proxy = EgressProxy.start(host.client, image, network, list(allow), closed_book, models=models,
                              run_id=host.run_id, task_id=box.container.labels.get(f"{LABEL}.task", ""))
    try:
        yield ProxiedSandbox(box, proxy_env(proxy.url), proxy)
    finally:
        try:
            if audit_path is not None:
                audit_path.parent.mkdir(parents=True, exist_ok=True)
                audit_path.write_text(proxy.audit_log(), encoding="utf-8")
        finally:
            proxy.remove()
