"""The assessment end to end in a real headless Chromium: invites, the xterm terminal in a Docker sandbox, auto
submission, grading through the trial pipeline, the refused reuse of a link, and the replay page.

Screenshots for the README are written to docs/ when SWESERVE_SCREENSHOTS=1."""

import base64
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from sweserve.assess.recorder import read_cast
from sweserve.demo import files
from sweserve.evaluation.results import read_results

pytestmark = [pytest.mark.docker, pytest.mark.slow]
DIST = "sweserve-demo__sglang-mini-103"
PATH = "python/sglang/srt/distributed/parallel_state.py"
ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "sweserve.cli", *args], capture_output=True, text=True, **kw)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def browser_factory():
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.skip("chromium and chromium-driver are not installed (make setup)")
    made = []

    def make():
        opts = webdriver.ChromeOptions()
        opts.binary_location = chromium
        for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,860"):
            opts.add_argument(a)
        d = webdriver.Chrome(options=opts, service=Service(driver))
        made.append(d)
        return d

    yield make
    for d in made:
        d.quit()


def wait_for(what, timeout=120, every=0.5):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = what()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def screen(d) -> str:
    return d.execute_script("const r = document.querySelector('.xterm-rows'); return r ? r.innerText : '';")


def type_in(d, text):
    from selenium.webdriver.common.by import By

    d.find_element(By.CSS_SELECTOR, ".xterm-helper-textarea").send_keys(text)


def shot(d, name):
    if os.environ.get("SWESERVE_SCREENSHOTS") == "1":
        d.save_screenshot(str(DOCS / name))


def start(d, link):
    from selenium.webdriver.common.by import By

    d.get(link)
    assert "Your assessment" in d.page_source
    d.find_element(By.ID, "start").click()
    wait_for(lambda: "s left]" in screen(d), timeout=300)  # the sandbox's prompt, with the time left


