"""Image layers for many nodes and many tasks: shared env layers, package index settings, lean task images."""

import json
import subprocess
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest
from tag_helpers import env_tag

from sweserve.dataset.image_spec import env_spec, image_spec, shared_dependencies
from sweserve.dataset.profiles import load_profile
from sweserve.environment.images import env_image_tag, export_repo_at, image_tags, layered_env_tag, task_image_tag
from sweserve.models import EnvironmentLock, ImageSpec


def _locked_task(lock):
    return SimpleNamespace(task_id="o__r-1", repo="o/r", base_commit="a" * 40, dependencies=["six", "idna"], lock=lock, lock_request=None,
                           test=SimpleNamespace(env={}), unreadable=[])


def _task(profile, deps, pins=None):
    lock = SimpleNamespace(requirements=pins) if pins is not None else None
    return SimpleNamespace(profile=profile, dependencies=deps, lock=lock, lock_request=None)


def test_shared_dependencies_are_what_every_task_of_a_profile_declares():
    tasks = [_task("omni", ["torch==2.5", "numpy==2.0", "a==1"]), _task("omni", ["numpy==2.0", "torch==2.5", "b==1"]),
             _task("omni", ["torch==2.5", "numpy==2.0"]), _task("demo", []), _task("demo", []),
             _task("one-set", ["x==1"]), _task("one-set", ["x==1"]), _task("disjoint", ["p"]), _task("disjoint", ["q"])]
    # one dependency set (nothing to share) or nothing in common: no shared layer
    assert shared_dependencies(tasks) == {"omni": [["numpy==2.0", "torch==2.5"]]}


def test_env_tags_follow_every_input_and_stay_put_without_index_settings():
    profile = load_profile("sglang-demo")
    tag = env_tag(profile, b"", ["torch==2.5"])
    assert env_tag(profile.model_copy(update={"index_url": None, "constraints": []}), b"", ["torch==2.5"]) == tag
    cpu = profile.model_copy(update={"index_url": "https://download.pytorch.org/whl/cpu"})
    pinned = profile.model_copy(update={"constraints": ["numpy<2"]})
    assert len({tag, env_tag(cpu, b"", ["torch==2.5"]), env_tag(pinned, b"", ["torch==2.5"])}) == 3
    common = env_tag(profile, b"", ["torch==2.5"])
    full = env_tag(profile, b"", ["torch==2.5", "a==1"])
    layered = layered_env_tag(full, common)
    assert layered.startswith("sweserve-env:sglang-demo-") and layered not in (full, common)
    assert layered != layered_env_tag(full, env_tag(profile, b"", ["torch==2.6"]))


def test_history_is_a_profile_setting_lean_by_default_and_in_the_task_tag():
    assert load_profile("sglang").history == "none" and load_profile("sglang-jax").history == "none"
    assert load_profile("sglang-demo").history == "ancestors"  # its tests check the ancestry is all there
    env = env_spec(load_profile("sglang-demo"))
    task = lambda history: ImageSpec(task_id="o__r-1", repo="o/r", base_commit="a" * 40, env=env,  # noqa: E731
                                     history=history)
    assert task_image_tag(task("none"), "sweserve-env:x-123") != task_image_tag(task("ancestors"), "sweserve-env:x-123")


def test_export_without_history_keeps_the_base_commit_alone_under_its_own_id(make_repo, tmp_path):
    repo = make_repo()
    for i in range(5):
        repo.commit(f"step {i}", {"big.txt": f"{i}\n" * 10000, "src.py": f"x = {i}\n"})
    base = repo.git("rev-parse", "HEAD~1")
    lean, full = tmp_path / "lean", tmp_path / "full"
    export_repo_at(repo.path, base, lean, "none")
    export_repo_at(repo.path, base, full, "ancestors")

    def git(where, *args):
        return subprocess.run(["git", *args], cwd=where, capture_output=True, text=True, check=True).stdout.split()

    assert git(lean, "rev-parse", "HEAD") == [base]  # diffs against the base commit work as before
    assert git(lean, "rev-list", "--all") == [base]
    assert (lean / ".git" / "shallow").read_text().split() == [base]
    assert len(git(full, "rev-list", "--all")) == 4
    assert git(lean, "status", "--porcelain") == []
    assert (lean / "src.py").read_text() == "x = 3\n"
    (lean / "src.py").write_text("x = 42\n")
    diff = subprocess.run(["git", "diff", base], cwd=lean, capture_output=True, text=True, check=True).stdout
    assert "+x = 42" in diff


