"""`sweserve assess`: remote assessments of engineer candidates (see sweserve/assess/).

    assess pack   --name N --count K --minutes M [--family F]... [--band LO:HI] [--results R.jsonl]...
    assess invite PACK --candidate NAME [--expires-in 72h] [--url http://host:port]
    assess serve  [--host 127.0.0.1] [--port 8765] [--output results/assess]
    assess report PACK [--output results/assess] [--results AGENTS.jsonl]... [--out DIR]
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from sweserve.errors import SweserveError


def register(sub, common) -> None:
    a = sub.add_parser("assess", help="remote assessments of engineer candidates: packs, invites, a browser "
                                      "terminal, scorecards")
    acts = a.add_subparsers(dest="assess_cmd", required=True)
    p = acts.add_parser("pack", parents=[common], help="choose ready tasks into a pack file")
    p.add_argument("--name", required=True, help="the pack's name (letters, digits, . _ -)")
    p.add_argument("--count", type=int, required=True, help="how many tasks")
    p.add_argument("--minutes", type=int, required=True, help="the total time budget")
    p.add_argument("--family", action="append", default=None, help="a family to draw from (repeatable; default all)")
    p.add_argument("--band", default=None, help="difficulty band LO:HI in logits (e.g. -1:1.5)")
    p.add_argument("--results", action="append", default=[], help="results files to calibrate difficulty from")
    p.add_argument("--out", default=None, help="pack file (default: packs/<name>.yaml)")
    p.set_defaults(func=run_pack)
    i = acts.add_parser("invite", parents=[common], help="a one-time link for a candidate")
    i.add_argument("pack")
    i.add_argument("--candidate", required=True)
    i.add_argument("--expires-in", default="72h", help="how long the link can be opened (e.g. 90m, 72h, 3d)")
    i.add_argument("--url", default="http://127.0.0.1:8765", help="where `assess serve` is reached")
    i.set_defaults(func=run_invite)
    s = acts.add_parser("serve", parents=[common], help="serve candidates' browser terminals")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=int, default=8765)
    s.add_argument("--output", default="results/assess", help="results folder: <output>/<pack>/<candidate>.jsonl")
    s.add_argument("--repo-path", default=None, help="clone to build task images from")
    s.add_argument("--node-modules", default=None, help="where npm installed the front-end packages")
    s.set_defaults(func=run_serve)
    r = acts.add_parser("report", parents=[common], help="scorecards (HTML) and a CSV of a pack's candidates")
    r.add_argument("pack")
    r.add_argument("--output", default="results/assess", help="the results folder `assess serve` wrote")
    r.add_argument("--results", action="append", default=[], help="agents' results files, to compare with")
    r.add_argument("--out", default=None, help="folder for the pages (default: <output>/<pack>/report)")
    r.add_argument("--node-modules", default=None)
    r.set_defaults(func=run_report)


def _invites(args):
    from sweserve.assess.invites import InviteStore

    return InviteStore(Path(args.state_dir) / "assess" / "invites.json")


def _fit(paths: list[str], console: Console | None = None) -> tuple[list, list[tuple[str, str, str]]]:
    """What `report --difficulty` fits of the files named (`report.counted`, `report.fit_inputs`): the latest record
    of each (task, agent, attempt), once whatever names its file, none of a task run while not ready, and each
    attempt a run selected and never finished an unsolved one. Every line of each was an observation: a file named
    twice, or a copy, doubled each attempt, a rerun attempt's superseded record counted (red team 22f, R22f-1),
    and an agent's run killed mid-way had its unfinished tasks out of the fit (R22f-4)."""
    from sweserve.cli.report import counted, fit_inputs, runs_unselected, say_unselected, unselected_by_agent

    for p in paths:
        if not Path(p).is_file():
            raise SweserveError(f"{p}: no such results file")
    per_file, results, selected = counted([Path(p) for p in paths], Console(quiet=True), difficulty=True)
    # a copy's run has no selection beside it: its unfinished tasks are not in the fit, and it says so (R23b-3)
    if console is not None:
        say_unselected(unselected_by_agent(runs_unselected(per_file)), console)
    return fit_inputs(results, selected)


def _results(paths: list[str]) -> list:
    """The records `_fit` takes."""
    return _fit(paths)[0]


