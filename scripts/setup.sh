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
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)  # renders `sweserve report --html` in tests
command -v chromedriver >/dev/null 2>&1 || need_apt+=(chromium-driver)  # selenium drives it there (and assess's e2e test)
# ---- assess (issue 20): npm fetches the browser terminal's front-end packages (see the assess block below) ----
command -v npm >/dev/null 2>&1 || need_apt+=(nodejs npm)
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
.venv/bin/python -m pip install -q -e '.[test,lint]'

if docker info >/dev/null 2>&1; then
  .venv/bin/sweserve images base --profile sglang
fi

# Harbor (the Terminal-Bench harness that runs `sweserve export --format harbor` tasks) needs Python >= 3.12
# and the `docker compose` v2 plugin. It gets its own venv; tests that run it skip when it is absent.
if [ ! -x .sweserve/harbor/bin/harbor ]; then
  py312=""
  for cand in python3.13 python3.12 /root/.pyenv/versions/3.12*/bin/python3.12 "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      py312=$(command -v "$cand"); break
    fi
  done
  if [ -n "$py312" ]; then
    echo "setup: installing harbor into .sweserve/harbor ($py312)"
    "$py312" -m venv .sweserve/harbor
    .sweserve/harbor/bin/python -m pip install -q 'harbor==0.26.*'
  else
    echo "setup: no Python >= 3.12 found; Harbor tests will be skipped" >&2
  fi
fi
# mini-swe-agent, the version the shipped config installs in sandboxes, in a venv of its own: the test that runs the
# real `mini` against the scripted model (tests/test_trajectories.py) finds it there.
if [ ! -x .sweserve/mini/bin/mini ]; then
  echo "setup: installing mini-swe-agent into .sweserve/mini"
  python3 -m venv .sweserve/mini
  .sweserve/mini/bin/python -m pip install -q 'mini-swe-agent==2.4.6' || echo "setup: mini-swe-agent not installed; its test will be skipped" >&2
fi
if ! docker compose version >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  # bookworm's docker-compose is v1; trixie's package ships the v2 plugin binary (static Go, runs on bookworm)
  echo "setup: installing the docker compose v2 plugin from Debian trixie's docker-compose package"
  apt_tmp=$(mktemp -d)
  mkdir -p "$apt_tmp/lists/partial" "$apt_tmp/cache/archives/partial"
  echo "deb http://deb.debian.org/debian trixie main" >"$apt_tmp/sources.list"
  apt_opts=(-o APT::Sandbox::User=root -o Dir::Etc::sourcelist="$apt_tmp/sources.list" -o Dir::Etc::sourceparts=- \
            -o Dir::State::Lists="$apt_tmp/lists" -o Dir::Cache="$apt_tmp/cache")
  apt-get -qq "${apt_opts[@]}" update
  (cd "$apt_tmp" && apt-get -qq "${apt_opts[@]}" download docker-compose 2>/dev/null)
  dpkg -x "$apt_tmp"/docker-compose_*.deb "$apt_tmp/root"
  plugins="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins"
  mkdir -p "$plugins"
  install -m 0755 "$apt_tmp/root/usr/libexec/docker/cli-plugins/docker-compose" "$plugins/docker-compose"
  rm -rf "$apt_tmp"
  docker compose version
fi

# ---- assess (issue 20): the browser terminal's front-end packages (npm, chromium and chromium-driver come above) ----
# @xterm/xterm, @xterm/addon-fit and asciinema-player come from npm at the versions package-lock.json pins; they are
# served from node_modules (`sweserve assess serve`) and copied into report folders, never into the repository.
if command -v npm >/dev/null 2>&1; then
  if [ ! -d node_modules/@xterm/xterm ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    echo "setup: npm ci (front-end packages of sweserve assess)"
    npm ci --no-audit --no-fund --loglevel=error
  fi
fi
# ---- end assess ----