def test_locked_tasks_build_on_their_most_common_lock():
    """Locks of one repository differ in a few pins: the lock most tasks have is the shared layer (its own
    image, so two locks make two env images, not three), every other lock a thin layer over it."""
    jan = ["jax==0.6.2", "jaxlib==0.6.2", "numpy==2.2.0", "pytest==8.3.4"]
    feb = ["jax==0.6.2", "jaxlib==0.6.2", "numpy==2.2.1", "pytest==8.3.4"]
    tasks = [_task("jax", ["jax"], jan), _task("jax", ["jax"], jan), _task("jax", ["jax", "x"], feb),
             _task("one-lock", ["a"], ["a==1"]), _task("one-lock", ["a"], ["a==1"])]
    assert shared_dependencies(tasks) == {"jax": [jan]}


def test_each_era_of_the_heavy_pins_gets_its_own_shared_layer():
    """One layer cannot hold two torch versions: every lock on another torch than the shared layer's reinstalled
    torch in its "thin" layer (gigabytes on CUDA images). With the profile's heavy packages, each era's most
    common lock is a layer of its own, thin over the first layer (torch installed once an era), and the era's
    other locks are thin over it."""
    def lock(torch, small, vision=None):
        pins = [f"torch=={torch}", f"numpy=={small}", "pytest==8.3.4"] + ([f"TorchVision=={vision}"] if vision else [])
        return EnvironmentLock(resolved_at=datetime(2024, 1, 1, tzinfo=timezone.utc), python="3.12",
                               requirements=sorted(pins))
    old, old2, new, new2 = lock("2.5.1", "2.0.0"), lock("2.5.1", "2.0.1"), lock("2.6.0", "2.1.0"), lock("2.6.0", "2.1.1")
    odd = lock("2.6.0", "2.1.0", vision="0.21.0")  # an era of its own (torchvision is heavy too), one lock in it
    locks = [old, old, old2, new, new, new2, odd]
    tasks = [_task("cuda", ["torch"], lk.requirements) for lk in locks]
    profile = load_profile("sglang").model_copy(update={"name": "cuda"})
    assert profile.heavy_packages[:1] == ["torch"]
    layers = shared_dependencies(tasks, {"cuda": profile.heavy_packages})["cuda"]
    assert layers == [new.requirements, old.requirements]  # the first layer (a tie: the newer pins), then old's era
    specs = {name: image_spec(_locked_task(lk), profile, layers)
             for name, lk in (("old", old), ("old2", old2), ("new", new), ("new2", new2), ("odd", odd))}
    req = lambda env: [line for line in env.requirements.splitlines() if "==" in line]  # noqa: E731
    assert specs["new"].shared is None  # the first layer is its own image
    for name in ("new2", "old", "odd"):  # over the first layer: old is its era's layer, odd is alone in its era
        assert req(specs[name].shared) == new.requirements and specs[name].shared.over is None
    assert req(specs["old2"].shared) == old.requirements and req(specs["old2"].shared.over) == new.requirements
    # the era's layer under old2 is old's own env image: one image, not two
    ca = b""
    assert env_image_tag(specs["old2"].shared, ca) == image_tags(specs["old"], ca).env
    # without heavy packages: one layer for the profile, as before, and every other lock is thin over it
    [one] = shared_dependencies(tasks)["cuda"]
    flat = profile.model_copy(update={"heavy_packages": []})
    assert one == new.requirements and image_spec(_locked_task(old2), flat, [one]).shared.over is None


