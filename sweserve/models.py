"""Pydantic models at the boundaries: tasks on disk, validation records, run results."""

from __future__ import annotations

import hashlib
import json
import unicodedata
from datetime import datetime, timezone
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, field_validator, model_validator

from sweserve.errors import ErrorKind

Family = Literal[
    "model-support",
    "decoding",
    "distributed",
    "serving-api",
    "kernels-quant",
    "scheduling-memory",
]
FAMILIES: tuple[str, ...] = get_args(Family)

# What a single test did in one run: pytest's outcomes, plus "missing" when it never ran.
Outcome = Literal["passed", "failed", "error", "skipped", "missing"]
OUTCOMES: tuple[str, ...] = get_args(Outcome)

# tampered: the verifier caught outcomes being forged (a canary), or the tamper scan flagged the submission
# and the profile fails on flags; never resolved.
Status = Literal["resolved", "failed", "patch_failed", "error", "skipped", "tampered"]
STATUSES: tuple[str, ...] = get_args(Status)

SHA = r"^[0-9a-f]{40}$"


def now() -> datetime:
    return datetime.now(timezone.utc)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Resources(Strict):
    gpus: int = Field(0, ge=0)
    gpu_memory_gb: float = Field(0, ge=0)
    hardware: str | None = Field(None, description="GPU class the tests were written for (small, large, h100, "
                                 "h200, b200, …), from the repo's CI registration")
    cpus: float = Field(2, gt=0)
    memory_gb: float = Field(4, gt=0)
    timeout_s: int = Field(900, gt=0, description="wall-clock limit for the candidate phase")
    needs_accelerator: str | None = Field(None, description="'gpu' or 'tpu' when validation saw tests that need one")
    test_timeout_s: int = Field(600, gt=0, description="wall-clock limit for one hidden-test run")
    disk_gb: float = Field(10, gt=0, description="most a sandbox may write: per file, and in all (then stopped)")


class TestSpec(Strict):
    __test__ = False  # not a pytest class

    runner: Literal["pytest", "unittest"] = "pytest"
    files: list[str] = Field(min_length=1, description="test files run as the hidden tests")
    workdir: str = "."
    env: dict[str, str] = Field(default_factory=dict)


SignalName = Literal["structure_only", "relax_only_tests", "cosmetic_oracle"]
SIGNALS: tuple[str, ...] = get_args(SignalName)


class SignalCheck(Strict):
    """A control beyond the null submission (`evaluation/signals.py`): when it fires, passing the hidden tests
    says little about the behaviour being built, and the task is not ready."""

    name: SignalName
    fired: bool = False
    ran: bool = Field(True, description="false when the check could not run (e.g. no clone to read): it does not "
                      "fire, and detail says why")
    detail: str = ""


class Twin(Strict):
    """A mutation twin of a graded test: the test's own text with one literal of its checks replaced.

    `site` indexes the literals `twins.sites` finds in the test (expected values, bounds, tolerances), `value`
    is the replacement's source text. A flip twin (a test with no numeric site: `twins.flips`) has a `site`
    past those and a `value` naming the checks it writes the other way (`flip 0 2`); a raises twin (neither a
    numeric site nor a flip: `twins.raises_checks`) one past the flips and a `value` naming the check and the
    class it expects instead (`raises 0 ValueError`). Kept only when it failed in every run at base and with the
    oracle."""

    test: str = Field(description="the graded test's id, without parameters")
    site: int = Field(ge=0)
    value: str


TwinOrder = Literal["first", "last"]  # where validation's extreme orders put each graded test in its group
TWIN_ORDERS: tuple[TwinOrder, ...] = ("first", "last")


