"""The head schema: what the migrations make of an empty database, as one SQL script.

A new database would otherwise replay every migration: some 360 statements, each built by Alembic
and sent on its own, over half a second of a first start. The script (migrations/head_schema.sql)
is PostgreSQL's own dump of a database the migrations brought to head, with the rows they write;
migrate.py runs it in one round trip instead, only on an empty database of the PostgreSQL major
version it was dumped from, and only while its revision is the head. Anything else (an older
database, another server version) goes through the migrations, which stay the schema's only source:
tests/db/test_head_schema.py fails when the file is not their output, and
`python -m tests.support.head_schema` writes it again.
"""

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

# The script's first line: `-- memvm head schema: revision <id>, PostgreSQL <major>`.
HEADER = "-- memvm head schema: revision {revision}, PostgreSQL {major}"
_HEADER = re.compile(r"-- memvm head schema: revision (\w+), PostgreSQL (\d+)\n")


@dataclass(frozen=True)
class HeadSchema:
    revision: str
    major: int
    sql: str


@cache
def read_head_schema(file: Path) -> HeadSchema | None:
    """The script and what its header says it is; None without the file (or its header)."""
    try:
        sql = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    header = _HEADER.match(sql)
    if header is None:
        return None
    return HeadSchema(revision=header[1], major=int(header[2]), sql=sql)
