"""The Docker implementation of `Sandbox`: labelled containers with limits, exec with a hard timeout, files in
and out, networks, and reaping what dead harness processes left.

Isolation and limits (what a candidate cannot do from inside a sandbox):
- a sandbox is on no network (`none`: the grade sandbox, a candidate without egress), or on one of its own
  (`sandbox_network`, for a candidate behind an egress proxy): internal (no egress) and with no gateway
  address on the host (`inhibit_ipv4`), so it reaches neither the host's services nor another sandbox;
  the harness reaches a service in it through `forward` (a `docker exec` relay), never over IP;
- exec output is streamed and only a bounded tail is kept; files are read out with a size cap;
- disk: no file may grow past `resources.disk_gb` (RLIMIT_FSIZE), and a watchdog stops the sandbox when
  its writable layer does (`DiskLimitExceeded`);
- time: every exec has a host-side deadline (`watchdog.Deadline`) that `docker kill`s the container a few
  seconds after the command's own timeout, so a stopped or hung process inside cannot stop the clock.

Every Docker failure leaves this module as `InfraError("docker", …)`; a limit as `LimitExceeded`.
"""

from __future__ import annotations

import io
import os
import random
import socket
import tarfile
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import IO, Any

import docker
import docker.errors
import docker.types
from docker.utils.socket import frames_iter

from sweserve.environment.gpus import device_requests
from sweserve.environment.sandbox import WORKDIR, ExecResult, streamed
from sweserve.environment.watchdog import Deadline
from sweserve.errors import InfraError, LimitExceeded
from sweserve.models import Resources

LABEL = "sweserve"
OUTPUT_TAIL_BYTES = 8 * 2**20  # what exec keeps of a command's output (its end)
READ_FILE_MAX_BYTES = 16 * 2**20  # default cap on a file read out of a sandbox
DISK_POLL_S = 0.5  # how often the disk watchdog measures a sandbox's writable layer
TREE_LABEL, TREE_AT_START = "sweserve.tree", "checkout-at-start"  # set by images/task/Dockerfile
TREE_RESTORE = "/usr/local/bin/sweserve-tree restore"
TREE_FAILED = 203  # a first command's exit status when the checkout before it failed (or its own 203)
TREE_DONE = "/run/sweserve-tree.done"  # what `sweserve-tree restore` leaves once the tree is checked out
TREE_POLL_S = 0.5  # how long a checkout at start is waited for through dockerd before an exec waits for it
TREE_TIMEOUT_S = 600  # checking out a large repository's tree (sglang's takes about a second)
# A sandbox network gets a small subnet of its own in this range (with no gateway address on the host it is
# routed nowhere; Docker's default pools would run out after ~30 networks).
SUBNET_POOL = (10 << 24 | 192 << 16, 18)  # 10.192.0.0/10 as (base, bits of /28 blocks)


def owner_label() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def labels(run_id: str, task_id: str, role: str) -> dict[str, str]:
    return {
        LABEL: "1",
        f"{LABEL}.run": run_id,
        f"{LABEL}.task": task_id,
        f"{LABEL}.role": role,
        f"{LABEL}.owner": owner_label(),
    }


def disk_bytes(resources: Resources) -> int:
    return int(resources.disk_gb * 2**30)


def run_kwargs(resources: Resources, gpu_ids: list[str], host_cpus: int) -> dict:
    """The docker run options a task's resources ask for (CPUs capped at what the host has)."""
    cpus = min(resources.cpus, float(host_cpus))
    fsize = disk_bytes(resources)
    return {
        "ulimits": [docker.types.Ulimit(name="fsize", soft=fsize, hard=fsize)],
        "mem_limit": f"{int(resources.memory_gb * 1024)}m",
        "nano_cpus": int(cpus * 1e9),
        "pids_limit": 4096,
        "device_requests": device_requests(gpu_ids) if gpu_ids else [],  # a CPU-only sandbox asks for no device
        "security_opt": ["no-new-privileges"],
        "init": True,
        "environment": {"PYTHONDONTWRITEBYTECODE": "1"},
        # no logging driver: what the sandbox's init writes to its stdout (root there writes /proc/1/fd/1) would be
        # kept by dockerd on the host (json-file: no size cap), outside the disk limit, which measures the writable
        # layer alone; sweserve reads a sandbox's commands through their exec streams, never its logs (red team 17c,
        # R17c-1)
        "log_config": docker.types.LogConfig(type="none"),
    }