@pytest.mark.docker
@pytest.mark.slow
def test_a_dependency_set_is_a_thin_layer_over_the_shared_env_image(docker_client):
    """Real pip installs from PyPI: what the tasks share is built once, each set adds only its difference."""
    from sweserve.environment.images import ImageBuilder, read_ca_bundle

    profile = load_profile("sglang-demo").model_copy(update={"name": "layers-test", "constraints": ["six<1.18"]})
    builder = ImageBuilder(docker_client, read_ca_bundle(None))
    sets = [["six==1.16.0", "idna==3.7"], ["six==1.16.0", "tomli==2.0.1"]]
    [shared] = shared_dependencies([_task("layers-test", s) for s in sets])["layers-test"]
    assert shared == ["six==1.16.0"]
    layers = lambda tag: docker_client.images.get(tag).attrs["RootFS"]["Layers"]  # noqa: E731
    size = lambda tag: docker_client.images.get(tag).attrs["Size"]  # noqa: E731
    tags = [builder.env(env_spec(profile, s), env_spec(profile, shared)) for s in sets]
    # locked tasks: the most common lock's image is the shared layer, each other lock a thin layer over it
    locks = [EnvironmentLock(resolved_at=datetime(2024, m, 28, tzinfo=timezone.utc), python="3.11",
                             requirements=["six==1.16.0", pin]) for m, pin in ((1, "idna==3.6"), (2, "idna==3.7"))]
    on = shared_dependencies([_task("layers-test", ["six", "idna"], lk.requirements) for lk in locks])["layers-test"]
    assert on == [locks[1].requirements]  # a tie: the newer pins
    specs = [image_spec(_locked_task(lk), profile, on) for lk in (locks[1], locks[0])]
    assert specs[0].shared is None  # the shared lock's own task: its full image is the shared layer
    anchor, thin = (builder.env(spec.env, spec.shared) for spec in specs)
    assert anchor == env_image_tag(specs[1].shared, builder.ca_bundle)  # the thin layer's base: that same image
    assert layers(thin)[:len(layers(anchor))] == layers(anchor) and size(thin) - size(anchor) < 2 * 1024 * 1024
    tags += [anchor, thin]
    sets += [lk.requirements for lk in (locks[1], locks[0])]
    common = builder.env(env_spec(profile, shared))
    try:
        for n, (tag, deps) in enumerate(zip(tags, sets)):
            if n < 2:  # the declared sets; the locks were checked against their anchor above
                assert layers(tag)[:len(layers(common))] == layers(common)
                assert size(tag) - size(common) < 2 * 1024 * 1024  # one small package, not another venv
            out = docker_client.containers.run(tag, ["/opt/venv/bin/pip", "list", "--format=json"], remove=True)
            installed = {p["name"].lower(): p["version"] for p in json.loads(out)}
            for dep in deps:
                name, version = dep.split("==")
                assert installed[name] == version
    finally:
        for tag in [*tags, common]:
            try:
                docker_client.images.remove(tag, force=True)
            except Exception:
                pass


@pytest.mark.docker
@pytest.mark.slow
def test_an_eras_layer_is_thin_over_the_first_and_its_other_locks_thin_over_it(docker_client):
    """Real builds of a chain: the first layer (the most common lock), an era's layer over it (idna stands in
    for torch), and a lock of that era over the era's layer; each link adds only its difference."""
    from sweserve.environment.images import ImageBuilder, read_ca_bundle

    profile = load_profile("sglang-demo").model_copy(update={"name": "layers-era", "heavy_packages": ["idna"]})
    builder = ImageBuilder(docker_client, read_ca_bundle(None))
    first, era, other = ["idna==3.7", "six==1.16.0"], ["idna==3.6", "six==1.16.0"], ["idna==3.6", "six==1.15.0"]
    lock = lambda pins: EnvironmentLock(resolved_at=datetime(2024, 1, 28, tzinfo=timezone.utc), python="3.11",  # noqa: E731
                                        requirements=pins)
    tasks = [_task("layers-era", ["six", "idna"], pins) for pins in (first, first, first, era, era, other)]
    layers_ = shared_dependencies(tasks, {"layers-era": profile.heavy_packages})["layers-era"]
    assert layers_ == [first, era]
    spec = image_spec(_locked_task(lock(other)), profile, layers_)
    layers = lambda tag: docker_client.images.get(tag).attrs["RootFS"]["Layers"]  # noqa: E731
    size = lambda tag: docker_client.images.get(tag).attrs["Size"]  # noqa: E731
    built = []
    try:
        built.append(top := builder.env(spec.env, spec.shared))
        built.append(middle := env_image_tag(spec.shared, builder.ca_bundle))
        built.append(bottom := env_image_tag(spec.shared.over, builder.ca_bundle))
        assert middle == image_tags(image_spec(_locked_task(lock(era)), profile, layers_), builder.ca_bundle).env
        for upper, lower in ((top, middle), (middle, bottom)):
            assert layers(upper)[:len(layers(lower))] == layers(lower)
            assert size(upper) - size(lower) < 2 * 1024 * 1024  # one small package, not another venv
        out = docker_client.containers.run(top, ["/opt/venv/bin/pip", "list", "--format=json"], remove=True)
        installed = {p["name"].lower(): p["version"] for p in json.loads(out)}
        assert installed["six"] == "1.15.0" and installed["idna"] == "3.6"
    finally:
        for tag in built:
            try:
                docker_client.images.remove(tag, force=True)
            except Exception:
                pass


