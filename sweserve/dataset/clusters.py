"""Multi-PR tasks: a PR and its follow-ups grouped into one task.

A later PR joins an earlier one's cluster when, within ``window_days`` of the cluster's first PR, it
either names a member ("#101" in its title or message) or touches only non-test files the cluster already
touched (files most PRs touch, more than HOT_SHARE of them, do not count). Explicit groups
(``--group 101,104``) are taken as given.

The task's base is the parent of the first member, its head the last member. Commits between the members
that are not members would leak their changes into the combined diff, so a cluster is only accepted when no
such commit touches a file the cluster touches; then the diff base..head restricted to the cluster's files is
exactly the members' own changes applied in order. Otherwise the cluster is rejected with a reason, and the
members of a cluster found automatically are mined one by one instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from sweserve.dataset.gitio import CommitInfo

_REF = re.compile(r"(?<![\w/])#(\d+)\b")


@dataclass
class Unit:
    """What becomes one task: one PR, or a cluster of PRs in history order (oldest first)."""

    members: list  # list[PRCommit]; oldest first
    between: list[CommitInfo] = field(default_factory=list)  # non-member commits between first and last
    explicit: bool = False  # asked for with --group: not split up when rejected

    @property
    def first(self):
        return self.members[0]

    @property
    def last(self):
        return self.members[-1]

    @property
    def numbers(self) -> list[int]:
        return [m.number for m in self.members]


def referenced(pr) -> set[int]:
    """PR numbers a PR's title or message names, other than its own."""
    text = f"{pr.title}\n{pr.body}"
    return {int(n) for n in _REF.findall(text)} - {pr.number}


HOT_SHARE = 0.05  # a file more than this share of PRs touch (server_args.py, scheduler.py) says nothing


def hot_files(prs: list, is_test_path: Callable[[str], bool]) -> set[str]:
    """Non-test files so many PRs touch that sharing them does not make a PR another's follow-up."""
    counts: dict[str, int] = {}
    for pr in prs:
        for path in {p for c in pr.commit.changes or [] for p in c.paths if not is_test_path(p)}:
            counts[path] = counts.get(path, 0) + 1
    limit = max(2, HOT_SHARE * len(prs))
    return {p for p, n in counts.items() if n > limit}


def group(prs: list, is_test_path: Callable[[str], bool], window_days: float,
          explicit: list[list[int]] | None = None) -> list[list]:
    """Partition PRs (oldest first) into clusters, each oldest first; a PR in no cluster stands alone."""
    by_number = {p.number: p for p in prs}
    hot = hot_files(prs, is_test_path)
    taken: set[int] = set()
    clusters: list[list] = []
    for numbers in explicit or []:
        members = [by_number[n] for n in numbers if n in by_number and n not in taken]
        if members:
            members.sort(key=prs.index)
            clusters.append(members)
            taken.update(m.number for m in members)
    window = timedelta(days=window_days)
    open_clusters: list[tuple[list, set[str]]] = []
    for pr in prs:
        if pr.number in taken:
            continue
        code = {p for c in pr.commit.changes or [] for p in c.paths if not is_test_path(p)} - hot
        refs = referenced(pr)
        home = None
        for members, files in open_clusters:
            if pr.commit.committed_datetime - members[0].commit.committed_datetime > window:
                continue
            if refs & {m.number for m in members} or (code and code <= files):
                home = (members, files)
                break
        if home is None:
            open_clusters.append(([pr], set(code)))
        else:
            home[0].append(pr)
            # a follow-up found by reference may touch more files: they join the cluster's set
            home[1].update(code)
        taken.add(pr.number)
    clusters += [members for members, _ in open_clusters]
    clusters.sort(key=lambda ms: prs.index(ms[0]))
    return clusters


def plan(clusters: list[list], history: list[CommitInfo], explicit: Sequence[list[int]] = ()) -> list[Unit]:
    """Units for the clusters, with the non-member commits between each cluster's first and last member."""
    position = {c.hexsha: i for i, c in enumerate(history)}  # history oldest first
    asked = [set(g) for g in explicit]
    units = []
    for members in clusters:
        if len(members) == 1:
            units.append(Unit(members))
            continue
        lo, hi = position[members[0].commit.hexsha], position[members[-1].commit.hexsha]
        own = {m.commit.hexsha for m in members}
        numbers = {m.number for m in members}
        units.append(Unit(members, [c for c in history[lo:hi + 1] if c.hexsha not in own],
                          explicit=any(numbers <= g for g in asked)))
    return units


def leak(unit: Unit, paths: set[str]) -> str | None:
    """Why a non-member commit between the members would leak into the combined change, or None."""
    for commit in unit.between:
        if commit.error:
            return f"commit {commit.hexsha[:12]} between the members cannot be read: {commit.error}"
        touched = {p for c in commit.changes or [] for p in c.paths} & paths
        if touched:
            subject = commit.message.strip().splitlines()[0][:80] if commit.message.strip() else ""
            return f"commit {commit.hexsha[:12]} ({subject}) between the members also changes {sorted(touched)[0]}"
    return None