def sandbox_network(client: docker.DockerClient, run_id: str, task_id: str, role: str) -> str:
    """A network for one sandbox alone: internal (no egress) and with no address on the host.

    `inhibit_ipv4` leaves the host's side of the bridge without an IP, so the sandbox has no route to any
    host address (a plain --internal network still reaches every host service bound to 0.0.0.0), and no
    other sandbox is on it. Another container (e.g. an allow-listed egress proxy) can be attached to it.
    """
    base, bits = SUBNET_POOL
    last: Exception = RuntimeError("no free subnet")
    for _ in range(8):  # a random /28: a clash with another network is retried with another one
        block = base + (random.randrange(2**bits) << 4)
        subnet = f"{socket.inet_ntoa(block.to_bytes(4, 'big'))}/28"
        name = f"sweserve-{run_id}-{role}-{os.urandom(4).hex()}"
        ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=subnet)])
        try:
            client.networks.create(
                name, driver="bridge", internal=True, ipam=ipam, check_duplicate=True,
                options={"com.docker.network.bridge.inhibit_ipv4": "true"},
                labels=labels(run_id, task_id, role),
            )
            return name
        except docker.errors.APIError as exc:
            last = exc
            if "overlap" not in str(exc).lower():
                raise
    raise last


@contextmanager
def docker_errors(what: str):
    """Turn the Docker SDK's exceptions into InfraError("docker") naming what was being done; an archive the daemon
    broke off (a file changed under it) is one too, never an internal error."""
    try:
        yield
    except docker.errors.DockerException as exc:
        explanation = getattr(exc, "explanation", None) or str(exc)
        raise InfraError("docker", f"{what}: {str(explanation).strip()[:300]}") from None
    except tarfile.TarError as exc:
        raise InfraError("docker", f"{what}: the archive broke off ({exc})") from None


# the keys that make `docker exec -t`'s client detach (end the relay, and so a human's task): docker cannot turn
# them off, and its default, ^P ^Q, is readline's previous-line key then XON (red team 22c, R22c-3). These four keys
# in a row are none an honest terminal sends, and the browser relay never delivers their last (`recorder`)
DETACH_KEYS = "ctrl-],ctrl-^,ctrl-_,ctrl-@"


class OutputTail:
    """The last `limit` bytes of a stream, and how many bytes went by: output floods cost no memory."""

    def __init__(self, limit: int):
        self.limit = limit
        self.buf = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.buf += chunk
        if len(self.buf) > 2 * self.limit:
            del self.buf[:-self.limit]

    def bytes(self) -> bytes:
        return bytes(self.buf[-self.limit:])

    @property
    def truncated(self) -> bool:
        """Whether `bytes()` lost any of the stream's head (the buffer may hold up to twice the limit)."""
        return self.total > self.limit


class DiskLimitExceeded(LimitExceeded):
    def __init__(self, limit_gb: float):
        super().__init__(f"disk limit: the sandbox wrote more than {limit_gb:g} GB and was stopped")


class DiskWatchdog:
    """Polls a container's writable-layer size once armed (`arm`: when something may run in it that is not the
    harness's own); past the limit it kills the container and remembers why."""

    def __init__(self, client: docker.DockerClient, container, limit_gb: float):
        self.client, self.container, self.limit_gb = client, container, limit_gb
        self.limit = int(limit_gb * 2**30)
        self.tripped = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"disk-{container.name}", daemon=True)
        self._armed = threading.Lock()

    def arm(self) -> None:
        """Start polling (once): a sandbox nothing runs in yet (a grade sandbox while its candidate works, a
        candidate's before its agent's first command) has nothing to watch, and dockerd's size walks cost."""
        if self._armed.acquire(blocking=False):
            self._thread.start()

    def used(self) -> int | None:
        try:
            rows = self.client.api.containers(all=True, size=True, filters={"id": self.container.id})
        except docker.errors.DockerException:
            return None
        if not rows:  # the container is gone: nothing left to watch
            self._stop.set()
            return None
        return rows[0].get("SizeRw")

    def check(self, measure: bool = True) -> None:
        """Measure now (unless `measure` is False: what the last measure found); raise DiskLimitExceeded if the
        sandbox is (or was) over its limit."""
        if measure and not self.tripped:
            used = self.used()
            if used is not None and used > self.limit:
                self.tripped = True
                try:
                    self.container.kill()
                except docker.errors.DockerException:
                    pass
        if self.tripped:
            raise DiskLimitExceeded(self.limit_gb)

    def _run(self) -> None:
        while not self._stop.wait(DISK_POLL_S):
            try:
                self.check()
            except DiskLimitExceeded:
                return

    def stop(self) -> None:
        self._stop.set()


