"""What each memvm process sets up for itself: its log format, and (a child) ending with its parent."""

import contextlib
import ctypes
import logging
import signal

_PR_SET_PDEATHSIG = 1


def end_with_parent(signum: signal.Signals) -> None:
    """Linux: this process gets `signum` when its parent dies, kill -9 included (elsewhere, nothing)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum)


# HTTP client libraries that log every request at INFO: each model and embedding call would add a
# line (and its cost) to every turn. Shown at DEBUG.
_PER_REQUEST_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2")


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(levelname)s:     %(name)s: %(message)s")
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        for name in _PER_REQUEST_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
