"""`sweserve assess serve`: the candidate's side of an assessment, an ASGI app (starlette) on uvicorn.

    GET  /i/{token}   the invite: a Start button (a link preview cannot spend the token); refused pages say why
    POST /i/{token}   redeems the token once, sets the session cookie, starts the pack's trials
    GET  /s           the candidate's page: instruction, terminal (xterm.js), time left, Submit
    GET  /api/state   what the page polls: task, time left, status
    POST /api/submit  submit the task in progress (`?task=<n>`: only if task n is the one in progress)
    WS   /ws          the terminal: keys in, output out, relayed by `recorder.BrowserTerminal`
    GET  /vendor/…    xterm.js and its fit add-on, from node_modules (installed by `make setup`)

Each redeemed invite is an `Assessment`: a thread that runs the pack's tasks one after another through
`run_evaluation` (the pipeline `run` and `session` use), each in a sandbox of its own from the command's host,
with results in `<output>/<pack>/<candidate>.jsonl`. The session cookie is random, HttpOnly and SameSite=Strict,
kept only as its hash, and named after the server's port (`cookie_name`); the websocket and the POSTs also check
their Origin (`same_origin`). A tab that reconnects gets the same shell and timer (the terminal and the deadline
live here, not in the tab). Reviewer pages are not served here: `assess report`
writes them to files, so a candidate reaches nothing of other candidates through this server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import functools
import hashlib
import html
import json
import logging
import os
import secrets
import struct
import termios
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect
from uvicorn.protocols.http.h11_impl import H11Protocol

from sweserve.assess.agent import CAST_FILE, BrowserAgent, Seat
from sweserve.assess.invites import Invite, InviteStore, Refused
from sweserve.assess.packs import Pack, check_pack, load_pack
from sweserve.environment.host import new_run_id
from sweserve.errors import SweserveError
from sweserve.evaluation.context import Context
from sweserve.evaluation.evaluate import next_attempt, run_evaluation
from sweserve.evaluation.trial_folder import TrialFolder
from sweserve.models import RunResult, TaskBundle

with warnings.catch_warnings():
    # uvicorn warns, on importing it, that `--ws websockets` will name its sans-io implementation in a later
    # release: this is the one `StallCutWebSocket` extends, named by its module, and the warning on stderr made a
    # bad-input error of `assess serve` three lines
    warnings.simplefilter("ignore", UserWarning)
    from uvicorn.protocols.websockets.websockets_impl import WebSocketProtocol

log = logging.getLogger(__name__)
COOKIE = "sweserve_session"  # the session cookie's name is this and the server's port (`cookie_name`)
MAX_INPUT_BYTES = 64 * 1024
WATCHER_BACKLOG_BYTES = 4 * 2**20  # output queued for one tab; past it the tab is closed and reconnects
# a websocket message: 64 KiB of keys as JSON (escapes grow a byte to 6 characters), and no compression, which let
# a small upload become 15 MiB messages decoded on the event loop (red team 14b, R14b-3)
WS_MAX_BYTES = 512 * 1024
# seconds a connection has to send a whole request head, from its start or the end of the previous response: uvicorn
# arms no timer on a new connection, and each byte received cancels its keep-alive timer, so a head sent a byte at
# a time (or none) held a connection for ever, and a loop of them the server's file descriptors (red team 17d, R17d-1)
REQUEST_HEAD_S = 15.0
# seconds a response may wait for a client that reads none of it (the transport paused for writing, not resumed): a
# client that pipelined whole requests and read nothing held its connection for ever, the head deadline never due
# since each head came whole (red team 18d, R18d-1)
WRITE_STALL_S = 30.0
# bytes a paused connection's client must take per WRITE_STALL_S (or all it had left) to count as reading: any
# progress at all let a client taking a segment per deadline hold its connection for ever (red team 20b, R20b-4);
# 64 KiB per 30 s is ~2 KiB a second, slower than any honest network
WRITE_STALL_MIN_BYTES = 64 * 1024
VENDOR = {  # what the pages load, and nothing else of node_modules
    "xterm.js": "@xterm/xterm/lib/xterm.js",
    "xterm.css": "@xterm/xterm/css/xterm.css",
    "addon-fit.js": "@xterm/addon-fit/lib/addon-fit.js",
}


def find_node_modules(given: str | None = None) -> Path:
    """node_modules holding the front-end packages: given, ./node_modules, or the checkout's."""
    candidates = [Path(given)] if given else [Path.cwd() / "node_modules",
                                              Path(__file__).resolve().parents[2] / "node_modules"]
    for nm in candidates:
        if all((nm / rel).is_file() for rel in VENDOR.values()):
            return nm
    raise SweserveError("the front-end packages are not installed: run `make setup` (npm ci) in the checkout, "
                        "or pass --node-modules")