RELAY = """
import os, socket, sys, threading
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
def up():
    while True:
        d = os.read(0, 65536)
        if not d:
            break
        s.sendall(d)
    s.shutdown(socket.SHUT_WR)
threading.Thread(target=up, daemon=True).start()
while True:
    d = s.recv(65536)
    if not d:
        break
    os.write(1, d)
"""


class PortForward:
    """127.0.0.1:<port> on the host, relayed into the sandbox's own 127.0.0.1:<target> over `docker exec`.

    Sandboxes have no IP route to or from the host, so a service in one (swe-rex) is reached this way: each
    connection is one exec of a small Python relay, its stdin and stdout spliced to the connection.
    """

    def __init__(self, container, target: int):
        self.container, self.target = container, target
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn: socket.socket) -> None:
        py = 'p=/opt/swerex/bin/python3; [ -x "$p" ] || p=python3; exec "$p" -c "$0" "$1"'
        api = self.container.client.api
        try:
            exec_id = api.exec_create(self.container.id, ["sh", "-c", py, RELAY, str(self.target)],
                                      stdin=True, stdout=True, stderr=False)["Id"]
            hijacked = api.exec_start(exec_id, socket=True)
        except docker.errors.DockerException:
            conn.close()
            return
        raw = getattr(hijacked, "_sock", hijacked)

        def up():
            try:
                while chunk := conn.recv(65536):
                    raw.sendall(chunk)
                raw.shutdown(socket.SHUT_WR)
            except OSError:
                pass

        threading.Thread(target=up, daemon=True).start()
        try:
            for _, data in frames_iter(hijacked, tty=False):
                conn.sendall(data)
        except OSError:
            pass
        finally:
            try:  # a close alone waits for `up`'s recv: the client would never hear the sandbox is gone
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
            try:
                hijacked.close()
            except OSError:
                pass

    def close(self) -> None:
        self._closed = True
        self.sock.close()


