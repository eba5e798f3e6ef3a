"""The machine side: the `Sandbox` and `Host` protocols, their Docker implementations, images, GPUs.

Rule: the only package that imports `docker`. It takes plain values (an `ImageSpec`, `Resources`) and imports
nothing of `dataset/`, `evaluation/` or `agents/`. Everything above sees it through `sandbox.py` and `host.py`;
`transfer.py` is private to `docker_sandbox.DockerSandbox`.
"""
