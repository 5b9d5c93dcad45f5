"""Two texts side by side, line against line, for the history and conflict views."""

from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Literal

# "same" lines are in both; "changed" stand where the other side has other text; "removed" are only
# on the left, "added" only on the right. The pages print these words, not only colours.
Kind = Literal["same", "changed", "removed", "added"]
_KIND_OF_OPCODE: dict[str, Kind] = {"equal": "same", "replace": "changed", "delete": "removed", "insert": "added"}


@dataclass(frozen=True)
class DiffRow:
    kind: Kind
    old_number: int | None
    old: str | None
    new_number: int | None
    new: str | None


def side_by_side(old: str, new: str) -> list[DiffRow]:
    left, right = old.splitlines(), new.splitlines()
    rows: list[DiffRow] = []
    for opcode, i1, i2, j1, j2 in SequenceMatcher(None, left, right, autojunk=False).get_opcodes():
        kind = _KIND_OF_OPCODE[opcode]
        for offset in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + offset, j1 + offset
            rows.append(
                DiffRow(
                    kind=kind,
                    old_number=i + 1 if i < i2 else None,
                    old=left[i] if i < i2 else None,
                    new_number=j + 1 if j < j2 else None,
                    new=right[j] if j < j2 else None,
                )
            )
    return rows