class ValidationRecord(Strict):
    status: Literal["valid", "rejected"]
    reason: str | None = None
    category: str | None = Field(None, description="the rejection's category (RejectionCategory), for the funnel")
    validated_at: datetime = Field(default_factory=now)
    runs: int = Field(ge=1)
    flaky: list[str] = Field(default_factory=list)
    accelerator_tests: dict[str, str] = Field(default_factory=dict, description="tests skipped or failing for want of a GPU/TPU, with why")
    before: dict[str, Outcome] = Field(default_factory=dict, description="base + tests.patch")
    after: dict[str, Outcome] = Field(default_factory=dict, description="base + oracle + tests.patch")
    image: str = Field("", description="task image the tests ran in")
    signals: list[SignalCheck] | None = Field(None, description="the signal checks of a valid task; None: not run")
    logs: str | None = Field(None, description="folder holding each run's test output (null-N.log, oracle-N.log)")
    twinless: list[str] = Field(default_factory=list, description="graded tests no twin could be kept for")
    forge_odds: float | None = Field(None, ge=0, le=1, description="odds that code in a module the tests import "
                                     "passes every FAIL_TO_PASS test by guessing among its twins (evaluation/guard.py); "
                                     "None: not measured")
    max_forge_odds: float | None = Field(None, gt=0, le=1, description="the profile's bound on forge_odds for "
                                         "readiness, as validation read it")
    forge_odds_instruction: str | None = Field(None, description="sha256 of the instruction forge_odds was measured "
                                               "with (its numbers are what a forger reads); another instruction "
                                               "makes the odds stale")
    runner_only: list[str] = Field(default_factory=list, description="tests that pass with the oracle under plain "
                                   "pytest in the image and fail only under sweserve's runner")
    twin_orders: list[TwinOrder] = Field(default_factory=list, description="the orders validation's oracle twin "
                                         "runs put each graded test in its group (every test first, then last): a "
                                         "group is kept only where the oracle passed in each; empty: one drawn "
                                         "order (validated before red team 8's R8-8), so a kept group may hold a "
                                         "test that is not idempotent")


StatementSource = Literal["issue", "pr_description", "commit_message", "title_only", "rewritten"]
InterfaceKind = Literal["module", "class", "exception", "function", "method", "attribute", "keyword", "flag", "changed"]


# the markers around the "New interfaces" section lint writes into an instruction (`dataset.interface`): here, as
# the instruction's format, so a reviewer's page (reporting) can leave them out without reaching into dataset/
OPEN_MARK = "<!-- sweserve:interface -->"
CLOSE_MARK = "<!-- /sweserve:interface -->"


class InterfaceItem(Strict):
    """A name the hidden tests use that is missing at base_commit and that the oracle introduces, or (kind
    'changed') an existing callable or attribute whose signature or type the oracle changes and a test relies on."""

    kind: InterfaceKind
    name: str = Field(description="dotted import path (module.Class.method); for a keyword, its callable; for a flag, '--flag'")
    keyword: str | None = Field(None, description="the new keyword argument, for kind 'keyword'")
    signature: str = Field("", description="as the oracle defines it: 'name(args) -> ret', 'class Name(Base)'")
    doc: str = Field("", description="first line of its docstring (a flag's help text)")
    path: str = Field("", description="file defining it after the oracle")
    was: str = Field("", description="for kind 'changed': its signature or type at base_commit")
    change: str = Field("", description="for kind 'changed': what changed, in words")


class EnvironmentLock(Strict):
    """A task's requirements resolved as of its PR's date: the env image installs exactly these pins."""

    resolved_at: datetime = Field(description="uv pip compile --exclude-newer: the PR's merge date, or the end of "
                                  "its lock epoch when the lock is shared")
    python: str = Field(description="the Python the pins were resolved for")
    packages: list[str] = Field(default_factory=list, description="what was resolved: the profile's packages, then "
                                "the task's declared requirements")
    requirements: list[str] = Field(default_factory=list, description="pinned requirements, one per entry")
    left_out: list[str] = Field(default_factory=list, description="declared requirements the sandbox build "
                                "cannot install ('requirement: why'), left out of the lock")


