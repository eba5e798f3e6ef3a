"""Remote assessments for hiring teams: packs of tasks, one-time invites, a browser terminal, replays, calibrated
difficulty and scorecards (`sweserve assess …`, `sweserve report --difficulty`).

Rule: a candidate is one more `Agent` (`agent.BrowserAgent`) graded by the trial pipeline every other candidate
goes through (`evaluation.evaluate.run_evaluation`: one RunResult per task in a results file), never by a grader
of its own; sandboxes are reached only through the `Sandbox`/`Host` protocols, so nothing Docker-side
(`docker`, `docker_sandbox`, `docker_host`, `transfer`, `egress`, `images`) is imported here; and the terminal
is recorded on the host, in this process, where nothing in a sandbox can reach it.
"""