def cookie_name(port: int | None, secure: bool = False) -> str:
    """The session cookie's name for the server listening on `port`: a browser's cookies are the host's, whatever
    the port (RFC 6265 §8.5), and with one name for every server a Start on a second `assess serve` of the host
    replaced the first session's cookie, whose tab then had no session and whose spent link reopened nothing (red
    team 22g, R22g-2). The port is the listening socket's (the ASGI scope's `server`), not the client's Host.
    Over https (`secure`) the name has the `__Host-` prefix: a browser takes such a cookie only from this very host,
    over https, with Path=/ and no Domain, so no sibling subdomain can set one of its name (red team 23c, R23c-2)."""
    name = f"{COOKIE}_{port}" if port else COOKIE
    return f"__Host-{name}" if secure else name


def server_port(request: Request | WebSocket) -> int | None:
    server = request.scope.get("server")
    return server[1] if server and len(server) > 1 and isinstance(server[1], int) else None


def secure_request(request: Request | WebSocket) -> bool:
    """Whether the browser reached this server over TLS (directly, or through a proxy uvicorn trusts)."""
    return request.url.scheme in ("https", "wss")


def results_file(output: Path, pack: Pack, candidate: str) -> Path:
    return output / pack.name / f"{candidate}.jsonl"


@dataclass
class Assessment:
    invite: Invite
    pack: Pack
    bundles: list[TaskBundle]
    results_path: Path
    seat: Seat
    status: str = "starting"  # starting, running, grading, done, error
    index: int = 0
    results: list[RunResult] = field(default_factory=list)
    # the results file's lock, held (flock) while the session runs: what another server of the host sees of it
    hold: Any = None

    def run(self, ctx: Context) -> None:
        try:
            self._run(ctx)
        finally:
            if self.hold is not None:
                self.hold.close()

    def _run(self, ctx: Context) -> None:
        try:
            for i, (bundle, item) in enumerate(zip(self.bundles, self.pack.tasks, strict=True)):
                self.index, self.status = i, "running"
                attempt = next_attempt(self.results_path, f"human-{self.seat.candidate}", bundle.task.task_id)
                # each task is a run of its own (its manifest names that task), under a run id of its own: the
                # candidates of a pack share a runs folder, and a run id another candidate holds would make
                # `run_evaluation` choose a new one on the context other candidates' trials are using
                task_ctx = dataclasses.replace(ctx, results_run_id=new_run_id())
                agent = BrowserAgent(self.seat.candidate, self.seat, item.time_budget_s,
                                     functools.partial(self._cast, task_ctx, attempt=attempt))
                results = run_evaluation(task_ctx, [bundle], agent, self.results_path, attempts=attempt,
                                         first_attempt=attempt, force=True)
                self.results += results
            self.status = "done"
        except Exception:  # noqa: BLE001 - logged with its traceback; the page says the session ended
            log.exception("assessment of %s stopped", self.seat.candidate)
            self.status = "error"

    def _cast(self, ctx: Context, bundle: TaskBundle, *, attempt: int) -> Path:
        """Where the trial's folder will be (`trial.trial_folder`'s layout): the cast is written beside its files."""
        return TrialFolder.for_trial(self.results_path, ctx.run_id, f"human-{self.seat.candidate}",
                                     bundle.task.task_id, attempt).path / CAST_FILE

    def state(self, render: Callable[[str], str]) -> dict[str, Any]:
        """What the page polls. `render` turns the statement into HTML (the server's cached `rendered`)."""
        bundle = self.bundles[min(self.index, len(self.bundles) - 1)]
        term = self.seat.terminal
        status = self.status
        if status == "running" and term is None:
            status = "starting" if self.seat.task_id != bundle.task.task_id else "grading"
        # the task is shown only while its clock runs: read before its sandbox is up (an image build, a start), it
        # would be free time (red team 12a, R12a-5); its id too (it names the upstream PR, red team 13)
        shown = term is not None and self.seat.task_id == bundle.task.task_id
        return {"status": status, "candidate": self.seat.candidate, "index": self.index + 1,
                "count": len(self.bundles), "task_id": bundle.task.task_id if shown else "",
                "title": bundle.task.title if shown else "",
                "left_s": self.seat.left_s() if term is not None else None,
                "instruction_html": render(bundle.instruction) if shown else ""}