@pytest.mark.docker
@pytest.mark.slow
def test_a_lean_task_image_grades_like_a_full_one(demo, tmp_path):
    """history none: the sandbox sees the base commit alone, under its own id, and grading is unchanged."""
    from sweserve.agents.reference import OracleAgent
    from sweserve.dataset.project import Project
    from sweserve.environment.docker_host import DockerHost
    from sweserve.evaluation.context import Context
    from sweserve.evaluation.trial import evaluate_task

    ctx = Context(DockerHost(client=demo.ctx.host.client, builder=demo.ctx.host.builder, run_id=demo.ctx.run_id,
                             host_gpus=[]), Project(demo.ctx.state_dir, repo_path=demo.repo))
    profile = demo.ctx.profile("sglang-demo")
    ctx.project._profiles["sglang-demo"] = profile.model_copy(update={"history": "none"})
    b = demo.bundle("sweserve-demo__sglang-mini-103")
    image = ctx.task_image(b)
    assert image.endswith("-lean") and image != demo.ctx.task_image(b)
    with ctx.sandbox(image, b.task.task_id, "candidate", b.task.resources, []) as box:
        assert box.exec("git rev-list --all", 60).output.split() == [b.task.base_commit]
        assert box.exec("git status --porcelain", 60).output.strip() == ""
    r = evaluate_task(ctx, b, OracleAgent(), results_path=tmp_path / "r.jsonl")
    assert r.status == "resolved", r.reason
    assert r.model_patch.strip() and r.model_patch == b.oracle_patch or "diff --git" in r.model_patch


@pytest.mark.docker
def test_a_task_image_keeps_its_sources_in_git_alone_and_a_sandbox_checks_them_out_once(demo):
    """The image's filesystem holds no tracked file (they are in .git, compressed); every way a container
    starts sees them all, clean; a second check-out never overwrites what was edited since."""
    b = demo.bundle("sweserve-demo__sglang-mini-103")
    image = demo.ctx.task_image(b)
    client = demo.ctx.host.client
    assert client.images.get(image).labels["sweserve.tree"] == "checkout-at-start"
    present = client.containers.run(image, ["-c", 'cd /testbed && git ls-files | while IFS= read -r f; do '
                                               '[ -e "$f" ] && echo "$f"; done; echo end'],
                                    entrypoint=["sh"], remove=True)
    assert present == b"end\n"  # nothing but .git (and untracked install outputs) in the image
    tracked = client.containers.run(image, ["git", "ls-files"], remove=True).decode().split()
    assert len(tracked) > 3
    # the image's own ENTRYPOINT (what `docker run IMAGE CMD` and other harnesses get)
    status = client.containers.run(image, ["git", "status", "--porcelain"], remove=True)
    assert status == b""
    with demo.ctx.sandbox(image, b.task.task_id, "candidate", b.task.resources, []) as box:
        assert box.exec("git status --porcelain", 60).output.strip() == ""
        assert box.exec(f"test -f {tracked[0]}", 60).exit_code == 0
        box.exec(f"echo edited > {tracked[0]} && rm {tracked[1]}", 60)
        again = box.exec("/usr/local/bin/sweserve-tree restore && git status --porcelain", 60)
        assert again.exit_code == 0
        assert sorted(again.output.split()) == sorted(["M", tracked[0], "D", tracked[1]])
        assert box.exec(f"cat {tracked[0]}", 60).output.strip() == "edited"
        assert box.exec("git reflog --all | wc -l", 60).output.strip() == "0"  # the check-out left no trace