class LockRequest(Strict):
    """What a task's lock is resolved from, recorded by `mine`: the same inputs always give the same pins (the
    index only grows before the cutoff), so a task folder copied anywhere can resolve its lock again."""

    key: str = Field(description="sha256 of the inputs: the lock's file name in the cache (<state>/locks)")
    packages: list[str] = Field(description="what is resolved: the profile's packages, then the declared requirements")
    python: str
    platform: str = Field(description="uv's --python-platform: the wheels the base image's glibc loads")
    index_options: list[str] = Field(default_factory=list)
    cutoff: datetime = Field(description="uv pip compile --exclude-newer: the epoch's end, or the PR's merge")
    fallback: datetime | None = Field(None, description="the epoch's cutoff, tried when a lock as of the PR's own "
                                      "merge fails (a PR that changes a dependency file)")
    unpinned: str | None = Field(None, description="why no lock could be resolved (uv's final answer): the env "
                                 "image installs the declared requirements unpinned")


class StatementPart(Strict):
    """One piece of a source text and what became of it in the statement."""

    source: str = Field(description="where it was: 'issue o/r#N', 'PR description', 'commit message', 'patches'")
    section: str = Field("", description="the heading it sat under")
    kept: bool
    why: str = Field(description="the reason it was kept or cut")
    excerpt: str = Field("", description="its first words")


class EnvSpec(Strict):
    """Everything one env image is built from, computed by `dataset/` (`dataset/image_spec.py`) from a profile and
    a task's requirements: `environment/` builds from this alone and never reads a profile."""

    profile: str = Field(description="the profile's name: the env image's tag starts with it")
    base_image: str
    python: str = Field(description="least Python the env image must have")
    requirements: str = Field(description="requirements.txt: index options first, then the pins (or the declared "
                              "requirements the build can install), one a line")
    left_out: list[str] = Field(default_factory=list, description="requirements the build cannot install, with why")
    index_url: str | None = None
    constraints: list[str] = Field(default_factory=list, description="lines of a pip constraints file")
    over: EnvSpec | None = Field(None, description="the env this one is a thin layer over (an era's layer over "
                                 "the profile's first layer); None: built whole from the base image")


class ImageSpec(Strict):
    """Everything a task image is built from: its env (and the shared layer under it), the repository at the base
    commit, the profile's install steps, the test env and how much git history the image keeps."""

    task_id: str
    repo: str
    base_commit: str
    env: EnvSpec
    shared: EnvSpec | None = Field(None, description="the layer of what all the profile's tasks declare, which env "
                                   "is built over as a thin layer (None: env is built whole)")
    install: list[str] = Field(default_factory=list, description="shell commands run in /testbed at base_commit")
    test_env: dict[str, str] = Field(default_factory=dict)
    history: Literal["none", "ancestors"] = "ancestors"
    leave_out: list[str] = Field(default_factory=list, description="files of the base tree git cannot read, left "
                                 "out of the image (the task's `unreadable`; no hidden test needs them)")


class QualityRecord(Strict):
    """Whether a task can be solved fairly from its statement: where the statement came from, and the checks."""

    statement_source: StatementSource = "title_only"
    statement_chars: int = Field(0, ge=0)
    notes: list[str] = Field(default_factory=list, description="what mining or lint noticed, one line each")
    linked_issues: list[str] = Field(default_factory=list, description="owner/repo#N the PR links to (from GitHub)")
    labels: list[str] = Field(default_factory=list, description="the PR's GitHub labels (with --github)")
    rewritten_from: str | None = Field(None, description="the source a rewritten statement was made from")
    parts: list[StatementPart] = Field(default_factory=list, description="why each part of the source texts was "
                                       "kept in the statement or cut")
    requirements: list[str] = Field(default_factory=list, description="facts the tests need that the problem "
                                    "text does not state, drawn from the oracle's public surface")
    statement_eligible: bool = Field(True, description="the statement can make the task ready: not the title "
                                     "alone, not shorter than the profile's minimum, no leak at mining")
    statement_blockers: list[str] = Field(default_factory=list, description="why statement_eligible is false")
    interface_from: Literal["fail_to_pass", "tests_patch"] | None = Field(
        None, description="which tests the interface was read from: FAIL_TO_PASS, or every test of tests.patch")
    interface: list[InterfaceItem] = Field(default_factory=list, description="written into instruction.md too")
    leaks: list[str] = Field(default_factory=list, description="statement text that gives away the oracle or hidden tests")
    unfair: dict[str, list[str]] = Field(default_factory=dict, description="test id -> names it needs that are "
                                         "neither at base nor in the instruction")
    vocabulary: list[str] = Field(default_factory=list, description="words the hidden tests use that only the "
                                  "oracle adds (not at base, not defined by the tests) and the instruction never "
                                  "mentions: identifiers, flags, environment variables")
    findings: list[str] = Field(default_factory=list, description="why lint fails this task, one line each")

    @property
    def passed(self) -> bool:
        return not self.findings