class DockerSandbox:
    """The `Sandbox` protocol on a Docker container (see the module's docstring for what it isolates).

    `host` is what started it (a `docker_host.DockerHost`): its egress proxies are built and labelled from it.
    """

    test_user: str | None = "nobody"  # every Debian image has it; the hidden tests run as it
    unpacks_at_root = True  # a tar a command unpacks at / lands where `copy_tree_in("/", …)` puts it (`Sandbox`)

    def __init__(self, container, network: str | None = None, watchdog: DiskWatchdog | None = None,
                 output_tail: int = OUTPUT_TAIL_BYTES, host: Any = None):
        self.container = container
        self.network = network
        self.watchdog = watchdog
        self.output_tail = output_tail
        self.host = host
        self._forwards: list[PortForward] = []
        self._tree_pending = False  # /testbed not checked out yet: the first command does it (`_check_out_tree`)

    @classmethod
    def start(
        cls,
        client: docker.DockerClient,
        image: str,
        *,
        run_id: str,
        task_id: str,
        role: str,
        resources: Resources,
        gpu_ids: list[str] | None = None,
        network: str | None = None,
        host: Any = None,
    ) -> "DockerSandbox":
        """A container on `network` (default: a network of its own, removed with it) with the task's limits."""
        own = network is None
        if own:
            with docker_errors(f"creating a network for a {role} container"):
                network = sandbox_network(client, run_id, task_id, role)
        try:
            with docker_errors(f"creating a {role} container from {image}"):
                container = client.containers.create(
                    image,
                    command=["sleep", "infinity"],
                    labels=labels(run_id, task_id, role),
                    network=network,
                    working_dir=WORKDIR,
                    **run_kwargs(resources, gpu_ids or [], os.cpu_count() or 1),
                )
        except BaseException:
            if own and network:
                _remove_network(client, network)
            raise
        box = cls(container, network if own else None, host=host)
        if volumes := sorted((container.attrs.get("Config") or {}).get("Volumes") or {}):
            box.remove()
            raise InfraError("docker", f"the image {image} declares VOLUME {' '.join(volumes)}: a sandbox's writes "
                             "there are kept outside its writable layer, past its disk limit (build it without one)")
        try:
            with docker_errors(f"starting a {role} container from {image}"):
                container.start()
        except BaseException:  # e.g. a GPU request the host cannot serve: the created container must not stay
            box.remove()
            raise
        box.watchdog = DiskWatchdog(client, container, resources.disk_gb)
        box._tree_pending = container.labels.get(TREE_LABEL) == TREE_AT_START
        return box

    def _check_out_tree(self) -> None:
        """A task image keeps /testbed's tracked files in .git alone (images/task/sweserve-tree): they are
        checked out before anything runs or is read or written there: by the first command (`exec` runs the
        checkout first, in the same exec), or by this exec before any other access. The image's ENTRYPOINT
        does it too; whichever comes second waits."""
        if not self._tree_pending:
            return
        if self._tree_done():
            self._tree_pending = False
            return
        res = self._exec(TREE_RESTORE, TREE_TIMEOUT_S)
        if res.exit_code != 0:
            raise InfraError("sandbox", f"checking out /testbed in {self.name} failed "
                                        f"(exit {res.exit_code}): {res.output.strip()[-300:]}")
        self._tree_pending = False

    def _tree_done(self, wait_s: float = TREE_POLL_S) -> bool:
        """Whether the ENTRYPOINT's checkout has finished (its marker, TREE_DONE, is there: what `sweserve-tree
        restore` itself goes by), asked of dockerd without an exec for up to `wait_s`. Only while nothing has
        run in the sandbox (`_tree_pending`): nothing but the image's ENTRYPOINT can have written the marker."""
        api = self.container.client.api
        url = api._url("/containers/{0}/archive", self.container.id)
        until = time.monotonic() + wait_s
        while True:
            try:
                if api.head(url, params={"path": TREE_DONE}).status_code == 200:
                    return True
            except Exception:  # noqa: BLE001 - dockerd could not say: the exec decides
                return False
            if time.monotonic() >= until:
                return False
            time.sleep(0.02)

    @property
    def name(self) -> str:
        return self.container.name

    @property
    def address(self) -> str:
        with docker_errors("reading the sandbox's address"):
            self.container.reload()
        networks = self.container.attrs["NetworkSettings"]["Networks"].values()
        return next(n["IPAddress"] for n in networks if n["IPAddress"])

    def _arm(self) -> None:
        if self.watchdog:
            self.watchdog.arm()

    def forward(self, port: int) -> str:
        """host:port on the harness's machine that reaches `port` on the sandbox's loopback."""
        self._check_out_tree()
        self._arm()
        fwd = PortForward(self.container, port)
        self._forwards.append(fwd)
        return f"127.0.0.1:{fwd.port}"

    def start_background(self, argv: list[str], workdir: str = WORKDIR) -> None:
        self._check_out_tree()
        self._arm()
        with docker_errors(f"starting {argv[0]} in the sandbox"):
            self.container.exec_run(argv, detach=True, workdir=workdir)

    def interactive_argv(self, shell: str, tty: bool) -> list[str]:
        self._check_out_tree()
        self._arm()
        return ["docker", "exec", "-it" if tty else "-i", f"--detach-keys={DETACH_KEYS}", "-w", WORKDIR, self.name,
                "bash", "-c", shell]

    def kill(self) -> None:
        """`docker kill`: the kernel ends every process of the container, stopped and frozen ones too. A tree
        nothing has checked out yet (nothing ran in the sandbox) is checked out first: its files are read after."""
        try:
            self._check_out_tree()
        finally:
            self._kill()

    def _kill(self) -> None:
        try:
            self.container.kill()
        except docker.errors.APIError as exc:
            if exc.status_code not in (404, 409):  # gone, or not running: nothing left to stop
                raise InfraError("docker", f"killing {self.name}: {exc.explanation or exc}") from None

    def deadline(self, limit: float) -> Deadline:
        """Kills the sandbox from the host if the `with` block still runs a few seconds after `limit`."""
        return Deadline(limit, self._kill, name=f"deadline-{self.name}")

    def _check_limits(self, measure: bool = True) -> None:
        if self.watchdog:
            self.watchdog.check(measure)

    def exec(
        self,
        command: str,
        timeout: float,
        workdir: str = WORKDIR,
        env: dict[str, str] | None = None,
        user: str | None = None,
        on_output: Callable[[bytes], None] | None = None,
    ) -> ExecResult:
        """Run `bash -c command`; the whole process group is killed after timeout seconds, and the whole sandbox
        by the host a few seconds later if the command has not ended by then (its `timeout` stopped, a process
        holding the output open): `timed_out` either way.

        Output is streamed; only its last `output_tail` bytes are kept (`ExecResult.truncated` says so), and
        each chunk also goes to on_output as it arrives.

        The disk limit is checked before (what the watchdog last measured: a command never starts in a sandbox
        found over it) and measured after (a command that wrote past it fails however fast it was); the
        watchdog polls from the first command on.
        """
        self._arm()
        if not self._tree_pending:
            return self._exec(command, timeout, workdir, env, user, on_output)
        res = self._exec(f"{TREE_RESTORE} >/dev/null 2>&1 || exit {TREE_FAILED}; {command}",
                         timeout, workdir, env, user, on_output)
        if res.exit_code == TREE_FAILED or res.timed_out:
            self._check_out_tree()  # raises when the checkout did fail; else the command's own status stands
        self._tree_pending = False
        return res

    def _exec(self, command: str, timeout: float, workdir: str = WORKDIR, env: dict[str, str] | None = None,
              user: str | None = None, on_output: Callable[[bytes], None] | None = None) -> ExecResult:
        """`exec` without arming the watchdog (the harness's own checkout at start)."""
        self._check_limits(measure=False)
        started = time.monotonic()
        argv = ["timeout", "-s", "KILL", str(max(1, int(timeout))), "bash", "-c", command]
        api = self.container.client.api
        tail = OutputTail(self.output_tail)
        with docker_errors("running a command in the sandbox"):
            exec_id = api.exec_create(self.container.id, argv, workdir=workdir, environment=env or {},
                                      user=user or "")["Id"]
            stream = api.exec_start(exec_id, stream=True)
            with Deadline(max(1, int(timeout)), self.kill, stream.close, name=f"exec-{self.name}") as clock:
                for chunk in stream:
                    tail.add(chunk)
                    if on_output is not None:
                        on_output(chunk)
            code = None if clock.fired else api.exec_inspect(exec_id).get("ExitCode")
        elapsed = time.monotonic() - started
        self._check_limits()
        code = 137 if code is None else code
        text = tail.bytes().decode("utf-8", "replace")
        timed_out = clock.fired or (code == 137 and elapsed >= int(timeout) - 0.5)
        return ExecResult(code, text, timed_out, round(elapsed, 3), truncated=tail.truncated,
                          output_bytes=tail.total)

    def exec_stream(self, command: str, timeout: float, on_output: Callable[[bytes], None], workdir: str = WORKDIR,
                    env: dict[str, str] | None = None, user: str | None = None) -> ExecResult:
        """`exec`, with each chunk of output passed to on_output as it arrives."""
        return self.exec(command, timeout, workdir=workdir, env=env, user=user, on_output=on_output)

    def copy_tree_out(self, path: str, max_bytes: int, prefix: str = "") -> IO[bytes]:
        """The tree at path as a filtered tar, read through the Docker API (`transfer.export_tree`)."""
        self._check_out_tree()
        from sweserve.environment import transfer

        return transfer.export_tree(self, path, max_bytes, prefix)

    def copy_tree_in(self, dest: str, tar: bytes | IO[bytes]) -> None:
        from sweserve.environment import transfer

        if not (dest == "/" and _outside_tree(tar)):
            self._check_out_tree()  # a tar that only writes outside /testbed (the harness's, a tree to diff) need
            # not wait

        transfer.put_tree(self, dest, tar)

    def attach_egress(self, allow: list[str], closed_book: bool, audit_path: Path | None, *,
                      models: Sequence[str] = ()) -> AbstractContextManager[Any]:
        """This sandbox behind an egress proxy sidecar on its network (`egress.egress_for`)."""
        from sweserve.environment.egress import egress_for

        if self.host is None and allow:
            raise InfraError("network", f"{self.name} was started without a host to build its egress proxy from")
        return egress_for(self.host, self, allow, closed_book, audit_path, models=models)

    def put_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        self._check_out_tree()
        directory, name = os.path.split(path)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
        with docker_errors(f"copying {path} into the sandbox"):
            self.container.exec_run(["mkdir", "-p", directory])
            self.container.put_archive(directory, buf.getvalue())

    def read_file(self, path: str, max_bytes: int = READ_FILE_MAX_BYTES) -> bytes | None:
        """A regular file's bytes; None if there is none at `path` (or it is a link, a folder, a device).

        Raises `LimitExceeded` when the file is over max_bytes: its size is read from the archive's
        header before any of it is, so a huge (or sparse) file costs nothing.
        """
        self._check_out_tree()
        try:
            with docker_errors(f"copying {path} out of the sandbox"):
                stream, stat = self.container.client.api.get_archive(self.container.id, path, chunk_size=None)
        except InfraError:
            try:
                self.container.reload()
            except docker.errors.DockerException:
                raise InfraError("docker", f"the sandbox went away while reading {path}") from None
            return None  # the container is there: the file is not
        mode = int(stat.get("mode", 0))
        if mode & 0xFFF00000 or stat.get("linkTarget"):  # Go's FileMode type bits: a dir, link, device, pipe …
            _discard(stream)
            return None
        if int(stat.get("size", 0)) > max_bytes:
            _discard(stream)
            raise LimitExceeded(f"{path} in the sandbox is {int(stat['size']) / 2**20:.1f} MB, over the "
                                f"{max_bytes / 2**20:g} MB limit on files read from it")
        buf = bytearray()
        with docker_errors(f"copying {path} out of the sandbox"):
            for chunk in stream:
                buf += chunk
                if len(buf) > max_bytes + 64 * 1024:
                    _discard(stream)
                    raise LimitExceeded(f"{path} in the sandbox grew past the {max_bytes / 2**20:g} MB limit")
        with tarfile.open(fileobj=io.BytesIO(bytes(buf))) as tar:
            member = tar.next()
            if member is None or not member.isreg():
                return None
            fh = tar.extractfile(member)
            return fh.read() if fh else None

    def remove(self) -> None:
        if self.watchdog:
            self.watchdog.stop()
        for fwd in self._forwards:
            fwd.close()
        client, failed = self.container.client, None
        try:
            self.container.remove(force=True, v=True)  # and any anonymous volume it has
        except docker.errors.NotFound:
            pass
        except docker.errors.DockerException as exc:
            failed = exc
        if self.network:
            _remove_network(client, self.network)
        if failed:
            raise failed

    def __enter__(self) -> "DockerSandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def _outside_tree(tar: bytes | IO[bytes]) -> bool:
    """Whether every entry of `tar` (unpacked at "/") is outside WORKDIR (a file is read and put back where it
    was)."""
    top = WORKDIR.strip("/")
    fileobj = io.BytesIO(tar) if isinstance(tar, bytes) else tar
    at = fileobj.tell()
    try:
        with tarfile.open(fileobj=fileobj, mode="r|") as t:
            return all(m.name.lstrip("./").split("/", 1)[0] != top for m in streamed(t))  # none kept (R18c-2)
    except tarfile.TarError:
        return False
    finally:
        fileobj.seek(at)


