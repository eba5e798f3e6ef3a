"""Starts the hidden tests inside the grade sandbox, isolated: `python -I sweserve_boot.py CONFIG`.

`-I` drops PYTHONPATH, PYTHON* variables, the user site and the current directory from the start-up path,
so nothing in /testbed runs before the runner: a `sitecustomize.py` or shadowing module in the repo is
never imported first. The repo's directories are then appended AFTER the standard library and
site-packages, so they cannot shadow either. Pytest plugin autoloading is off (entry points of
`*.dist-info` in the repo never load); only the plugins CONFIG names are loaded, by module: the profile's,
and the image's own (`--plugins`, listed before the submission is applied), so a hidden test using
`@pytest.mark.asyncio` with pytest-asyncio in the image means what it means under plain pytest.

Outcomes leave as one line per test report on a private duplicate of the original stdout, each line
prefixed with a per-run nonce read from a file that is deleted before any repo code is imported; the
harness parses them from the `docker exec` stream as they arrive, so nothing the tests do at exit, or to
a file, can rewrite an outcome already sent. The first line carries a digest of pytest's installed files
(and this harness), which the harness compares with the one taken before the submission was applied.

When CONFIG names a `user` and this runs as root, the runner is imported, then what the tests read is made
root's and read-only to them and this process becomes that unprivileged user (`sweserve_drop`), all before
any repository code is imported; the repository paths join sys.path only after that.

`--manifest` prints that digest alone; `--installed` the top-level module names the interpreter's own paths
(standard library, site-packages) provide, which a submission's new files must not shadow; `--plugins` the
modules of the pytest plugins installed there (`pytest11` entry points; their files join the digest). All
three run before the submission is applied.
"""

import hashlib
import json
import os
import sys

sys.dont_write_bytecode = True
RUNNER_DISTS = ("pytest", "pluggy", "iniconfig", "packaging", "exceptiongroup", "tomli", "py")


def _outside(path, workdir="/testbed"):
    where, repo = os.path.abspath(str(path)), workdir.rstrip("/")
    return where != repo and not where.startswith(repo + "/")


def _plugin_dists(workdir="/testbed"):
    """Distributions outside the workdir declaring pytest plugins (`pytest11` entry points), by name."""
    from importlib import metadata

    found: dict = {}
    for dist in metadata.distributions():
        eps = [ep for ep in dist.entry_points if ep.group == "pytest11"]
        if eps and _outside(dist.locate_file(""), workdir):
            found.setdefault(dist.metadata["Name"] or "", (dist, eps))
    return found


def plugin_modules(workdir="/testbed"):
    """The modules `-p` loads for the installed pytest plugins (an entry point naming `module:attr` is left
    out: `-p` takes modules)."""
    return sorted({ep.value.strip() for _, eps in _plugin_dists(workdir).values() for ep in eps
                   if ":" not in ep.value})


def _dist_files():
    """The installed files of the runner's distributions and the image's pytest plugins, from their RECORD,
    plus this harness."""
    from importlib import metadata

    dists = []
    for name in RUNNER_DISTS:
        try:
            dists.append(metadata.distribution(name))
        except metadata.PackageNotFoundError:
            continue
    dists += [dist for dist, _ in _plugin_dists().values()]
    files: list[str] = []
    for dist in dists:
        files.extend(str(dist.locate_file(f)) for f in (dist.files or []) if not str(f).endswith(".pyc"))
    here = os.path.dirname(os.path.abspath(__file__))
    files.extend(os.path.join(here, n) for n in sorted(os.listdir(here)) if n.endswith(".py"))
    return sorted(set(files))


def manifest_digest():
    h = hashlib.sha256()
    for path in _dist_files():
        h.update(path.encode() + b"\0")
        try:
            with open(path, "rb") as fh:
                h.update(hashlib.sha256(fh.read()).digest())
        except OSError:
            h.update(b"-")
    return h.hexdigest()


def installed_names(workdir="/testbed"):
    """Top-level names importable from sys.path (as `python -I` starts: no repo directory but what a `.pth`
    added, which is left out with everything else under the workdir), and those distributions declare."""
    from importlib import machinery, metadata

    suffixes = tuple(machinery.all_suffixes()) + (".pyc",)
    names = set()
    for entry in sys.path:
        where, repo = os.path.abspath(entry), workdir.rstrip("/")
        if not entry or where == repo or where.startswith(repo + "/"):
            continue
        try:
            listing = os.listdir(entry)
        except OSError:
            continue
        for name in listing:
            stem = name.split(".")[0]
            if os.path.isdir(os.path.join(entry, name)) or name.endswith(suffixes):
                names.add(stem)
    for dist in metadata.distributions():
        names.update((dist.read_text("top_level.txt") or "").split())
    return sorted(n for n in names if n.isidentifier() and not n.startswith("__"))


def _emitter(nonce, fd):
    write, dumps = os.write, json.dumps  # bound now: later patches of os.write or json do not reach them
    prefix = ("\n@@sweserve:" + nonce + ":").encode()

    def emit(event):
        line = prefix + dumps(event, ensure_ascii=True).encode() + b"\n"
        while line:
            line = line[write(fd, line):]
    return emit


def _least_privilege(config):
    """As root, before any repository code is imported: what the tests read made root's and read-only to them
    (the repository, the interpreter's own paths with pytest's installed files, this harness), the harness's
    inputs private, then this process becomes the unprivileged test user (see sweserve_drop)."""
    import sweserve_drop

    here = os.path.dirname(os.path.abspath(__file__))
    own = [p for p in sys.path if p and not p.startswith("/usr/")]  # /usr is the image's, root's already
    sweserve_drop.lock(list(config.get("lock", [])) + [sys.prefix, here] + own)
    for path in config.get("private", []):
        sweserve_drop.private(path)
    sweserve_drop.drop(config["user"])


def main(argv):
    if argv[1:2] == ["--manifest"]:
        print(manifest_digest())
        return 0
    if argv[1:2] == ["--installed"]:
        print(json.dumps(installed_names()))
        return 0
    if argv[1:2] == ["--plugins"]:
        print(json.dumps(plugin_modules()))
        return 0
    if argv[1:2] == ["--first-look"]:  # the three above from one interpreter: the grade sandbox's first look
        print(json.dumps({"manifest": manifest_digest(), "installed": installed_names(),
                          "plugins": plugin_modules()}))
        return 0
    with open(argv[1]) as fh:
        config = json.load(fh)
    with open(config["nonce_file"]) as fh:
        nonce = fh.read().strip()
    os.unlink(config["nonce_file"])
    emit = _emitter(nonce, os.dup(1))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's own dir out too
    emit({"start": manifest_digest()})
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    if config["runner"] == "unittest":
        import sweserve_unittest
    else:
        import pytest
        import sweserve_outcomes
    if config.get("user") and os.geteuid() == 0:
        _least_privilege(config)
    for path in config["paths"]:
        if path not in sys.path:
            sys.path.append(path)
    if config["runner"] == "unittest":
        code = sweserve_unittest.main(config["files"], emit)
    else:
        code = pytest.main(config["args"], plugins=[sweserve_outcomes.Recorder(emit)])
    emit({"end": int(code)})
    return int(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