ReadinessKind = Literal["not_validated", "rejected", "lint", "family_unsure", "signal", "guard", "review"]


class Review(Strict):
    """One reviewer's blind judgement of a task (SWE-bench Verified style: the statement first, then the tests
    and the oracle; `sweserve tasks review`)."""

    task: str = Field(description="the task's id")
    reviewer: str = Field(min_length=1, description="who judged it; a later verdict of the same reviewer replaces it")
    predicted_before_tests: str = Field("", description="what the reviewer would build, written before reading the "
                                        "tests and the oracle")
    sufficient: int = Field(ge=0, le=3, description="0: the tests need what the statement does not give; 1: only "
                            "with lucky guesses; 2: with reasonable inference; 3: clearly")
    leak: bool = Field(description="the statement prescribes the fix (code, a file-by-file recipe)")
    fair_tests: bool = Field(description="the tests check the behaviour asked for, not layout, names or a threshold")
    family_ok: bool
    family_should_be: str = ""
    verdict: Literal["GOOD", "BAD"]
    reason: str = ""
    at: datetime = Field(default_factory=now, description="when; a time without a zone is read as UTC")

    @field_validator("at")
    @classmethod
    def _aware(cls, at: datetime) -> datetime:
        # one naive time beside the aware ones now() stamps made sorting reviews by time raise (R23f-1)
        return at if at.tzinfo is not None else at.replace(tzinfo=timezone.utc)

    @property
    def who(self) -> str:
        """The reviewer as one person: "Alice", "alice " and "ALICE" are one vote, not three (R23f-2); so is
        "Al\u200bice": a character nobody sees (format and control characters, category C) is no part of a name
        (R23h-3)."""
        name = unicodedata.normalize("NFKC", self.reviewer).casefold()
        return " ".join("".join(c for c in name if c.isspace() or unicodedata.category(c)[0] != "C").split())

    @model_validator(mode="after")
    def _consistent(self) -> "Review":
        if not self.who:
            raise ValueError("reviewer: a name, not blanks")
        good = self.sufficient >= 2 and not self.leak and self.fair_tests and self.family_ok
        if (self.verdict == "GOOD") != good:
            raise ValueError(f"verdict {self.verdict} contradicts the rubric (GOOD exactly when sufficient >= 2, no "
                             "leak, fair tests and the family right)")
        return self


class ReadinessReason(Strict):
    """One reason a task is not ready: its kind, a key the funnel counts it by, and a line saying why."""

    kind: ReadinessKind
    key: str = Field(description="what the funnel counts: e.g. 'rejected:no_fail_to_pass', 'signal:structure_only'")
    detail: str = ""


class Readiness(Strict):
    """Whether a demanding reviewer would keep the task: valid, lint clean, family confident, every signal check
    passed (`dataset/readiness.py`). Only ready tasks are run, exported and reported by default."""

    ready: bool
    reasons: list[ReadinessReason] = Field(default_factory=list, description="why not, one per failed check")
    checks: dict[str, bool] = Field(default_factory=dict, description="valid, lint, family, signals, guarded "
                                   "(forge odds measured and within the profile's bound)")
    family_from: str = Field("", description="which recorded verdict the family check read")
    assessed_at: datetime = Field(default_factory=now)


