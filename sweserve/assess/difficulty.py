"""Difficulty calibration: a Rasch (1PL) model fitted to every graded attempt, agents' and humans' alike.

P(attempt of person p on task i resolves) = sigmoid(ability_p − difficulty_i), every attempt an observation.
The fit is a joint MAP estimate with a weak normal prior on both (sd `PRIOR_SD` logits), which keeps a person
or task that always (or never) succeeds finite and pins the scale's origin at 0; Newton's method on the exact
Hessian, whose inverse gives the standard errors. Small enough to be checked here (tests recover known
parameters from simulated data). The IRT packages were weighed: girth's estimators take a complete
persons × items matrix with one response a cell and give standard errors only by bootstrap, and py-irt fits
by variational inference on torch; results here are sparse (each agent or candidate tries a few tasks) with
repeated attempts, which the likelihood above takes as they are.

Counted: resolved (1) and failed, patch_failed, tampered (0). Errors and skips say nothing of the task. A
selected attempt with no result (`missing` in a report: a run killed, never resumed) counts 0, as a report counts
it, where the caller knows the selection (`report --difficulty` reads the run manifests).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from rich.console import Console
from rich.table import Table

from sweserve.errors import OWN_ERRORS
from sweserve.models import RunResult

PRIOR_SD = 3.0
GRADED = {"resolved": 1, "failed": 0, "patch_failed": 0, "tampered": 0}


@dataclass
class RaschFit:
    ability: dict[str, float]
    ability_se: dict[str, float]
    difficulty: dict[str, float]
    difficulty_se: dict[str, float]
    iterations: int


def fit_rasch(responses: list[tuple[str, str, int]], prior_sd: float = PRIOR_SD, tol: float = 1e-8,
              max_iter: int = 100) -> RaschFit:
    """(person, task, 0/1) observations → abilities and difficulties (logits) with standard errors."""
    persons = sorted({p for p, _, _ in responses})
    items = sorted({i for _, i, _ in responses})
    pi = {p: k for k, p in enumerate(persons)}
    ii = {i: len(persons) + k for k, i in enumerate(items)}
    n = len(persons) + len(items)
    if not responses:
        return RaschFit({}, {}, {}, {}, 0)
    rows = np.arange(len(responses))
    design = np.zeros((len(responses), n))
    design[rows, [pi[p] for p, _, _ in responses]] = 1.0
    design[rows, [ii[i] for _, i, _ in responses]] = -1.0
    y = np.array([float(v) for _, _, v in responses])
    x = np.zeros(n)
    precision = np.eye(n) / prior_sd**2
    it = 0
    while it < max_iter:
        it += 1
        prob = 1.0 / (1.0 + np.exp(-(design @ x)))
        grad = design.T @ (y - prob) - precision @ x
        info = design.T @ (design * (prob * (1 - prob))[:, None]) + precision
        step = np.linalg.solve(info, grad)
        x += step
        if np.max(np.abs(step)) < tol:
            break
    prob = 1.0 / (1.0 + np.exp(-(design @ x)))
    info = design.T @ (design * (prob * (1 - prob))[:, None]) + precision
    se = np.sqrt(np.diag(np.linalg.inv(info)))
    return RaschFit(
        ability={p: float(x[pi[p]]) for p in persons}, ability_se={p: float(se[pi[p]]) for p in persons},
        difficulty={i: float(x[ii[i]]) for i in items}, difficulty_se={i: float(se[ii[i]]) for i in items},
        iterations=it)


def is_human(agent: str) -> bool:
    return agent.startswith("human-")


def response(r: RunResult) -> int | None:
    """1 solved, 0 not, None where the result says nothing of the task (skipped, the machinery's error). An error
    the candidate's own work caused (`OWN_ERRORS`: a limit it broke) is a 0: left out, a failure a candidate
    turns into one would leave its ability estimate (red team 12a, R12a-2)."""
    if r.status in GRADED:
        return GRADED[r.status]
    return 0 if r.status == "error" and r.error_kind in OWN_ERRORS else None


def responses_of(results: list[RunResult]) -> list[tuple[str, str, int]]:
    return [(r.agent, r.task_id, y) for r in results if (y := response(r)) is not None]


@dataclass
class TaskDifficulty:
    task_id: str
    family: str
    attempts: int
    solved: int
    humans: int  # attempts by human candidates
    median_solve_s: float | None
    difficulty: float
    se: float
    missing: int = 0  # of the attempts, selected ones with no result (counted unsolved)

    @property
    def solve_rate(self) -> float:
        return self.solved / self.attempts if self.attempts else 0.0


@dataclass
class Calibration:
    fit: RaschFit
    tasks: list[TaskDifficulty]

    def difficulty(self) -> dict[str, float]:
        return dict(self.fit.difficulty)


def solve_seconds(r: RunResult) -> float:
    return r.agent_run.wall_s if r.agent_run and r.agent_run.wall_s else r.duration_s


def calibrate(results: list[RunResult], missing: Sequence[tuple[str, str, str]] = ()) -> Calibration:
    """The fit, and per task its attempts, solve rate and median time to solve (the candidate's phase).
    `missing`: (agent, task, family) of each selected attempt with no result, an unsolved attempt: left out, an
    operator who killed a run going badly had the fit's ability of its agent as if it had solved all it was given
    (red team 22b, R22b-2)."""
    graded = [r for r in results if response(r) is not None]
    fit = fit_rasch(responses_of(graded) + [(agent, task_id, 0) for agent, task_id, _ in missing])
    rows = []
    for task_id in sorted(fit.difficulty):
        mine = [r for r in graded if r.task_id == task_id]
        absent = [m for m in missing if m[1] == task_id]
        solved = [solve_seconds(r) for r in mine if r.status == "resolved"]
        rows.append(TaskDifficulty(task_id, mine[0].family if mine else absent[0][2], len(mine) + len(absent),
                                   len(solved), sum(is_human(r.agent) for r in mine) + sum(is_human(m[0]) for m in absent),
                                   statistics.median(solved) if solved else None,
                                   fit.difficulty[task_id], fit.difficulty_se[task_id], len(absent)))
    return Calibration(fit, rows)


def render_difficulty(cal: Calibration, console: Console) -> None:
    if not cal.tasks:
        console.print("no graded results to calibrate from")
        return
    table = Table(title="task difficulty (Rasch, logits; higher is harder)")
    for col in ("task", "family", "attempts", "human", "solve rate", "median time to solve", "difficulty", "± se"):
        table.add_column(col, justify="left" if col in ("task", "family") else "right")
    for t in sorted(cal.tasks, key=lambda t: -t.difficulty):
        med = "—" if t.median_solve_s is None else f"{t.median_solve_s / 60:.1f} min"
        table.add_row(t.task_id, t.family, f"{t.attempts} ({t.missing} missing)" if t.missing else str(t.attempts),
                      str(t.humans), f"{t.solve_rate:.0%}", med,
                      f"{t.difficulty:+.2f}", f"{t.se:.2f}")
    console.print(table)
    people = Table(title="abilities (agents and candidates)")
    for col in ("agent / candidate", "kind", "ability", "± se"):
        people.add_column(col, justify="left" if col in ("agent / candidate", "kind") else "right")
    for name, theta in sorted(cal.fit.ability.items(), key=lambda kv: -kv[1]):
        people.add_row(name, "human" if is_human(name) else "agent", f"{theta:+.2f}", f"{cal.fit.ability_se[name]:.2f}")
    console.print(people)


def difficulty_json(cal: Calibration) -> dict:
    return {"tasks": [{**t.__dict__, "solve_rate": round(t.solve_rate, 4)} for t in cal.tasks],
            "abilities": [{"name": n, "human": is_human(n), "ability": a, "se": cal.fit.ability_se[n]}
                          for n, a in cal.fit.ability.items()]}
