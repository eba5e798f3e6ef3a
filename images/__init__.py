"""The Dockerfiles of every image sweserve builds (base/env/env-delta/task/checked-out/agent) and the egress
proxy's mitmproxy addon, read as files by `sweserve.environment.images`.

Rule: data only; nothing imports from here. This folder sits at the repository root; `sweserve/images` links to
it, and the wheel carries its files there.
"""
