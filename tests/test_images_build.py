"""Image builds: git's real message when a clone is broken, and a failed build leaves no layers behind."""

import uuid

import pytest

from sweserve.environment.images import (
    ImageBuilder,
    _docker_build,
    built_layers,
    export_repo_at,
    git_subcommand,
)
from sweserve.errors import InfraError

SRC = "python/pkg/mod.py"


def test_export_from_a_corrupt_clone_says_what_git_said(make_repo, tmp_path):
    repo = make_repo()
    repo.commit("init", {SRC: "x = 1\n"})
    repo.commit("two", {SRC: "x = 2\n"})
    head = repo.git("rev-parse", "HEAD")
    sha = repo.git("rev-parse", f"HEAD~1:{SRC}")
    obj = repo.path / ".git" / "objects" / sha[:2] / sha[2:]
    obj.chmod(0o644)
    obj.write_bytes(b"garbage")
    with pytest.raises(InfraError) as err:
        export_repo_at(repo.path, head, tmp_path / "out")
    msg = str(err.value)
    assert err.value.kind == "git"
    assert msg.startswith(f"git: git fetch of {head[:12]} from {repo.path} failed: fatal:")
    # git names the bad object, or (its stderr lines race) says the remote side is corrupt: git's words either way
    assert (sha in msg or "corruption" in msg) and "git -c" not in msg


def test_git_subcommand():
    assert git_subcommand(["-c", "uploadpack.allowAnySHA1InWant=true", "fetch", "-q"]) == "fetch"
    assert git_subcommand(["init", "-q"]) == "init"


def test_built_layers_skips_the_base_and_cached_steps():
    log = ["Step 1/5 : FROM base", " ---> 7c00689d23cc", "Step 2/5 : RUN a", " ---> Using cache",
           " ---> 1111aaaa2222", "Step 3/5 : RUN b", " ---> Running in 54eb97c4c968",
           "Removing intermediate container 54eb97c4c968", " ---> 33f5eec50c5a",
           "Step 4/5 : COPY x /x", " ---> becea7ea2516", "Step 5/5 : RUN false",
           " ---> Running in c5cc711fd85a", "Removing intermediate container c5cc711fd85a", "error"]
    assert built_layers(log) == ["33f5eec50c5a", "becea7ea2516"]


@pytest.mark.docker
def test_a_failed_build_leaves_no_image_behind(docker_client, tmp_path, monkeypatch):
    import sweserve.environment.images as images

    made: list[str] = []
    real = images.built_layers
    monkeypatch.setattr(images, "built_layers", lambda lines: made.extend(real(lines)) or made)
    marker = uuid.uuid4().hex  # no step of this build can come from the cache
    (tmp_path / "Dockerfile").write_text(
        f"FROM sweserve-base:bookworm\nRUN echo {marker} > /a\nRUN echo {marker} > /b\nRUN exit 3\n")
    with pytest.raises(InfraError, match="returned a non-zero code: 3"):
        _docker_build(docker_client, tmp_path, "Dockerfile", f"sweserve-test-fail:{marker[:12]}", {}, {})
    assert len(made) == 2
    for layer in made:
        with pytest.raises(Exception):
            docker_client.images.get(layer)


@pytest.mark.docker
def test_a_failed_env_build_reports_and_cleans_up(docker_client, monkeypatch):
    from sweserve.dataset.image_spec import env_spec
    from sweserve.dataset.profiles import load_profile

    made: list[str] = []
    import sweserve.environment.images as images

    real = images.built_layers
    monkeypatch.setattr(images, "built_layers", lambda lines: made.extend(real(lines)) or made)
    profile = load_profile("sglang-demo").model_copy(update={"index_options": ["--no-index"]})
    builder = ImageBuilder(docker_client, uuid.uuid4().hex.encode())  # a CA bundle no one has
    with pytest.raises(InfraError, match="building sweserve-env:sglang-demo-"):
        builder.env(env_spec(profile, ["six"]))
    assert made
    for layer in made:
        with pytest.raises(Exception):
            docker_client.images.get(layer)
