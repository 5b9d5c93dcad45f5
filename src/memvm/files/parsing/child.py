"""The child process that reads one PDF or DOCX (isolation.py starts it):
`python -m memvm.files.parsing.child MEDIA_TYPE MEMORY_BYTES CPU_SECONDS`, the document on stdin,
its text (UTF-8) on stdout. Limits are set before the document is read; a document it cannot read
exits with status REFUSED and the reason on stderr."""

import resource
import signal
import sys
from collections.abc import Callable
from typing import NoReturn

from memvm.files.parsing.errors import ParseError
from memvm.files.parsing.isolation import REFUSED
from memvm.files.parsing.media_types import DOCX, PDF
from memvm.files.parsing.pdf import pdf_text
from memvm.files.parsing.word import docx_text
from memvm.processes import end_with_parent

READERS: dict[str, tuple[str, Callable[[bytes], str]]] = {PDF: ("PDF", pdf_text), DOCX: (".docx file", docx_text)}


def main(media_type: str, memory_bytes: int, cpu_seconds: int) -> None:
    end_with_parent(signal.SIGKILL)  # a server killed mid-parse leaves no reader behind
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGXCPU would otherwise dump core
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    # SIGXCPU at the soft limit, which the parent reports as such; SIGKILL a second later if ignored.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    kind, read = READERS[media_type]
    try:
        text = read(sys.stdin.buffer.read())
    except ParseError as error:
        _refuse(error.reason)
    except MemoryError:
        _refuse(f"reading the {kind} needs more than {memory_bytes // 2**20} MiB of memory.")
    except Exception as error:  # whatever a malformed document makes the library raise
        _refuse(f"the file is not a readable {kind} ({type(error).__name__}: {error}).")
    # A PDF's text may hold lone surrogates, which no UTF-8 (nor PostgreSQL) can carry.
    sys.stdout.buffer.write(text.encode("utf-8", errors="replace"))


def _refuse(reason: str) -> NoReturn:
    sys.stderr.write(reason)
    sys.exit(REFUSED)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
