"""Undo and redo over a block's history, the way an editor does it (pure).

The history is append-only: an undo or redo is itself a new version that brings back the content of
an earlier one. Replaying the history rebuilds the editor's stack of states and its position in it:
an edit (create, update, restore) drops whatever could be redone and pushes a new state; an undo
steps back; a redo steps forward.
"""

from collections.abc import Iterable
from dataclasses import dataclass

EDITS = frozenset({"create", "update", "restore"})


@dataclass(frozen=True)
class Change:
    version: int
    change: str  # create | update | undo | redo | restore | delete


@dataclass(frozen=True)
class UndoStack:
    states: tuple[int, ...]  # the versions an undo or redo can bring back, oldest first
    position: int  # index of the current state in `states`; -1 before any

    @classmethod
    def replay(cls, changes: Iterable[Change]) -> "UndoStack":
        """`changes` in version order."""
        states: list[int] = []
        position = -1
        for change in changes:
            if change.change in EDITS:
                states = [*states[: position + 1], change.version]
                position = len(states) - 1
            elif change.change == "undo":
                position = max(position - 1, 0)
            elif change.change == "redo":
                position = min(position + 1, len(states) - 1)
        return cls(tuple(states), position)

    def undo_target(self) -> int | None:
        """The version an undo brings back, or None when there is nothing to undo."""
        return self.states[self.position - 1] if self.position >= 1 else None

    def redo_target(self) -> int | None:
        return self.states[self.position + 1] if 0 <= self.position < len(self.states) - 1 else None
