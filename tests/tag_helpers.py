"""Image tags from a profile and a task, as the trial derives them: through the spec `dataset/` computes."""

from sweserve.dataset.image_spec import env_spec, image_spec
from sweserve.environment.images import env_image_tag, task_image_tag


def env_tag(profile, ca_bundle, dependencies=(), lock=None):
    """The env image tag of a dependency set (or a lock) under a profile."""
    return env_image_tag(env_spec(profile, dependencies, lock), ca_bundle)


def task_tag(task, env, install=(), history="ancestors", profile=None):
    """The task image tag on the env image `env`, with the given install steps and history."""
    from sweserve.dataset.profiles import load_profile

    profile = (profile or load_profile("sglang-demo")).model_copy(update={"install": list(install),
                                                                          "history": history})
    return task_image_tag(image_spec(task, profile), env)
