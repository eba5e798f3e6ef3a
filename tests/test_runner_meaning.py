"""Hardening must not change what a hidden test checks (issue 15, point 6).

The issue's case: sglang-omni PR 30, whose tests use `@pytest.mark.asyncio`, passed 5/5 under plain pytest
in its image and failed 5/5 under sweserve's runner (plugin autoload off), and validation said only `no
FAIL_TO_PASS`. Here: the demo's distributed task with a hidden async test, in a task image with
pytest-asyncio installed from PyPI. The image's plugins are listed before the submission is applied and
loaded by `-p`; a test that still passes only under plain pytest is named by validation (`runner_only`).
"""

from __future__ import annotations

import pytest

DIST = "sweserve-demo__sglang-mini-103"
ASYNC_FILE = "test/srt/test_async_shards.py"
ASYNC_TEST = f"{ASYNC_FILE}::test_shards_cover_everything_async"
CACHE_TEST = f"{ASYNC_FILE}::test_remembers_across_runs"
ASYNC_SOURCE = '''import asyncio

import pytest

from sglang.srt.distributed.parallel_state import shard_range


@pytest.mark.asyncio
async def test_shards_cover_everything_async():
    await asyncio.sleep(0)
    assert [shard_range(10, 4, r) for r in range(4)] == [(0, 3), (3, 6), (6, 8), (8, 10)]


def test_remembers_across_runs(cache):
    cache.set("sweserve/k", 1)
    assert cache.get("sweserve/k", 0) == 1
'''


def _new_file_patch(path: str, text: str) -> str:
    lines = text.splitlines()
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{ln}\n" for ln in lines))


@pytest.fixture(scope="module")
def asyncio_image(demo):
    """The demo task's image with pytest-asyncio installed the ordinary way (pip, from PyPI)."""
    image = demo.ctx.task_image(demo.bundle(DIST))
    client = demo.ctx.host.client
    config = client.images.get(image).attrs["Config"]
    # past the image's entrypoint (it prepares /testbed), and committed with the image's own start-up back
    box = client.containers.run(image, ["-c", "pip install -q pytest-asyncio && python -c 'import pytest_asyncio'"],
                                entrypoint=["sh"], detach=True, labels={"sweserve.test": "asyncio"})
    try:
        status = box.wait(timeout=300)
        if status.get("StatusCode") != 0:
            pytest.skip(f"pytest-asyncio could not be installed: {box.logs()[-500:]!r}")
        tag = "sweserve-test-asyncio:latest"
        box.commit("sweserve-test-asyncio", "latest", conf={"Entrypoint": config["Entrypoint"], "Cmd": config["Cmd"]})
    finally:
        box.remove(force=True)
    yield tag
    client.images.remove(tag, force=True)


@pytest.fixture
def asyncio_bundle(demo, asyncio_image):
    bundle = demo.bundle(DIST).model_copy(deep=True)
    bundle.tests_patch += _new_file_patch(ASYNC_FILE, ASYNC_SOURCE)
    task = bundle.task
    task.test.files = [*task.test.files, ASYNC_FILE]
    task.FAIL_TO_PASS, task.PASS_TO_PASS, task.twins, task.validation = [], [], [], None
    original = demo.ctx.image  # the trial resolves its inputs once, then asks for their image
    demo.ctx.image = lambda inputs: asyncio_image if inputs.image.task_id == DIST else original(inputs)
    try:
        yield bundle
    finally:
        demo.ctx.image = original


def _validate(demo, bundle, tmp_path):
    from sweserve.evaluation.validation import ValidateRequest, validate_task

    return validate_task(demo.ctx, ValidateRequest(tmp_path / DIST, bundle, runs=1))  # recorded in tmp_path


@pytest.mark.slow
@pytest.mark.docker
def test_an_asyncio_test_passes_after_the_oracle_with_the_images_plugin(demo, asyncio_bundle, tmp_path):
    from sweserve.agents.reference import OracleAgent
    from sweserve.evaluation.trial import evaluate_task

    outcome = _validate(demo, asyncio_bundle, tmp_path)
    assert outcome.status == "valid", outcome
    assert ASYNC_TEST in asyncio_bundle.task.FAIL_TO_PASS, asyncio_bundle.task.FAIL_TO_PASS
    # the cache fixture needs pytest's cacheprovider, which the runner keeps off: said, not dropped
    assert outcome.runner_only == [CACHE_TEST], outcome.runner_only
    assert evaluate_task(demo.ctx, asyncio_bundle, OracleAgent()).status == "resolved"


@pytest.mark.slow
@pytest.mark.docker
def test_without_the_images_plugins_validation_names_the_tests_only_the_runner_fails(demo, asyncio_bundle,
                                                                                     tmp_path, monkeypatch):
    """The defence off (the image's plugins not loaded, as before): the async test fails after the oracle, and
    validation says so by name instead of dropping it."""
    from sweserve.evaluation import verifier

    real = verifier.first_look

    def without_plugins(*a, **kw):
        look = real(*a, **kw)
        look.plugins = []
        return look
    monkeypatch.setattr(verifier, "first_look", without_plugins)
    outcome = _validate(demo, asyncio_bundle, tmp_path)
    assert ASYNC_TEST in outcome.runner_only, outcome
    assert ASYNC_TEST not in asyncio_bundle.task.FAIL_TO_PASS


@pytest.mark.slow
@pytest.mark.docker
def test_a_plugin_the_submission_adds_is_not_loaded(demo, asyncio_bundle, tmp_path):
    """The image's plugins are listed before the submission is applied: one the candidate adds as a
    distribution of the repository (entry point included) is never loaded, and cannot pass a test."""
    from sweserve.agents.command import CommandAgent
    from sweserve.evaluation.trial import evaluate_task

    assert _validate(demo, asyncio_bundle, tmp_path).status == "valid"
    plugin = ("import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
              "    outcome = yield\n    rep = outcome.get_result()\n    rep.outcome, rep.longrepr = 'passed', None\n")
    files = {"python/sweserve_pass.py": plugin,
             "python/sweserve_pass-1.0.dist-info/METADATA":
                 "Metadata-Version: 2.1\nName: sweserve-pass\nVersion: 1.0\n",
             "python/sweserve_pass-1.0.dist-info/entry_points.txt": "[pytest11]\nsweserve_pass = sweserve_pass\n"}
    cmd = "".join(f"mkdir -p $(dirname {p}) && cat > {p} <<'SWEOF'\n{t}\nSWEOF\n" for p, t in files.items())
    r = evaluate_task(demo.ctx, asyncio_bundle, CommandAgent(cmd, name="forge-own-plugin"))
    assert r.status in ("failed", "tampered"), (r.status, r.reason, r.tests)
