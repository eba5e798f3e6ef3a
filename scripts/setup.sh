#!/usr/bin/env bash
# Everything sweserve needs on a fresh Debian machine: Docker, debootstrap and docker-registry (when root), a running
# dockerd, the package in .venv, and the locally built base image. Safe to run again: each step is
# skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .sweserve

need_apt=()
command -v dockerd >/dev/null 2>&1 || need_apt+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
# an image registry on 127.0.0.1 for the tests of images shared between cluster nodes
command -v docker-registry >/dev/null 2>&1 || need_apt+=(docker-registry)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing ${need_apt[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "setup: missing ${need_apt[*]}; install them (apt-get install -y ${need_apt[*]}) or run as root" >&2
  fi
fi

if ! docker info >/dev/null 2>&1; then
  if command -v dockerd >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
    echo "setup: starting dockerd (log: .sweserve/dockerd.log)"
    nohup dockerd >.sweserve/dockerd.log 2>&1 &
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  fi
  docker info >/dev/null 2>&1 || echo "setup: Docker is not running; Docker tests will be skipped (or fail under SWESERVE_REQUIRE_DOCKER=1)" >&2
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q -e '.[test]'

if docker info >/dev/null 2>&1; then
  .venv/bin/sweserve images base --profile sglang
fi
