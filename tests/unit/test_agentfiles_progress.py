"""The progress line of `memvm agents import`: one per tenth of each pass, only for large files."""

import io

from memvm.cli.agentfiles import PROGRESS_FROM_BYTES, ProgressFile


def read_twice(size: int) -> str:
    out = io.StringIO()
    stream = ProgressFile(io.BytesIO(b"x" * size), out, size)
    for _ in range(2):  # the importer's passes: the skeleton, then the messages
        stream.seek(0)
        while stream.read(64 * 1024):
            pass
    return out.getvalue()


def test_a_large_file_reports_each_pass_in_tenths():
    lines = read_twice(2 * PROGRESS_FROM_BYTES).split("\r")[1:]

    assert lines[0].startswith("reading: ") and lines[-1] == "importing: 100% of 2.0 MiB"
    assert sum(line.startswith("reading") for line in lines) == sum(line.startswith("importing") for line in lines) <= 11


def test_a_small_file_stays_quiet():
    assert read_twice(PROGRESS_FROM_BYTES // 2) == ""
