"""What the commands share on the command line: the settings they run with, and argument types
whose usage errors say what is wrong."""

import argparse
from collections.abc import Callable
from typing import TypeAlias

from memvm.config import Settings

# What `add_subparsers` returns: each command's module adds its subcommands to it.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def settings_of(args: argparse.Namespace) -> Settings:
    """The settings, with the options given on the command line over the environment's."""
    given = ("host", "port", "insecure", "workers")
    overrides = {key: value for key in given if (value := getattr(args, key, None)) is not None}
    return Settings(**overrides)


def checked(check: Callable[[str], str]) -> Callable[[str], str]:
    """An argparse type from a check that raises ValueError: a usage error that says what is wrong."""

    def parse(text: str) -> str:
        try:
            return check(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse


def int_between(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number in [low, high], or a usage error that says so."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not between {low} and {high}")
        return value

    return parse
