"""The `sweserve` command: one module per subcommand, each with register(sub, common) and run(args, console).

Rule: bad input is one line and a non-zero exit, never a traceback; a command makes the Context it uses
(`common.make_context`) and closes it.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape

from sweserve import __version__
from sweserve.cli import (
    assess,
    demo,
    export,
    gc,
    images,
    locks,
    mine,
    report,
    review,
    run,
    session,
    tasks,
    validate,
)
from sweserve.cli.common import make_console
from sweserve.errors import InfraError, SweserveError

COMMANDS = (mine, locks, validate, run, report, export, tasks, session, review, demo, gc, images, assess)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sweserve", description=__doc__)
    p.add_argument("--version", action="version", version=f"sweserve {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--tasks", default="tasks", help="tasks folder (default: tasks)")
    common.add_argument("--state-dir", default=".sweserve", help="local state: clone registry, demo (default: .sweserve)")
    common.add_argument("--ca-bundle", default=None,
                        help="extra CA certificates for pip inside images (default: /etc/ssl/certs/ca-certificates.crt)")
    sub = p.add_subparsers(dest="cmd", required=True)

    for command in COMMANDS:
        command.register(sub, common)
    return p


class PlainLogHandler(logging.Handler):
    """Log lines for files and CI: the message alone, unpadded, with escape sequences and control characters
    removed (Docker's build output carries colour codes)."""

    def __init__(self, console: Console):
        super().__init__()
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        from sweserve.agents.terminal import plain_text

        try:
            text = plain_text(self.format(record)).rstrip()
            out = self.console.file
            out.write(text + "\n")
            out.flush()
        except Exception:  # noqa: BLE001 - logging must never take the command down
            self.handleError(record)


def setup_logging(err: Console) -> None:
    """sweserve's modules log through `logging`; the CLI shows INFO and up on stderr: through rich on a
    terminal, as plain lines elsewhere (rich's handler pads every line to the console's width)."""
    handler: logging.Handler
    if err.is_terminal:
        handler = RichHandler(console=err, show_path=False, show_level=False, markup=False, rich_tracebacks=False)
    else:
        handler = PlainLogHandler(err)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger("sweserve")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    root.propagate = False


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    console = make_console()
    err = make_console(stderr=True)
    setup_logging(err)
    try:
        return args.func(args, console)
    except SweserveError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 2
    except InfraError as exc:
        err.print(f"[red]error ({exc.kind}):[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 3
    except KeyboardInterrupt:
        err.print("interrupted; containers of this run were removed, finished results are kept")
        return 130
    except Exception as exc:  # noqa: BLE001 - a bug: its traceback saved, one line said, never a user error
        where = save_crash(Path(getattr(args, "state_dir", ".sweserve")), traceback.format_exc())
        err.print(f"[red]internal error:[/] {escape(f'{exc.__class__.__name__}: {exc}'[:300])} "
                  f"(a bug in sweserve; traceback: {escape(where)})", highlight=False, soft_wrap=True)
        return 1


def save_crash(state_dir: Path, text: str) -> str:
    """Write a command's traceback under the state dir's logs (else the temp dir); where it went."""
    name = f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
    for folder in (state_dir / "logs", Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
            return str(folder / name)
        except OSError:
            continue
    return "not written"


if __name__ == "__main__":
    sys.exit(main())
