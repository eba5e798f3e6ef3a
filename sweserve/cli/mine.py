"""`sweserve mine`: turn a clone's merged PRs into candidate tasks."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def register(sub, common) -> None:
    m = sub.add_parser("mine", parents=[common], help="turn merged PRs of a clone into candidate tasks")
    m.add_argument("--repo", required=True, help="path of a local git clone")
    m.add_argument("--profile", default="sglang", help="repo profile: a name (project's .sweserve/profiles, then built-in) or a JSON file (default: sglang)")
    m.add_argument("--rev", default="HEAD", help="history to walk (default: HEAD)")
    m.add_argument("--since", default=None, help="only commits after this date (git --since)")
    m.add_argument("--limit", type=int, default=None, help="stop after N PR candidates")
    m.add_argument("--json", action="store_true", help="print the mining report as JSON")
    m.set_defaults(func=run)


def run(args, console: Console) -> int:
    from sweserve.config_search import ConfigSearch
    from sweserve.dataset.clones import remember_clone
    from sweserve.dataset.mining import mine, open_repo
    from sweserve.dataset.profiles import keep_profile_file, load_profile

    search = ConfigSearch.for_project(args.state_dir)
    profile = load_profile(args.profile, search)
    kept = keep_profile_file(args.profile, search)
    if kept:
        console.print(f"profile {profile.name} kept as {escape(str(kept))}, so later commands find it by name")
    repo_path = Path(args.repo)
    repo = open_repo(repo_path)
    tasks_dir = Path(args.tasks)
    with console.status("scanning history …") as status:
        report = mine(repo, profile, tasks_dir, rev=args.rev, since=args.since, limit=args.limit,
                      on_progress=lambda r: status.update(f"scanned {r.scanned} commits, {r.candidates} PRs"))
    remember_clone(Path(args.state_dir), profile.repo, repo_path)
    if args.json:
        print(report.model_dump_json(indent=2))
        return 0
    console.print(f"[bold]{escape(profile.repo)}[/]: scanned {report.scanned} commits, {report.candidates} PR candidates, "
                  f"wrote {len(report.written)} tasks, {len(report.existing)} already present, "
                  f"rejected {sum(len(v) for v in report.rejected.values())} in {report.duration_s:.2f}s")
    if report.rejected:
        table = Table("reason", "count", "examples")
        for reason, prs in sorted(report.rejected.items()):
            table.add_row(escape(str(reason)), str(len(prs)), escape("; ".join(prs[:3])))
        console.print(table)
    return 0
