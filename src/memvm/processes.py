"""What each memvm process sets up for itself: its log format, (a child) ending with its parent, and
the imports it defers past its start; and forking such a child."""

import contextlib
import ctypes
import gc
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator

_PR_SET_NAME = 15
_PR_SET_PDEATHSIG = 1


def end_with_parent(signum: signal.Signals) -> None:
    """Linux: this process gets `signum` when its parent dies, kill -9 included (elsewhere, nothing)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum)


def return_freed_memory() -> None:
    """glibc's malloc_trim: the free pages of the heap go back to the OS. Elsewhere (musl, macOS) nothing."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def fork_child(name: str, end_signal: signal.Signals, body: Callable[[], int]) -> int:
    """Fork a process that runs `body` and exits with its status; its pid. It shares this process's
    imported modules (copy-on-write), so call it before this process runs an event loop or a thread.
    The child gets `end_signal` when this process dies, shows as `name` in ps and top (Linux, at most
    15 bytes: its command line is this one's), and leaves with os._exit: this process's exit
    handlers (the embedded PostgreSQL's stop) never run in it."""
    # Objects that exist now are never visited by the child's collector, which would write to (and
    # so copy) the pages that hold them.
    gc.freeze()
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    status = 1
    try:
        end_with_parent(end_signal)
        if os.getppid() == parent:  # else the parent died before the line above took effect
            with contextlib.suppress(OSError, AttributeError):
                ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NAME, name.encode()[:15])
            status = body()
    except SystemExit as stop:  # e.g. a startup failure, or serve.py's SIGTERM handler, inherited
        status = stop.code if isinstance(stop.code, int) else 1
    except KeyboardInterrupt:
        status = 0
    except BaseException:
        logging.getLogger("memvm").exception("process %d (%s) failed", os.getpid(), name)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


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


def import_deferred() -> None:
    """Now, in this thread: what a process that forks does before it forks, so that its children
    share these modules rather than each importing them (about 15 MiB apiece)."""
    for name in DEFERRED_IMPORTS:
        importlib.import_module(name)


def import_deferred_in_background() -> threading.Thread:
    """Once the server answers: in a thread, as an import gives up the interpreter lock often enough
    for the event loop to go on serving; a request that needs a module meanwhile waits for it (a
    no-op for modules imported before a fork)."""
    thread = threading.Thread(target=import_deferred, name="memvm-deferred-imports", daemon=True)
    thread.start()
    return thread


# Optional parts that libraries import whenever the packages they need happen to be installed (as a
# developer's tools install them), and that no memvm process uses: httpx's command-line client (rich,
# pygments: about a tenth of a second of a start) and mako's highlighting of template errors
# (pygments, through alembic). Each library falls back to its plain form when the import fails.
# And pydantic's copy of its version 1 (65 ms), which FastAPI imports only to ask of each route's
# types whether they are version-1 models: memvm has none, and FastAPI answers no when it is missing.
_UNUSED_EXTRAS = ("httpx._main", "mako.ext.pygmentplugin", "pydantic.v1")


def skip_unused_extras() -> None:
    """Before anything imports httpx, alembic or FastAPI: their optional parts above are then never loaded
    (a None in sys.modules makes an import of that name fail at once)."""
    for name in _UNUSED_EXTRAS:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]


@contextlib.contextmanager
def starting_without_collection() -> Iterator[None]:
    """The cyclic garbage collector paused while a server imports its modules: the imports create some
    200,000 objects that live as long as the process, and every collection among them walks them
    again (0.2-0.3 s of a start's 1.7 s of CPU). At the end they are frozen, never walked again (the
    few cycles the imports leave as garbage, some 6,000 objects, with them), and collection resumes."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
