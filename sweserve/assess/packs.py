"""Assessment packs: N ready tasks chosen for a time budget and a difficulty band, written as YAML.

A pack names each task with its content hash (`TaskBundle.content_hash`), and the pack's version is the hash of
those: a pack graded today and re-graded later means the same thing, and a task that changed since the pack was
made is refused (`check_pack`) instead of silently grading a candidate on something else.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import yaml
from pydantic import Field

from sweserve.errors import SweserveError
from sweserve.loading import load_model
from sweserve.models import Family, Strict, TaskBundle

DEFAULT_BUDGET_S = 30 * 60  # an uncalibrated task
MIN_BUDGET_S, MAX_BUDGET_S = 10 * 60, 120 * 60


def task_budget_s(difficulty: float | None) -> int:
    """A task's time budget from its calibrated difficulty (logits; 0 is an average task): 30 minutes at 0,
    doubling every 1.5 logits, in whole 5 minutes between 10 and 120; 30 minutes when uncalibrated."""
    if difficulty is None or not math.isfinite(difficulty):
        return DEFAULT_BUDGET_S
    seconds = DEFAULT_BUDGET_S * 2 ** (difficulty / 1.5)
    return int(min(MAX_BUDGET_S, max(MIN_BUDGET_S, round(seconds / 300) * 300)))


class PackTask(Strict):
    task_id: str
    content_hash: str = Field(pattern=r"^[0-9a-f]{16}$")
    family: Family
    time_budget_s: int = Field(gt=0)
    difficulty: float | None = None


class Pack(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    version: str = Field(pattern=r"^[0-9a-f]{16}$", description="hash of the tasks' ids and content hashes")
    tasks: list[PackTask] = Field(min_length=1)

    @property
    def time_budget_s(self) -> int:
        return sum(t.time_budget_s for t in self.tasks)


def pack_version(tasks: list[PackTask]) -> str:
    text = "\n".join(f"{t.task_id}:{t.content_hash}" for t in tasks)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def choose_pack(name: str, bundles: list[TaskBundle], n: int, total_s: int, families: list[str] | None = None,
                band: tuple[float, float] | None = None, difficulty: dict[str, float] | None = None) -> Pack:
    """N ready tasks of the given families whose difficulty is in the band and whose budgets fit total_s.

    Families are taken in turn (a pack spreads over them), easier tasks first within each; the choice is
    deterministic. An uncalibrated task counts as difficulty 0 for the band. SweserveError when N do not fit."""
    difficulty = difficulty or {}
    pool: dict[str, list[TaskBundle]] = {}
    for b in sorted(bundles, key=lambda b: (difficulty.get(b.task.task_id, 0.0), b.task.task_id)):
        t = b.task
        if not t.ready or (families and t.family not in families):
            continue
        d = difficulty.get(t.task_id, 0.0)
        if band and not band[0] <= d <= band[1]:
            continue
        pool.setdefault(t.family, []).append(b)
    chosen: list[PackTask] = []
    used = 0
    order = sorted(pool)
    while len(chosen) < n and any(pool.values()):
        for fam in order:
            if len(chosen) >= n or not pool[fam]:
                continue
            b = pool[fam].pop(0)
            known = difficulty.get(b.task.task_id)
            budget = task_budget_s(known)
            if used + budget > total_s:
                continue
            used += budget
            chosen.append(PackTask(task_id=b.task.task_id, content_hash=b.content_hash(), family=b.task.family,
                                   time_budget_s=budget, difficulty=None if known is None else round(known, 3)))
    if len(chosen) < n:
        raise SweserveError(f"only {len(chosen)} ready task(s) fit the families, difficulty band and "
                            f"{total_s // 60} minutes; asked for {n}")
    return Pack(name=name, version=pack_version(chosen), tasks=chosen)


def save_pack(path: Path, pack: Pack) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(pack.model_dump(mode="json"), sort_keys=False))


def load_pack(path: Path) -> Pack:
    pack = load_model(path, Pack, "YAML", "pack file")
    if pack.version != pack_version(pack.tasks):
        raise SweserveError(f"{path}: version {pack.version} does not match its tasks (edited by hand?)")
    return pack


def check_pack(pack: Pack, bundles: dict[str, TaskBundle]) -> list[TaskBundle]:
    """The pack's tasks as they are now, in order; SweserveError if one is missing or changed since the pack."""
    out = []
    for t in pack.tasks:
        b = bundles.get(t.task_id)
        if b is None:
            raise SweserveError(f"pack {pack.name}: task {t.task_id} is not in the tasks folder")
        if b.content_hash() != t.content_hash:
            raise SweserveError(f"pack {pack.name}: task {t.task_id} changed since the pack was made "
                                f"({t.content_hash} → {b.content_hash()}); make a new pack")
        out.append(b)
    return out
