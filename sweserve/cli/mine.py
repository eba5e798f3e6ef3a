"""`sweserve mine`: turn a clone's merged PRs into candidate tasks."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sweserve.errors import SweserveError


def register(sub, common) -> None:
    m = sub.add_parser("mine", parents=[common], help="turn merged PRs of a clone into candidate tasks")
    m.add_argument("--repo", required=True, help="path of a local git clone")
    m.add_argument("--profile", default="sglang", help="repo profile: a name (project's .sweserve/profiles, then built-in) or a JSON file (default: sglang)")
    m.add_argument("--rev", default="HEAD", help="history to walk (default: HEAD)")
    m.add_argument("--since", default=None, help="only commits after this date (git --since)")
    m.add_argument("--limit", type=int, default=None, help="stop after N PR candidates")
    m.add_argument("--clusters", action="store_true",
                   help="group a PR with its follow-ups (same non-test files, or naming it as #N) into one task")
    m.add_argument("--cluster-window-days", type=float, default=14, metavar="DAYS",
                   help="follow-ups count within this many days of the first PR (default: 14)")
    m.add_argument("--group", action="append", default=[], metavar="N,M,…",
                   help="these PRs form one task (repeatable; implies --clusters)")
    m.add_argument("--lock-when", choices=["mine", "build"], default=None,
                   help="profiles with lock: resolve locks now ('mine'), or record their inputs and resolve each "
                        "at the first image build or `sweserve locks resolve` ('build'; default: the profile's)")
    m.add_argument("--json", action="store_true", help="print the mining report as JSON")
    m.add_argument("--github", action="store_true",
                   help="take statements from GitHub (PR description, linked issues); token from GITHUB_TOKEN, "
                        "answers cached under the state dir so mining again is offline")
    m.add_argument("--github-url", default=None,
                   help="GitHub API base URL, e.g. https://ghe.example.com/api/v3 "
                        "(default: $SWESERVE_GITHUB_URL or https://api.github.com)")
    m.add_argument("--rewrite-with", default=None, metavar="AGENT_CONFIG",
                   help="rewrite each statement into a behavioural spec with the model of this `kind: api` agent "
                        "config (path or name); a rewrite that leaks the oracle or test names is discarded")
    m.set_defaults(func=run)


def run(args, console: Console) -> int:
    from sweserve.config_search import ConfigSearch
    from sweserve.dataset.clones import remember_clone
    from sweserve.dataset.mining import ClusterOptions, mine, open_repo
    from sweserve.dataset.profiles import keep_profile_file, load_profile

    search = ConfigSearch.for_project(args.state_dir)
    profile = load_profile(args.profile, search)
    kept = keep_profile_file(args.profile, search)
    if kept:
        console.print(f"profile {profile.name} kept as {escape(str(kept))}, so later commands find it by name")
    repo_path = Path(args.repo)
    repo = open_repo(repo_path)
    tasks_dir = Path(args.tasks)
    statements = statement_maker(args, profile.repo, console)
    clusters = None
    if args.clusters or args.group:
        clusters = ClusterOptions(window_days=args.cluster_window_days, groups=[_group(g) for g in args.group])
    with console.status("scanning history …") as status:
        report = mine(repo, profile, tasks_dir, rev=args.rev, since=args.since, limit=args.limit, clusters=clusters,
                      on_progress=lambda r: status.update(f"scanned {r.scanned} commits, {r.candidates} PRs"),
                      statements=statements, lock_cache=Path(args.state_dir) / "locks", lock_when=args.lock_when)
    remember_clone(Path(args.state_dir), profile.repo, repo_path)
    from sweserve.dataset.funnel import save_mine_record

    save_mine_record(tasks_dir, profile.repo, report.candidates,
                     report.written + report.existing + report.updated + report.replaced, report.rejected)
    if args.json:
        print(report.model_dump_json(indent=2))
        return 0
    console.print(f"[bold]{escape(profile.repo)}[/]: scanned {report.scanned} commits, {report.candidates} PR candidates, "
                  f"wrote {len(report.written)} tasks, {len(report.existing)} already present, "
                  f"{len(report.updated) + len(report.replaced)} updated, "
                  f"rejected {sum(len(v) for v in report.rejected.values())} in {report.duration_s:.2f}s")
    if report.locks is not None:
        ls = report.locks
        console.print(f"locks: {ls.shared} tasks on their epoch's shared lock, {ls.own} on their own; "
                      f"{ls.resolved} resolved, {ls.cached} from the cache, {ls.fallback} fell back to the epoch's "
                      f"cutoff, {ls.unpinned} unpinned, {ls.pending} pending (resolved at first build), "
                      f"in {ls.duration_s:.1f}s")
    if report.statement_sources:
        console.print("statements from: " + ", ".join(f"{k} {v}" for k, v in sorted(report.statement_sources.items())))
    for note in report.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    if report.replaced:
        console.print(f"patches changed, validation dropped: {', '.join(report.replaced)}")
    if report.rejected:
        table = Table("reason", "count", "examples")
        for reason, prs in sorted(report.rejected.items()):
            table.add_row(escape(str(reason)), str(len(prs)), escape("; ".join(prs[:3])))
        console.print(table)
    from sweserve.cli.tasks import funnel_of, print_funnel

    print_funnel(funnel_of(tasks_dir, args.state_dir), console, details=False)
    return 0


def _group(text: str) -> list[int]:
    try:
        numbers = [int(n.strip().lstrip("#")) for n in text.split(",") if n.strip()]
    except ValueError:
        numbers = []
    if len(numbers) < 2:
        raise SweserveError(f"--group {text}: expected two or more PR numbers, e.g. 101,104")
    return numbers


def statement_maker(args, repo: str, console: Console):
    """GitHub client and rewriter as the flags ask; without them statements come from commit messages."""
    from sweserve.agents.config import find_agent_config
    from sweserve.config_search import ConfigSearch
    from sweserve.dataset.github import GitHubClient
    from sweserve.dataset.rewrite import Rewriter
    from sweserve.dataset.statement import StatementMaker
    from sweserve.errors import SweserveError

    github = None
    if args.github or args.github_url:
        github = GitHubClient.from_env(Path(args.state_dir), base_url=args.github_url)  # waits are logged
        if github.token is None:
            console.print("[yellow]GITHUB_TOKEN is not set: unauthenticated requests (60 an hour)[/]")
    rewriter = None
    if args.rewrite_with:
        path = find_agent_config(args.rewrite_with, ConfigSearch.for_project(args.state_dir))
        if path is None:
            raise SweserveError(f"--rewrite-with {args.rewrite_with}: no such agent config")
        rewriter = Rewriter.from_config(path)
    return StatementMaker(repo, github=github, rewriter=rewriter)