def run_pack(args, console: Console) -> int:
    from sweserve.assess.difficulty import calibrate
    from sweserve.assess.packs import choose_pack, save_pack
    from sweserve.dataset.taskstore import load_all
    from sweserve.models import FAMILIES

    if args.count < 1 or args.minutes < 1:
        raise SweserveError("--count and --minutes must be at least 1")
    for fam in args.family or []:
        if fam not in FAMILIES:
            raise SweserveError(f"--family {fam}: not one of {', '.join(FAMILIES)}")
    band = None
    if args.band:
        try:
            lo, hi = (float(x) for x in args.band.split(":"))
        except ValueError:
            raise SweserveError(f"--band {args.band}: expected LO:HI, e.g. -1:1.5") from None
        band = (lo, hi)
    difficulty = calibrate(*_fit(args.results, console)).difficulty() if args.results else {}
    pack = choose_pack(args.name, load_all(Path(args.tasks)), args.count, args.minutes * 60, args.family, band,
                       difficulty)
    out = Path(args.out or f"packs/{args.name}.yaml")
    save_pack(out, pack)
    console.print(f"pack {pack.name} (version {pack.version}): {len(pack.tasks)} tasks, "
                  f"{pack.time_budget_s // 60} minutes → {escape(str(out))}")
    for t in pack.tasks:
        d = "uncalibrated" if t.difficulty is None else f"difficulty {t.difficulty:+.2f}"
        console.print(f"  {t.task_id}  {t.family}  {t.time_budget_s // 60} min  {d}", markup=False)
    return 0


def run_invite(args, console: Console) -> int:
    from sweserve.assess.invites import parse_duration
    from sweserve.assess.packs import load_pack

    if not args.candidate.replace("-", "").replace("_", "").isalnum():
        raise SweserveError("--candidate may hold letters, digits, '-' and '_' only")
    try:
        valid = parse_duration(args.expires_in)
    except ValueError as exc:
        raise SweserveError(f"--expires-in {exc}") from None
    path = Path(args.pack).resolve()
    pack = load_pack(path)
    invite, token = _invites(args).create(args.candidate, str(path), pack.version, valid)
    from sweserve.cli.common import make_console

    print(f"{args.url.rstrip('/')}/i/{token}")  # alone on stdout, for scripts; the rest on stderr
    make_console(stderr=True).print(f"invite {invite.invite_id} for {args.candidate}: pack {pack.name}, "
                  f"{pack.time_budget_s // 60} minutes, link valid until {invite.expires_at:%Y-%m-%d %H:%M} UTC "
                  f"(one use)", markup=False, style="dim")
    return 0


def run_serve(args, console: Console) -> int:
    import uvicorn

    from sweserve.assess.server import SERVE_OPTIONS, AssessServer, find_node_modules
    from sweserve.cli.common import make_context
    from sweserve.dataset.taskstore import load_all

    node_modules = find_node_modules(args.node_modules)
    tasks = {b.task.task_id: b for b in load_all(Path(args.tasks))}
    with make_context(args, console) as ctx:
        server = AssessServer(ctx, tasks, _invites(args), Path(args.output), node_modules)
        console.print(f"serving assessments on http://{args.host}:{args.port} (results under "
                      f"{escape(args.output)})")
        uvicorn.run(server.app(), host=args.host, port=args.port, log_level="warning", **SERVE_OPTIONS)
    return 0


def run_report(args, console: Console) -> int:
    from sweserve.assess.packs import load_pack
    from sweserve.assess.scorecard import write_scorecards
    from sweserve.assess.server import find_node_modules

    pack = load_pack(Path(args.pack))
    results_dir = Path(args.output) / pack.name
    if not results_dir.is_dir():
        raise SweserveError(f"{results_dir}: no results for pack {pack.name} yet")
    try:
        node_modules = find_node_modules(args.node_modules)
    except SweserveError:
        node_modules = None
        console.print("[yellow]asciinema-player is not installed (make setup): replays will not play[/]")
    out = Path(args.out) if args.out else results_dir / "report"
    others, missing = _fit(args.results, console) if args.results else ([], [])
    cards = write_scorecards(pack, results_dir, out, node_modules, others, missing)
    for name, page in cards.pages.items():
        console.print(f"{name}: {escape(str(page))}")
    console.print(f"CSV: {escape(str(cards.csv))}")
    return 0