class Task(Strict):
    task_id: str = Field(pattern=r"^[A-Za-z0-9_.-]+__[A-Za-z0-9_.-]+-\d+$")
    repo: str = Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
    profile: str
    pr_number: int = Field(gt=0)
    prs: list[int] = Field(default_factory=list, description="member PRs of a multi-PR task, oldest first "
                           "(pr_number is the first); empty for a one-PR task")
    title: str
    base_commit: str = Field(pattern=SHA)
    merge_commit: str = Field(pattern=SHA)
    family: Family
    family_confidence: float | None = Field(None, ge=0, le=1, description="the family's score in "
                                            "family_scores (0 when the classifier gave it none, e.g. an override)")
    family_override: Family | None = Field(None, description="set by hand; wins over the profile's classification")
    family_scores: dict[str, float] = Field(default_factory=dict, description="family -> score in [0, 1] from "
                                            "every signal (paths, roles, tests, title, labels), highest first")
    family_confident: bool | None = Field(None, description="the classifier's verdict: the top score is high and "
                                          "clear of the runner-up; true when family_override settles it")
    created_at: datetime
    resources: Resources = Field(default_factory=Resources)
    dependencies: list[str] = Field(default_factory=list, description="requirements declared at merge_commit, "
                                    "and at base_commit for projects the PR no longer names")
    lock: EnvironmentLock | None = Field(None, description="dependencies resolved as of created_at (profiles with lock)")
    lock_request: LockRequest | None = Field(None, description="the lock's inputs; with no lock and no `unpinned` "
                                             "the lock is pending: resolved at the first image build")
    test: TestSpec
    FAIL_TO_PASS: list[str] = Field(default_factory=list)
    PASS_TO_PASS: list[str] = Field(default_factory=list)
    twins: list[Twin] = Field(default_factory=list, description="mutation twins of the graded tests, kept by "
                              "validation: each failed at base and with the oracle")
    pinned: list[str] = Field(default_factory=list, description="tests graded under their real names, with no "
                              "twin group: validation saw the oracle fail them under planted names and pass them "
                              "under their own (their code reads the name: a data file named after the test, a "
                              "conftest matching it by position); twinless for the guard")
    validation: ValidationRecord | None = None
    quality: QualityRecord | None = None
    readiness: Readiness | None = Field(None, description="recorded by validate (and `tasks funnel --write`)")
    reviews: list[Review] = Field(default_factory=list, description="blind reviews (`sweserve tasks review record`); "
                                  "a task most reviewers judge BAD is not ready")
    unreadable: list[str] = Field(default_factory=list, description="files of base_commit git cannot read in the "
                                  "clone, left out of the task image (no test path needs them)")

    @property
    def lock_pending(self) -> bool:
        """Its lock is recorded but not yet resolved (lazy locking): the first image build resolves it."""
        return self.lock is None and self.lock_request is not None and self.lock_request.unpinned is None

    @property
    def ready(self) -> bool:
        return self.readiness is not None and self.readiness.ready and self.validated

    @property
    def validated(self) -> bool:
        return (
            self.validation is not None
            and self.validation.status == "valid"
            and bool(self.FAIL_TO_PASS)
        )


class TaskBundle(BaseModel):
    """A task with the texts stored beside task.json."""

    task: Task
    instruction: str
    oracle_patch: str
    tests_patch: str

    def content_hash(self) -> str:
        """What a candidate is graded on: a resumed run refuses results graded against other content."""
        graded = self.task.model_dump(mode="json", include={"base_commit", "test", "FAIL_TO_PASS", "PASS_TO_PASS",
                                                           "resources"})
        if self.task.resources.disk_gb == Resources.model_fields["disk_gb"].default:
            del graded["resources"]["disk_gb"]  # added later: tasks that keep the default keep their hash
        if self.task.twins:  # added later too: tasks without twins keep their hash
            graded["twins"] = [t.model_dump(mode="json") for t in self.task.twins]
        if self.task.pinned:  # and the pins: tasks without any keep their hash
            graded["pinned"] = list(self.task.pinned)
        parts = [json.dumps(graded, sort_keys=True), self.instruction, self.oracle_patch, self.tests_patch]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


