"""What each memvm process sets up for itself: its log format, (a child) ending with its parent, and
the imports it defers past its start."""

import contextlib
import ctypes
import importlib
import logging
import signal
import threading

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


# Not imported at start: the openai SDK alone takes about a second, more than the rest of the app
# (provider.py, embeddings/local.py). The first model call or embedding would otherwise pay for them
# on the event loop.
DEFERRED_IMPORTS = ("openai", "numpy")


def import_deferred_in_background() -> threading.Thread:
    """Once the server answers: in a thread, as an import gives up the interpreter lock often enough
    for the event loop to go on serving; a request that needs a module meanwhile waits for it."""

    def import_all() -> None:
        for name in DEFERRED_IMPORTS:
            importlib.import_module(name)

    thread = threading.Thread(target=import_all, name="memvm-deferred-imports", daemon=True)
    thread.start()
    return thread