def _discard(stream) -> None:
    close = getattr(stream, "close", None)
    if close:
        close()


def _remove_network(client: docker.DockerClient, name: str) -> None:
    try:
        client.networks.get(name).remove()
    except docker.errors.DockerException:
        pass  # gc reaps it later


def _owner_alive(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's run: not ours to judge
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def gc(client: docker.DockerClient, everything: bool = False, run_id: str | None = None) -> list[str]:
    """Remove sweserve containers (and their networks) left by dead harness processes.

    everything=True removes all of them; run_id limits it to one run's.
    """
    filters: dict[str, str | list[str] | bool] = {"label": [LABEL] + ([f"{LABEL}.run={run_id}"] if run_id else [])}
    removed = []
    # sparse: no inspect per container, so one that vanishes, or that the daemon holds busy for another
    # process, cannot fail or stall every sweserve start
    for container in client.containers.list(all=True, filters=filters, sparse=True):
        owner = (container.attrs.get("Labels") or {}).get(f"{LABEL}.owner", "")
        if everything or run_id or not _owner_alive(owner):
            try:
                container.remove(force=True)
                removed.append((container.attrs.get("Names") or [container.id])[0].lstrip("/"))
            except docker.errors.APIError as exc:
                if exc.status_code not in (404, 409):  # gone, or another process is removing it now
                    raise
    for network in client.networks.list(filters=filters):
        owner = network.attrs.get("Labels", {}).get(f"{LABEL}.owner", "")
        if not (everything or run_id or not _owner_alive(owner)):
            continue
        try:
            network.reload()
            if not network.containers:
                network.remove()
        except docker.errors.APIError:
            pass
    return removed
