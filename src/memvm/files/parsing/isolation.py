"""PDF and DOCX are read in a child process (child.py) under limits: PDFium is C and python-docx
parses XML with lxml, both fed untrusted bytes. A crash, a runaway loop or a decompression bomb ends
that child, and the upload fails with the reason; the server and its worker go on."""

import signal
import subprocess
import sys
from dataclasses import dataclass

from memvm.files.parsing.errors import ParseError

# The child's exit status when it could not read the document: stderr says why.
REFUSED = 3


@dataclass(frozen=True)
class ChildLimits:
    seconds: float  # wall clock, from start to the text read back
    cpu_seconds: int
    memory_bytes: int  # address space (RLIMIT_AS)


# Module constants, not settings: an operator has no reason to tune them. Measured: a 50 MB PDF of
# 13,000 text pages (the upload cap) reads in 9 s of CPU within 242 MB of address space, 15 s end to
# end; a 20,000-paragraph .docx in 1 s within 71 MB. The margins are for slow, shared machines.
LIMITS = ChildLimits(seconds=180, cpu_seconds=120, memory_bytes=2**30)


def read_in_child(data: bytes, media_type: str, limits: ChildLimits = LIMITS) -> str:
    """The document's text, as the child read it. Raises ParseError with the reason it could not."""
    command = [
        *(sys.executable, "-m", "memvm.files.parsing.child"),
        *(media_type, str(limits.memory_bytes), str(limits.cpu_seconds)),
    ]
    try:
        done = subprocess.run(command, input=data, capture_output=True, timeout=limits.seconds, check=False)
    except subprocess.TimeoutExpired:  # run() has killed the child
        raise ParseError(f"reading the document took longer than {limits.seconds:g} s; it was stopped.") from None
    if done.returncode == 0:
        return done.stdout.decode("utf-8")
    raise ParseError(_failure(done.returncode, done.stderr.decode("utf-8", errors="replace"), limits))


def _failure(status: int, stderr: str, limits: ChildLimits) -> str:
    if status == REFUSED:
        return stderr.strip()
    if status == -signal.SIGXCPU:
        return f"reading the document used more than {limits.cpu_seconds} s of CPU; it was stopped."
    if status < 0:
        name = signal.Signals(-status).name
        return f"the document reader crashed ({name}); the file may be corrupt or need more than {_mib(limits)} of memory."
    last_line = (stderr.strip().splitlines() or ["no message"])[-1]
    return f"the document reader failed (exit status {status}: {last_line})."


def _mib(limits: ChildLimits) -> str:
    return f"{limits.memory_bytes // 2**20} MiB"
