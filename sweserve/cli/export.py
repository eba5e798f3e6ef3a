"""`sweserve export --format swebench|harbor --out DIR`: the tasks in the formats of SWE-bench and of Harbor."""

from __future__ import annotations

import re
from pathlib import Path

from rich.console import Console

from sweserve.errors import SweserveError


def register(sub, common) -> None:
    e = sub.add_parser("export", parents=[common],
                       help="write tasks as a SWE-bench dataset (JSONL + Parquet) or as Harbor task folders")
    e.add_argument("task_ids", nargs="*", help="tasks to export (default: all ready ones)")
    e.add_argument("--format", required=True, choices=["swebench", "harbor"])
    e.add_argument("--out", required=True, help="output folder")
    e.add_argument("--split", default="test", help="swebench: split name, the files' stem (default: test)")
    e.add_argument("--include-unvalidated", action="store_true",
                   help="also export tasks without a valid validation record")
    e.add_argument("--include-unready", action="store_true",
                   help="also export valid tasks that are not ready (see `sweserve tasks funnel`)")
    e.add_argument("--build-images", action="store_true",
                   help="swebench: also build the task images the `image` column names (harbor always does)")
    e.add_argument("--repo-path", default=None, help="clone to build task images from")
    e.set_defaults(func=run)


def _image_tags(bundles, project, args) -> dict[str, str]:
    """Each task's image tag, computed without building anything (the tag hashes what the image is made of):
    the checked-out variant, whose /testbed is complete the moment it starts. The tags are derived as the
    builder derives them (`images.image_tags`), from the same spec: the project's tasks decide the shared layer."""
    from sweserve.environment.images import image_tags, read_ca_bundle

    ca = read_ca_bundle(args.ca_bundle)
    return {b.task.task_id: image_tags(project.image_spec(b.task), ca).checked_out for b in bundles}


def run(args, console: Console) -> int:
    from sweserve.dataset.taskstore import select

    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", args.split):  # the files' stem: no '/', not empty
        raise SweserveError(f"--split {args.split!r}: a split name is letters, digits, '_', '.' and '-'")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise SweserveError(f"--out {args.out}: not a folder")
    bundles = select(Path(args.tasks), args.task_ids)
    skipped = [b.task.task_id for b in bundles if not b.task.validated]
    if not args.include_unvalidated:
        bundles = [b for b in bundles if b.task.validated]
    if not bundles:
        raise SweserveError(f"no validated tasks to export in {args.tasks} (run `sweserve validate` first, "
                            "or pass --include-unvalidated)")
    if not (args.include_unready or args.include_unvalidated):
        from sweserve.cli.common import ready_only

        bundles = ready_only(bundles, False, console, "export", args.state_dir)
    out = Path(args.out)
    if args.format == "swebench":
        from sweserve.cli.common import make_project
        from sweserve.dataset.export_swebench import export_swebench

        # one project for tags, profiles and clones: profiles found as mine and validate find them, the shared
        # layer as run has it, and pending locks resolved first, or the tags would name unpinned images that a
        # later build with the lock would not make
        project = make_project(args, [b.task for b in bundles], console)
        tags = _build_images(bundles, args, console) if args.build_images else _image_tags(bundles, project, args)
        plans = {b.task.task_id: _plan(b, project.clone_for(b.task.repo), console) for b in bundles}
        profiles = {name: project.profile(name) for name in {b.task.profile for b in bundles}}
        paths = export_swebench(bundles, profiles, out, tags, split=args.split, plans=plans)
        console.print(f"wrote {len(bundles)} instances: {paths['jsonl']} and {paths['parquet']}", soft_wrap=True,
                      markup=False)
        if args.build_images:
            console.print(f"the {len(set(tags.values()))} images the `image` column names are built and present "
                          "in this Docker daemon", soft_wrap=True, markup=False)
        else:
            console.print("warning: the `image` column names task images that no registry holds: build them on "
                          "the machine that runs swebench (else swebench tries to pull them from Docker Hub) with: "
                          + _build_command(args), soft_wrap=True, markup=False, highlight=False)
    else:
        _export_harbor(bundles, out, args, console)
    if skipped and not args.include_unvalidated:
        console.print(f"left out {len(skipped)} unvalidated tasks: {', '.join(skipped)}", soft_wrap=True)
    return 0


def _plan(bundle, clone: Path | None, console: Console) -> str | None:
    """The grading plan the task's verifier plants (the hidden tests, their mutation twins and canaries, as
    `sweserve run` plants them), made from its hidden files read in the clone. A task with twins needs it; one
    without, and no clone, is graded with plain canaries, and the user is told."""
    from sweserve.evaluation.export_plan import plan_sources, ship

    task = bundle.task
    if clone is None:
        if task.twins:
            raise SweserveError(f"{task.task_id}: its mutation twins are planted from its hidden test files, read in "
                                f"a clone of {task.repo}: pass --repo-path")
        console.print(f"note: {task.task_id}: no clone of {task.repo} (--repo-path), so its export is graded with "
                      "plain canaries, without fresh names for its hidden tests", soft_wrap=True, markup=False,
                      highlight=False)
        return None
    sources, selectors = plan_sources(clone, bundle)
    return ship(bundle, sources, selectors=selectors)


def _build_command(args) -> str:
    """The same export with --build-images, as a shell command line."""
    import shlex

    argv = ["sweserve", "export", "--format", "swebench", "--out", args.out, "--build-images"]
    for flag, value, default in (("--tasks", args.tasks, "tasks"), ("--state-dir", args.state_dir, ".sweserve"),
                                 ("--split", args.split, "test"), ("--repo-path", args.repo_path, None),
                                 ("--ca-bundle", args.ca_bundle, None)):
        if value is not None and value != default:
            argv += [flag, str(value)]
    if args.include_unvalidated:
        argv.append("--include-unvalidated")
    return shlex.join(argv + list(args.task_ids))


def _build_images(bundles, args, console: Console) -> dict[str, str]:
    from sweserve.cli.common import make_context
    from sweserve.errors import InfraError

    with make_context(args, console, selected=[b.task for b in bundles]) as ctx:
        tags = {b.task.task_id: ctx.host.builder.checked_out(ctx.task_image(b)) for b in bundles}
        missing = sorted({t for t in tags.values() if not ctx.host.has_image(t)})
        if missing:  # what the dataset names must be here, or swebench goes to Docker Hub for it
            raise InfraError("image_build", f"{len(missing)} images the export names are not in the Docker daemon "
                             f"after building: {', '.join(missing)}")
        return tags


def _export_harbor(bundles, out: Path, args, console: Console) -> None:
    from sweserve.cli.common import make_context
    from sweserve.dataset.export_harbor import export_harbor_task

    with make_context(args, console, selected=[b.task for b in bundles]) as ctx:
        for b in bundles:
            inputs = ctx.inputs(b)
            image = ctx.image(inputs)  # built locally when missing; Harbor's build is then FROM a local image
            dest = export_harbor_task(b, inputs.profile, image, out, _plan(b, inputs.clone, console))
            console.print(f"  {b.task.task_id} → {dest} (FROM {image})", soft_wrap=True)
    console.print(f"wrote {len(bundles)} Harbor tasks under {out}; run one with: "
                  f"harbor run -p {out / bundles[0].task.task_id} -a oracle -e docker", soft_wrap=True)