class TestResults(Strict):
    """Outcomes of the graded test ids in one run."""

    __test__ = False

    fail_to_pass: dict[str, Outcome] = Field(default_factory=dict)
    pass_to_pass: dict[str, Outcome] = Field(default_factory=dict)

    @property
    def resolved(self) -> bool:
        return all(o == "passed" for o in self.fail_to_pass.values()) and all(
            o == "passed" for o in self.pass_to_pass.values()
        )


class TrajectoryStep(Strict):
    """One step of a command agent's own trajectory, read from its framework's record (`steps.json`)."""

    thought: str = ""
    command: str = ""
    output: str = ""


TRAJECTORY_STEPS_FILE = "steps.json"  # a trial folder's steps, as a JSON list of TrajectoryStep


class Metered(Strict):
    """A command agent's model calls as its egress proxy counted them, from the model server's own answers
    (`usage`, `usageMetadata`, SGLang's `meta_info`): nothing in the sandbox writes these."""

    requests: int = Field(0, ge=0, description="model calls the proxy let through that may generate (not a GET, not a "
                          "token count)")
    metered: int = Field(0, ge=0, description="answers whose usage it read")
    refused: int = Field(0, ge=0, description="error answers (4xx, 5xx): nothing generated")
    unread: int = Field(0, ge=0, description="answers that stated no usage it could read (a stream without it: "
                        "its chunks of output each count a completion token, a floor)")
    tunnels: int = Field(0, ge=0, description="https tunnels and connections switched to another protocol (a "
                         "WebSocket): their calls and answers are never read")
    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)
    last_prompt_tokens: int = Field(0, ge=0, description="the last answer it read (a record saved after each step "
                                    "lacks it when a time limit cuts the step's command)")
    last_completion_tokens: int = Field(0, ge=0)
    recent: list[tuple[NonNegativeInt, NonNegativeInt]] = Field(
        default_factory=list, max_length=16, description="the last answers it read, (prompt, completion) each, "
        "oldest first: a record saved before a step of parallel calls lacks them all when a time limit cuts the step")
    unreadable: bool = Field(False, description="the host could not read the proxy's meter when the phase ended: "
                             "nothing it counted is known (red team 18b, R18b-5)")

    @property
    def complete(self) -> bool:
        """Whether every call it let through was answered and each answer read: then its counts are the run's."""
        return (not self.unreadable and self.tunnels == 0 and self.unread == 0
                and self.metered + self.refused == self.requests)


UsageFrom = Literal["", "host", "proxy", "agent"]  # who counted a run's tokens: sweserve's own model client (the API
# agent), the egress proxy from the model's answers, or the agent's own record (written in its sandbox); "" unknown


class AgentRun(Strict):
    """What the candidate phase recorded: who ran, how long, how many steps and tokens, and why it stopped."""

    agent: str
    version: str = ""
    model: str = ""
    candidate: str | None = Field(None, description="the human engineer, for interactive sessions")
    exit_code: int | None = None
    exit_reason: str = "finished"  # finished, submitted, step_limit, token_limit, time_limit, timed_out, error, patch_failed,
    # model_refused, tool_server_lost (the API agent: how an attempt ended that brought it on itself)
    error: str | None = None
    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    usage_from: UsageFrom = Field("", description="who counted the tokens: host (sweserve's model client, which "
                                  "also prices them), proxy (the egress proxy, from the model's answers), agent "
                                  "(its own record, which its sandbox can write); a cost is sweserve's own only "
                                  "with host, else the agent's record states it")
    metered: Metered | None = Field(None, description="what the egress proxy counted, beside the agent's own "
                                    "record")
    wall_s: float = 0.0
    log_tail: str = ""
    transcript: str = Field("", description="a human session: the shell's history, copied from the sandbox "
                            "(secondary: the candidate can write it)")
    keystrokes: str = Field("", description="a human session: what was typed, recorded on the host (the "
                            "authoritative transcript; bounded)")
    untyped_history: list[str] = Field(default_factory=list, description="a human session: commands in the "
                                       "shell's history that the host's record never saw typed (forged, or "
                                       "finished by completion or history recall)")
    screen: str = Field("", description="a human session: the end of what the terminal showed, recorded on the "
                        "host, as plain text (bounded)")
    flags: list[str] = Field(default_factory=list, description="what the agent's own records noticed, e.g. "
                             "transcript_tampered")
    records: dict[str, str] = Field(default_factory=dict, exclude=True, description="files for the trial's "
                                    "folder (the full agent.log, its framework's trajectory, steps.json); never "
                                    "in the results index")