class AssessServer:
    def __init__(self, ctx: Context, tasks: dict[str, TaskBundle], store: InviteStore, output: Path,
                 node_modules: Path):
        self.ctx, self.tasks, self.store, self.output, self.node_modules = ctx, tasks, store, output, node_modules
        self.sessions: dict[str, Assessment] = {}
        self.lock = threading.Lock()
        self.md = MarkdownIt("commonmark", {"html": False})
        # each statement rendered once: on every poll of /api/state (once a second per tab, or a candidate's loop of
        # them), the render ran on the event loop that relays every candidate's terminal, ~40 ms for 18 KB (red team
        # 22c, R22c-4); a pack's statements are few, and a task changed is a new statement
        self._rendered: dict[str, str] = {}

    # ---- sessions

    def assessment(self, request: Request | WebSocket) -> Assessment | None:
        # the session cookie may be sent more than once: a sibling subdomain can set one of the same name for the
        # whole site (cookie tossing) beside the candidate's own. The one taken (the last) was the one its setter
        # ordered last: its session's page, terminal and Submit in the victim's browser (red team 22c, R22c-5); and
        # a name sent twice taken as no session let a cookie of no session at all, set by any page of the host,
        # lock the candidate out (red team 23c, R23c-1). So every value is looked up: one session among them is
        # the session, two different ones are none
        name = cookie_name(server_port(request), secure_request(request))
        found = set()
        for value in request.headers.getlist("cookie"):
            for part in value.split(";"):
                key, eq, val = part.partition("=")
                if eq and key.strip() == name and (val := val.strip()):
                    digest = hashlib.sha256(val.encode("utf-8", "replace")).hexdigest()
                    if digest in self.sessions:
                        found.add(digest)
        return self.sessions.get(found.pop()) if len(found) == 1 else None

    def begin(self, token: str) -> str:
        """Redeem `token` and start its assessment; the session cookie's key. Everything that could refuse the
        session is checked before the token is spent: a pack changed or unavailable, or a session of the same
        candidate and pack still in progress on this server (a second link while the first runs: both wrote the
        same results file, and the second ended in `error` at once, its link spent; or both wrote attempt 1
        and the candidate chose which one counts, red team 12a's lead). Once the first ends, the second link
        opens a retake, which the scorecard discloses."""
        invite = self.store.peek(token)
        pack = load_pack(Path(invite.pack))
        if pack.version != invite.pack_version:
            raise SweserveError("the assessment pack changed after this invitation was made")
        try:
            bundles = check_pack(pack, self.tasks)
        except SweserveError as exc:
            # why, for the hiring team: the reason names the pack's tasks, and a task id names its upstream PR
            # (whose diff solves it), shown on the candidate's page before any clock ran, the link still valid for
            # later (red team 23k, R23k-2)
            log.error("invite %s of %s cannot start: %s", invite.invite_id, invite.candidate, exc)
            raise SweserveError("this assessment cannot start right now; the hiring team has been told, and this "
                                "link stays valid") from None
        path = results_file(self.output, pack, invite.candidate)
        key = secrets.token_urlsafe(32)
        busy = SweserveError("your assessment of this pack is already in progress: continue it in the browser you "
                             "started it in; this link stays valid for when it has ended")
        with self.lock:  # one check and one redeem at a time: two links posted at once cannot both pass
            if any(s.results_path == path and s.status not in ("done", "error") for s in self.sessions.values()):
                raise busy
            # and across servers: another `assess serve` of the host (the same invites and output) sees none of
            # these sessions, and started the same candidate's pack again, a second attempt 1 in the same results
            # file (red team 22g, R22g-3); the session holds its results file's lock until it ends
            path.parent.mkdir(parents=True, exist_ok=True)
            # opened without following a link, truncating, or waiting on a FIFO: a file planted there held the
            # server-wide lock or wrote where the link pointed (red team 22k's lead)
            try:
                fd = os.open(path.with_name(path.name + ".lock"),
                             os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise SweserveError(f"{path.name}.lock cannot be opened as a plain file ({exc.strerror}): "
                                    "ask the assessor to check the output folder") from None
            hold = os.fdopen(fd, "w")
            try:
                fcntl.flock(hold, fcntl.LOCK_EX | fcntl.LOCK_NB)
                invite = self.store.redeem(token)
            except BlockingIOError:
                hold.close()
                raise busy from None
            except BaseException:
                hold.close()
                raise
            a = Assessment(invite, pack, bundles, path, Seat(invite.candidate), hold=hold)
            self.sessions[hashlib.sha256(key.encode()).hexdigest()] = a
        threading.Thread(target=a.run, args=(self.ctx,), name=f"assess-{invite.candidate}", daemon=True).start()
        return key

    # ---- pages

    async def invite_page(self, request: Request) -> Response:
        token = request.path_params["token"]
        if request.method == "POST":
            if not same_origin(request):
                return message_page("Not allowed", "Open your invitation link itself to start.", 403)
            try:
                key = await asyncio.to_thread(self.begin, token)
            except Refused as exc:
                return message_page("Invitation refused", exc.why, 410)
            except SweserveError as exc:
                return message_page("Assessment unavailable", str(exc), 409)
            resp = RedirectResponse("/s", status_code=303)
            secure = secure_request(request)
            resp.set_cookie(cookie_name(server_port(request), secure), key, max_age=7 * 86400, path="/", httponly=True,
                            samesite="strict", secure=secure)
            return resp
        try:
            invite = await asyncio.to_thread(self.store.peek, token)
        except Refused as exc:
            return message_page("Invitation refused", exc.why, 410)
        body = (f"<p>Hello {html.escape(invite.candidate)}. When you press Start, your timed assessment begins: "
                f"a task statement, and a terminal in a sandbox holding the repository. The clock runs on the "
                f"server; closing the tab does not stop it, and reopening this browser resumes your session. "
                f"When the time is up your work is submitted as it stands; typing <code>exit</code> in the terminal "
                f"submits the task too.</p>"
                f"<form method=post><button id=start type=submit>Start</button></form>")
        return message_page("Your assessment", body, 200, raw=True)

    def rendered(self, statement: str) -> str:
        """A task statement as HTML, rendered the first time it is asked for."""
        html_ = self._rendered.get(statement)
        if html_ is None:
            html_ = self._rendered[statement] = self.md.render(statement)
        return html_

    async def session_page(self, request: Request) -> Response:
        if self.assessment(request) is None:
            return message_page("No session", "Open the invitation link you were sent to start.", 403)
        return HTMLResponse(SESSION_PAGE)

    async def state(self, request: Request) -> Response:
        a = self.assessment(request)
        if a is None:
            return JSONResponse({"status": "none"}, status_code=403)
        return JSONResponse(a.state(self.rendered))

    async def submit(self, request: Request) -> Response:
        a = self.assessment(request)
        if a is None or not same_origin(request):
            return JSONResponse({"ok": False}, status_code=403)
        # the page names the task it shows (`?task=<index>`, 1-based): a Submit of task 1 from a second tab, a
        # throttled one or a slow network that landed once task 2's clock ran ended task 2 at once (red team 22g,
        # R22g-1); a client naming no task (a script) submits the task in progress, as before
        named = request.query_params.getlist("task")
        seat = a.seat
        with seat.changed:  # `take` and `leave` change the seat under it: the task checked is the task submitted
            if named and (named != [str(a.index + 1)] or seat.terminal is None
                          or seat.task_id != a.bundles[a.index].task.task_id):
                return JSONResponse({"ok": False}, status_code=409)
            seat.submitted.set()
        return JSONResponse({"ok": True})

    async def vendor(self, request: Request) -> Response:
        rel = VENDOR.get(request.path_params["name"])
        if rel is None:
            return message_page("Not found", "There is nothing here.", 404)
        return FileResponse(self.node_modules / rel)

    async def terminal(self, ws: WebSocket) -> None:
        a = self.assessment(ws)
        if a is None or not same_origin(ws):
            await ws.close(code=4403)
            return
        term = a.seat.terminal
        await ws.accept()
        if term is None or term.exited.is_set():
            await ws.close(code=4000)  # no terminal right now (starting, grading): the page tries again
            return
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        backlog = 0  # bytes queued for this tab and not yet sent (counted on the loop)

        def enqueue(data: bytes) -> None:
            nonlocal backlog
            if backlog < 0:  # fell behind: nothing more is queued
                return
            if backlog + len(data) > WATCHER_BACKLOG_BYTES:
                # a tab that does not read (or reads too slowly) must hold no unbounded memory of the server's
                # (red team 14b, R14b-4): it is closed, and the page reconnects to the recent output, as after a
                # dropped connection
                # what was queued is dropped now, not held until a client that may never read takes it, and the
                # tab keeps its place among the terminal's watchers until its connection ends: unsubscribed at once,
                # a deaf tab freed its place while holding its 4 MiB, and the next deaf tab took it (red team 17d,
                # R17d-2)
                backlog = -1
                term.mute(send)
                while not queue.empty():
                    queue.get_nowait()
                queue.put_nowait(b"")
                return
            backlog += len(data)
            queue.put_nowait(data)

        def send(data: bytes) -> None:
            loop.call_soon_threadsafe(enqueue, data)

        tail = term.subscribe(send)
        if tail is None:
            await ws.close(code=4429)  # too many tabs on this terminal
            return

        async def pump() -> None:
            nonlocal backlog
            if tail:
                await ws.send_bytes(tail)
            while (data := await queue.get()):
                if backlog > 0:
                    backlog -= len(data)
                await ws.send_bytes(data)
            await ws.close(code=1000 if backlog >= 0 else 4001)

        out = asyncio.create_task(pump())
        try:
            while True:
                frame = await ws.receive()
                if frame["type"] == "websocket.disconnect":
                    break
                msg = frame.get("text")
                if not isinstance(msg, str):  # a binary frame: not what the page sends (red team 14c's lead)
                    continue
                try:
                    event = json.loads(msg)
                except ValueError:
                    continue
                if not isinstance(event, dict):
                    continue
                if event.get("type") == "input" and isinstance(event.get("data"), str):
                    term.write(event["data"].encode("utf-8", "replace")[:MAX_INPUT_BYTES])
                elif event.get("type") == "resize":
                    cols, rows = event.get("cols"), event.get("rows")
                    if isinstance(cols, int) and isinstance(rows, int):
                        term.resize(cols, rows)
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            term.unsubscribe(send)
            out.cancel()

    def app(self) -> Starlette:
        async def not_found(request: Request, exc: Exception) -> Response:
            return message_page("Not found", "There is nothing here.", 404)

        async def broken(request: Request, exc: Exception) -> Response:
            log.error("assess server: %s: %s", type(exc).__name__, exc)
            return message_page("Something went wrong", "The server could not do that. Try again, or tell the "
                                "hiring team.", 500)

        return Starlette(routes=[
            Route("/i/{token}", self.invite_page, methods=["GET", "POST"]),
            Route("/s", self.session_page),
            Route("/api/state", self.state),
            Route("/api/submit", self.submit, methods=["POST"]),
            Route("/vendor/{name}", self.vendor),
            WebSocketRoute("/ws", self.terminal),
        ], exception_handlers={404: not_found, 405: not_found, 500: broken, Exception: broken})


class WriteStallCut:
    """A deadline on a client that reads nothing (`WRITE_STALL_S`), for an asyncio protocol: once the transport
    pauses writing (its buffer full), a connection whose unsent output (the transport's and the kernel's) has not
    shrunk within it, and is still paused, is aborted (red team 18d, R18d-1). Mixed into both protocols `assess
    serve` runs: on the HTTP one alone, a connection upgraded to a websocket was never cut, its output handler
    and its keep-alive ping both waiting for ever on one drain (red team 20b, R20b-3)."""

    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    _write_stalls = 0  # pauses of writing so far: a timer is for the pause it was armed in

    def _write_paused(self) -> bool:
        raise NotImplementedError

    def _stall_armed(self) -> None:
        self._write_stalls += 1
        self.loop.call_later(WRITE_STALL_S, self._stall_due, self._write_stalls, self._unsent())

    def _unsent(self) -> int:
        """Bytes of output not yet taken by the client: the transport's buffer and the kernel's send queue."""
        unsent = self.transport.get_write_buffer_size()
        sock = self.transport.get_extra_info("socket")
        try:
            unsent += struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
        except (OSError, AttributeError, ValueError):
            pass
        return unsent

    def _stall_due(self, stall: int, unsent: int) -> None:
        transport = self.transport
        if self._write_stalls != stall or not self._write_paused() or transport.get_protocol() is not self:
            return
        # the client took enough: a slow reader, not a deaf one or one taking a trickle to keep the deadline off
        if unsent - (now := self._unsent()) >= min(WRITE_STALL_MIN_BYTES, unsent):
            self.loop.call_later(WRITE_STALL_S, self._stall_due, stall, now)
            return
        # closing or not: a transport closed with output pending waits for it to drain, for ever if never read
        transport.abort()


class HeadDeadlineH11(WriteStallCut, H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline on each request head (`REQUEST_HEAD_S`): armed when the
    connection opens and again when a response ends; a connection that has begun no new request by then (no whole
    head received: the same request cycle as when it was armed) and is still HTTP (not upgraded to a websocket) is
    closed. A request's handler, a body and a websocket are not timed by it: only the head a client owes. And the
    write-stall cut (`WriteStallCut`)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_head_deadline()

    def _arm_head_deadline(self) -> None:
        self.loop.call_later(REQUEST_HEAD_S, self._head_due, self.cycle)

    def pause_writing(self) -> None:
        super().pause_writing()
        self._stall_armed()

    def _write_paused(self) -> bool:
        return bool(self.flow.write_paused)

    def _head_due(self, cycle: object) -> None:
        transport = self.transport
        if self.cycle is cycle and transport.get_protocol() is self:
            transport.abort()  # a response still unread by then is not waited for (`close` would, for ever)


class StallCutWebSocket(WriteStallCut, WebSocketProtocol):
    """uvicorn's websocket protocol (`websockets`) with the write-stall cut (`WriteStallCut`)."""

    def pause_writing(self) -> None:
        super().pause_writing()
        self._stall_armed()

    def _write_paused(self) -> bool:
        return bool(self._paused)


# what `assess serve` passes uvicorn besides the app, host and port
SERVE_OPTIONS: dict[str, Any] = {
    "http": HeadDeadlineH11, "ws": StallCutWebSocket, "ws_max_size": WS_MAX_BYTES,
    # a websocket message: no compression (red team 14b, R14b-3)
    "ws_per_message_deflate": False,
}


def same_origin(request: Request | WebSocket) -> bool:
    """Whether a request that changes something comes from this server's own pages: its Origin, when it sends one
    (a browser does, on a POST and a websocket), names the host it was sent to. The session cookie's SameSite=Strict
    is not enough: a site is a scheme and registrable domain, so the cookie also comes with a form posted from
    another port of the host or a sibling subdomain, which ended a candidate's task at once (red team 22c, R22c-2)."""
    origin = request.headers.get("origin")
    return origin is None or origin.split("://", 1)[-1] == request.headers.get("host")


def message_page(title: str, body: str, status: int, raw: bool = False) -> HTMLResponse:
    text = body if raw else f"<p id=message>{html.escape(body)}</p>"
    return HTMLResponse(f"<!doctype html><html><head><meta charset=utf-8><title>{html.escape(title)}</title>"
                        f"<style>body{{font-family:system-ui,sans-serif;max-width:40em;margin:4em auto}}</style>"
                        f"</head><body><h1>{html.escape(title)}</h1>{text}</body></html>", status_code=status)


SESSION_PAGE = """<!doctype html><html><head><meta charset=utf-8><title>sweserve assessment</title>
<link rel=stylesheet href=/vendor/xterm.css>
<script src=/vendor/xterm.js></script><script src=/vendor/addon-fit.js></script>
<style>
body{margin:0;font-family:system-ui,sans-serif;display:flex;flex-direction:column;height:100vh}
#bar{display:flex;gap:1em;align-items:center;padding:.5em 1em;background:#222;color:#eee}
#bar .grow{flex:1} #left{font-variant-numeric:tabular-nums;font-weight:bold}
#submit{font-size:1em;padding:.3em 1.2em}
#main{flex:1;display:flex;min-height:0}
#instr{width:38%;overflow:auto;padding:0 1em;border-right:1px solid #ccc}
#term{flex:1;background:#000;padding:4px;min-width:0}
#done{display:none;padding:2em}
</style></head><body>
<div id=bar><span id=task class=grow>preparing…</span><span>time left: <span id=left>—</span></span>
<button id=submit disabled>Submit</button></div>
<div id=main><div id=instr></div><div id=term></div></div>
<div id=done><h1>Submitted</h1><p id=donemsg>Your work has been submitted. Thank you; you may close this tab.</p></div>
<script>
const term = new Terminal({cursorBlink: true, fontSize: 14, scrollback: 5000});
const fit = new FitAddon.FitAddon(); term.loadAddon(fit); term.open(document.getElementById('term')); fit.fit();
let ws = null, current = null, state = null, left = null;
function connect() {
  if (ws) return;
  ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws');
  ws.binaryType = 'arraybuffer';
  ws.onopen = () => ws.send(JSON.stringify({type: 'resize', cols: term.cols, rows: term.rows}));
  ws.onmessage = (e) => term.write(new Uint8Array(e.data));
  ws.onclose = () => { ws = null; };
}
term.onData((d) => { if (ws && ws.readyState === 1) ws.send(JSON.stringify({type: 'input', data: d})); });
term.onResize((s) => { if (ws && ws.readyState === 1) ws.send(JSON.stringify({type: 'resize', cols: s.cols, rows: s.rows})); });
window.addEventListener('resize', () => fit.fit());
async function poll() {
  let r;
  try { r = await fetch('/api/state'); state = await r.json(); } catch (e) { return; }
  const submit = document.getElementById('submit');
  if (state.status === 'done' || state.status === 'error' || state.status === 'none') {
    document.getElementById('main').style.display = 'none'; document.getElementById('bar').style.display = 'none';
    document.getElementById('done').style.display = 'block';
    if (state.status === 'error') document.getElementById('donemsg').textContent = 'The session ended early; the hiring team has been told.';
    if (ws) ws.close();
    return;
  }
  document.getElementById('task').textContent = 'Task ' + state.index + ' of ' + state.count + ': ' + state.title +
    (state.status === 'running' ? '' : ' (' + state.status + '…)');
  if (state.instruction_html !== current) {  // empty until the task's clock runs
    current = state.instruction_html; document.getElementById('instr').innerHTML = current;
  }
  submit.disabled = state.status !== 'running';
  if (state.status === 'running') { left = state.left_s; connect(); } else { left = null; }
  document.getElementById('left').textContent = left === null ? '—' :
    Math.floor(left / 60) + 'm' + String(left % 60).padStart(2, '0') + 's';
}
document.getElementById('submit').onclick = async () => {
  document.getElementById('submit').disabled = true;
  await fetch('/api/submit?task=' + state.index, {method: 'POST'}); term.reset();
};
setInterval(poll, 1000); poll(); term.focus();
</script></body></html>
"""
