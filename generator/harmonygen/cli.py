"""`harmonygen` command line: a thin layer over `generate`, `write` and `check`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__
from .config import load_config
from .engine import check, write
from .loader import SpecError
from .openapi_sync import SyncError, write_sync


def _add_paths(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", type=Path, default=None, help="project root (default: nearest pyproject.toml)")
    for flag in ("spec", "grammar", "templates", "runtime", "output"):
        p.add_argument(f"--{flag}", default=None, help=f"override [tool.harmonygen] {flag}")


def _sync_openapi(document: Path, out_dir: Path) -> int:
    try:
        changed = write_sync(document, out_dir, source=f"{document.resolve().parent.name}/{document.name}")
    except (OSError, SyncError) as exc:
        print(f"harmonygen sync-openapi: {exc}", file=sys.stderr)
        return 2
    for line in changed:
        print(line)
    print(f"{out_dir}: {'updated' if changed else 'up to date'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="harmonygen", description="Generate harmony_responses from spec/.")
    parser.add_argument("--version", action="version", version=f"harmonygen {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="render templates into the output folder")
    gen.add_argument("--check", action="store_true", help="write nothing; exit 1 if the output is stale")
    _add_paths(gen)
    sync = sub.add_parser("sync-openapi", help="write spec/responses/ from an Open Responses OpenAPI document")
    sync.add_argument("document", type=Path, help="the OpenAPI 3.1 document (JSON)")
    _add_paths(sync)
    args = parser.parse_args(argv)
    config = load_config(
        args.root,
        spec=args.spec,
        grammar=args.grammar,
        templates=args.templates,
        runtime=args.runtime,
        output=args.output,
    )
    if args.command == "sync-openapi":
        return _sync_openapi(args.document, config.spec_dir / "responses")
    try:
        if args.check:
            report = check(config)
            if report.ok:
                print(f"{config.output}/ is up to date")
                return 0
            sys.stdout.write(report.diff)
            for label, items in (("stale", report.stale), ("missing", report.missing), ("extra", report.extra)):
                for item in items:
                    print(f"{label}: {config.output}/{item}")
            print(f"{config.output}/ is stale: run `harmonygen generate`", file=sys.stderr)
            return 1
        for line in write(config):
            print(line)
        return 0
    except SpecError as exc:
        print(f"harmonygen: {exc}", file=sys.stderr)
        return 2