def test_a_candidate_is_assessed_in_the_browser(demo, tmp_path, browser_factory):
    from selenium.webdriver.common.by import By

    state, out = demo.root / "state", tmp_path / "out"
    common = ["--tasks", str(demo.tasks), "--state-dir", str(state)]
    made = cli("assess", "pack", "--name", "interview", "--count", "1", "--minutes", "60", "--family",
               "distributed", "--out", str(tmp_path / "interview.yaml"), *common)
    assert made.returncode == 0, made.stderr
    short = yaml.safe_load((tmp_path / "interview.yaml").read_text())
    short["name"], short["tasks"][0]["time_budget_s"] = "interview-short", 60
    (tmp_path / "short.yaml").write_text(yaml.safe_dump(short))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    links = {}
    for name, pack in (("alice", "interview.yaml"), ("bob", "short.yaml")):
        inv = cli("assess", "invite", str(tmp_path / pack), "--candidate", name, "--url", url, *common)
        assert inv.returncode == 0, inv.stderr
        links[name] = inv.stdout.strip()
    assert links["alice"].startswith(f"{url}/i/")
    # opened to every address of this machine: still the sandboxes cannot reach it (they have no route to the host)
    server = subprocess.Popen([sys.executable, "-m", "sweserve.cli", "assess", "serve", "--host", "0.0.0.0",
                               "--port", str(port),
                               "--repo-path", str(demo.repo), "--output", str(out), *common],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    try:
        wait_for(lambda: _up(port) or server.poll() is not None, timeout=60)
        assert server.poll() is None, server.stdout.read()
        alice, bob = browser_factory(), browser_factory()
        start(alice, links["alice"])
        start(bob, links["bob"])  # two candidates at once, each in a sandbox of their own
        hosts = " ".join(["127.0.0.1", "172.17.0.1", *subprocess.run(["hostname", "-I"], capture_output=True,
                                                                       text=True).stdout.split()])
        type_in(bob, f"for h in {hosts}; do timeout 3 bash -c \"exec 3<>/dev/tcp/$h/{port}\" 2>/dev/null && "
                     f"echo RE''ACHED-$h; done; echo probe-''done\n")
        wait_for(lambda: "probe-done" in screen(bob), timeout=90)
        assert "REACHED-" not in screen(bob)
        # a job meant to change the tree once the session is over: stopped before the submission is taken
        type_in(bob, "(while [ $(date +%s) -le $((SWESERVE_DEADLINE + 1)) ]; do sleep 0.1; done; "
                     "while :; do echo late >> /testbed/late.txt; sleep 0.05; done) &\n")
        type_in(bob, "sleep 300\n")
        type_in(alice, "grep -c shard_range /sweserve/instruction.md\n")
        fixed = base64.b64encode(files.PR_DISTRIBUTED[PATH].encode()).decode()
        type_in(alice, f"echo {fixed} | base64 -d > {PATH}\n")
        type_in(alice, "git status --short\n")
        wait_for(lambda: f"M {PATH}" in screen(alice), timeout=60)
        assert "Fix uneven tensor-parallel shard ranges" in alice.find_element(By.ID, "instr").text
        shot(alice, "assess-candidate.png")
        alice.refresh()  # a dropped connection: the same shell, the same clock
        wait_for(lambda: f"M {PATH}" in screen(alice), timeout=30)
        type_in(alice, "echo still-here\n")
        wait_for(lambda: "still-here" in screen(alice).split("echo still-here")[-1], timeout=30)
        alice.find_element(By.ID, "submit").click()
        wait_for(lambda: alice.find_element(By.ID, "done").is_displayed(), timeout=400)
        (r,) = read_results(out / "interview" / "alice.jsonl")
        assert r.status == "resolved" and r.agent == "human-alice" and r.agent_run.exit_reason == "submitted"
        wait_for(lambda: bob.find_element(By.ID, "done").is_displayed(), timeout=400)  # the deadline submits
        (b,) = read_results(out / "interview-short" / "bob.jsonl")
        assert b.status == "failed" and b.agent_run.exit_reason == "time_limit" and 55 <= b.agent_run.wall_s < 80
        assert "late.txt" not in b.model_patch
        alice.get(links["alice"])  # the link again: refused, with a sentence
        assert "already been used" in alice.find_element(By.ID, "message").text
        assert "Traceback" not in alice.page_source
        cast = Path(r.trial_dir) / "terminal.cast"
        header, events = read_cast(cast)
        typed = "".join(d for _, c, d in events if c == "i")
        assert "git status --short\r" in typed and header["version"] == 2
        commands = [line.split("\t", 1)[1] for line in r.agent_run.transcript.splitlines()]
        assert commands[:2] == ["grep -c shard_range /sweserve/instruction.md", f"echo {fixed} | base64 -d > {PATH}"]
    finally:
        server.terminate()
        server.wait(30)
    agents = []
    for agent in ("oracle", "null"):  # agents on the same task, to stand the candidates against
        agents += ["--results", str(tmp_path / f"{agent}.jsonl")]
        ran = cli("run", DIST, "--agent", agent, "--output", agents[-1], "--repo-path", str(demo.repo), *common)
        assert ran.returncode == 0, ran.stderr
    agents += ["--results", str(out / "interview-short" / "bob.jsonl")]
    rep = cli("assess", "report", str(tmp_path / "interview.yaml"), "--output", str(out), *agents, *common, cwd=ROOT)
    assert rep.returncode == 0, rep.stderr
    card = out / "interview" / "report" / "scorecard-alice.html"
    replay = out / "interview" / "report" / f"replay-alice.{DIST}.html"
    viewer = browser_factory()
    viewer.get(card.as_uri())
    assert "resolved" in viewer.find_element(By.ID, "tasks").text and "ability" in viewer.find_element(By.ID, "ability").text
    standing = viewer.find_element(By.ID, "standing").text
    assert all(who in standing for who in ("alice", "bob", "oracle", "null"))
    shot(viewer, "assess-scorecard.png")
    viewer.get(replay.as_uri())
    commands = viewer.find_element(By.ID, "commands").text
    assert "git status --short" in commands and "grep -c shard_range /sweserve/instruction.md" in commands
    wait_for(lambda: viewer.find_elements(By.CSS_SELECTOR, ".ap-player, .ap-wrapper"), timeout=30)
    assert "passed" in viewer.find_element(By.ID, "outcomes").text and PATH in viewer.find_element(By.ID, "diff").text
    shot(viewer, "assess-replay.png")
    csv = (out / "interview" / "report" / "interview.csv").read_text().splitlines()
    assert csv[0].startswith("candidate,") and csv[1].startswith("alice,interview,") and ",resolved," in csv[1]


def _up(port):
    try:
        with socket.create_connection(("127.0.0.1", port), 1):
            return True
    except OSError:
        return False
