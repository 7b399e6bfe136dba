"""Build one extension request: ``python compile_main.py REQUEST_JSON OUT_DIR [--pch-dir DIR]``.

``--pch-readonly`` reads a shared ``--pch-dir`` without writing it (a compile jail); ``--prime`` only
makes what that directory should hold for the request (trusted code, flags checked first): its
include profiles (``--prime light``), precompiled headers (``--prime pch``) or both. ``--idle``
runs it, compilers included, only on otherwise idle CPU time (``SCHED_IDLE``), on ``--cpus`` if given.
Runs compilers on the request's sources and nothing else: no candidate Python code, no import of
the built library. Its output directory can therefore be cached by ``request_key`` and shared
between candidates. Exit status: 0 built, 1 the build failed (the report holds the compiler log),
2 unusable arguments or request. ``OUT_DIR/build_report.json`` says which strategy ran for each
file and why any fallback was taken.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compile_main.py", description=__doc__.splitlines()[0])
    parser.add_argument("request_json", help="path of the ExtensionRequest JSON")
    parser.add_argument("out_dir", help="directory that receives <name>.so and build_report.json")
    parser.add_argument(
        "--pch-dir", default=None, help="shared directory for precompiled headers and include profiles"
    )
    parser.add_argument("--strategy", choices=("fast", "plain"), default="fast")
    parser.add_argument("--no-link", action="store_true", help="stop after the object files")
    parser.add_argument(
        "--pch-readonly", action="store_true", help="use what --pch-dir holds; make nothing there"
    )
    parser.add_argument(
        "--prime",
        nargs="?",
        const="light,pch",
        default=None,
        help="only make the include profiles (light) and/or precompiled headers (pch) the build "
        "would use (trusted); both when no value is given",
    )
    parser.add_argument(
        "--await-profiles",
        type=float,
        default=0.0,
        help="seconds to wait for include profiles that trusted code is making during this build",
    )
    parser.add_argument("--idle", action="store_true", help="run on idle CPU time only (SCHED_IDLE)")
    parser.add_argument("--cpus", default=None, help="comma-separated CPUs to run on")
    args = parser.parse_args(argv)
    try:
        cpus = {int(c) for c in args.cpus.split(",")} if args.cpus else None
    except ValueError:
        print(f"compile_main: --cpus must list CPU numbers, not {args.cpus!r}", file=sys.stderr)
        return 2
    parts = tuple(p for p in (args.prime or "").split(",") if p)
    if args.prime is not None and (not parts or set(parts) - {"light", "pch"}):
        print(f"compile_main: --prime takes light, pch or both, not {args.prime!r}", file=sys.stderr)
        return 2
    _lower_priority(args.idle, cpus)

    # The evaluator directory is on sys.path only while this package is imported; torch and the
    # compilers' helpers are imported later, so none of the evaluator's modules can shadow them.
    here = os.path.dirname(os.path.abspath(__file__))
    parent = os.path.dirname(here)
    sys.path.insert(0, parent)
    try:
        from buildkit.compile import build
        from buildkit.prime import prime
        from buildkit.request import ExtensionRequest
    finally:
        sys.path.remove(parent)

    try:
        with open(args.request_json) as fh:
            request = ExtensionRequest.from_json(fh.read())
    except (OSError, ValueError, TypeError) as exc:
        print(f"compile_main: unusable request: {exc}", file=sys.stderr)
        return 2
    os.makedirs(args.out_dir, exist_ok=True)
    if parts:
        if not args.pch_dir:
            print("compile_main: --prime needs --pch-dir", file=sys.stderr)
            return 2
        print(json.dumps({"primed": prime(request, args.out_dir, args.pch_dir, parts)}))
        return 0
    report = build(
        request,
        args.out_dir,
        strategy=args.strategy,
        pch_dir=args.pch_dir,
        link=not args.no_link,
        make_shared=not args.pch_readonly,
        await_profiles=args.await_profiles,
    )
    summary = {k: v for k, v in report.to_dict().items() if k != "log"}
    print(json.dumps(summary))
    return 0 if report.ok else 1


def _lower_priority(idle: bool, cpus: set[int] | None) -> None:
    """Inherited by every compiler this process starts. Background work must never take CPU time
    from a build or a timing loop: ``SCHED_IDLE`` runs only when a CPU has nothing else to do."""
    if cpus:
        try:
            os.sched_setaffinity(0, cpus & os.sched_getaffinity(0) or os.sched_getaffinity(0))
        except OSError:
            pass
    if idle:
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        except (OSError, AttributeError):
            os.nice(19)


if __name__ == "__main__":
    sys.exit(main())
