"""The `memvm` parser: each command's module adds its own subcommands, with the function that runs
them (`run`), which returns the exit status."""

import argparse
import sys

from memvm import __version__
from memvm.cli import agentfiles, backup, blocks, database, keys, serve, worker
from memvm.db.postmaster import EmbeddedPostgresError


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    try:
        code: int = args.run(args)
    except EmbeddedPostgresError as error:  # any command that opens the embedded database: one line, no traceback
        print(f"memvm: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C before a server runs (uvicorn handles it once one does)
        print("memvm: interrupted", file=sys.stderr)
        return 130
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memvm", description="Stateful LLM agents with self-editing memory.")
    commands = parser.add_subparsers(title="commands")
    for module in (serve, worker, keys, agentfiles, blocks, backup, database):
        module.add_commands(commands)
    version = commands.add_parser("version", help="print the memvm version")
    version.set_defaults(run=lambda args: print(f"memvm {__version__}") or 0)
    return parser