# attempts of one task a run may ask, and the highest attempt a record may name: reports walk every attempt (its
# standard error, pass@k), and a manifest asking 10^15 kept `report` busy for ever (red team 20d, R20d-5)
MAX_ATTEMPTS = 1000


class RunResult(Strict):
    """One line of a results JSONL file: one attempt of one agent on one task."""

    run_id: str
    task_id: str
    family: Family
    agent: str
    attempt: int = Field(1, ge=1, le=MAX_ATTEMPTS)
    status: Status
    reason: str | None = None
    error_kind: ErrorKind | None = Field(None, description="for status error: agent, docker, image_build, git, "
                                         "network, sandbox, limit, node, task or internal")
    model_patch: str = ""
    tests: TestResults = Field(default_factory=TestResults)
    flags: list[str] = Field(default_factory=list, description="what a reviewer must look at: what the tamper "
                             "scan and the verifier's resets found suspicious in the submission, and what the trial "
                             "saw (e.g. secret_in_submission, transcript_tampered)")
    resets: list[str] = Field(default_factory=list, description="paths the verifier put back to base, with why")
    agent_run: AgentRun | None = None
    started_at: datetime
    finished_at: datetime
    duration_s: float
    trial_dir: str | None = Field(None, description="the trial's folder: logs, full test output, submission")
    task_ready: bool | None = Field(None, description="whether the task was ready when run (false: taken with "
                                    "--include-unready); None in results from before readiness")
    agent_config_hash: str | None = None
    task_hash: str | None = None

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.task_id, self.agent, self.attempt)


class RunManifest(BaseModel):
    """`runs/<run_id>/manifest.json`: what one run of one agent on one results file selected, the denominator of
    its reports. Runs resumed under their `--run-id` rewrite it, keeping what they selected before. Read by
    `evaluation.results.read_manifest` only; fields a later version adds are ignored, fields older versions left out
    take their defaults."""

    model_config = ConfigDict(extra="ignore")

    run_id: str
    sweserve_version: str | None = None
    started_at: datetime | None = Field(None, description="when the run (its first invocation) started")
    agent: str
    results: str | None = Field(None, description="the results file's name (None: a manifest from before)")
    agent_config_hash: str | None = None
    attempts: int = Field(1, ge=1, le=MAX_ATTEMPTS, description="attempts asked of each task, but those in per_task")
    per_task: dict[str, Annotated[int, Field(ge=1, le=MAX_ATTEMPTS)]] = Field(
        default_factory=dict, description="attempts asked of a task, where they differ")
    tasks: dict[str, str | None] = Field(description="each selected task's id: its content hash")
    families: dict[str, str | None] = Field(default_factory=dict)
    unready: list[str] = Field(default_factory=list, description="selected tasks that were not ready when selected")

    @model_validator(mode="before")
    @classmethod
    def _absent(cls, data: object) -> object:
        """An empty value where a container belongs (`null`) as none, and names that are not strings out of
        `unready`."""
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if not (k in ("per_task", "families", "unready") and v is None)}
            if isinstance(data.get("unready"), list):
                data["unready"] = [t for t in data["unready"] if isinstance(t, str)]
        return data

    @model_validator(mode="after")
    def _of_its_tasks(self) -> "RunManifest":
        self.per_task = {t: n for t, n in self.per_task.items() if t in self.tasks}
        if any(t not in self.tasks for t in self.unready):  # assigned, a field counts as set: `unready` absent
            # from the file must stay unset (a manifest from before lists no judgement: `read_manifests`, R21b-3)
            self.unready = [t for t in self.unready if t in self.tasks]
        return self

    def attempts_for(self, task_id: str) -> int:
        """Attempts the run asked of task_id (0: not selected)."""
        return self.per_task.get(task_id, self.attempts) if task_id in self.tasks else 0
