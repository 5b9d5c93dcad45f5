"""UndoStack replays an append-only history into an editor's undo position (pure), checked against
a plain editor model over generated sequences of edits, undos and redos."""

from hypothesis import given
from hypothesis import strategies as st

from memvm.memory.undo import Change, UndoStack

ACTIONS = st.lists(st.sampled_from(["edit", "undo", "redo", "restore"]), max_size=40)


class Editor:
    """The reference: a list of states and a cursor, as any text editor keeps them."""

    def __init__(self) -> None:
        self.states, self.cursor = [1], 0  # version 1: the create

    def apply(self, action: str, version: int) -> int | None:
        """The version whose content this action brings back (None: refused, nothing recorded)."""
        if action in ("edit", "restore"):
            self.states, self.cursor = [*self.states[: self.cursor + 1], version], self.cursor + 1
            return version
        step = -1 if action == "undo" else 1
        if not 0 <= self.cursor + step < len(self.states):
            return None
        self.cursor += step
        return self.states[self.cursor]


@given(ACTIONS)
def test_replaying_the_history_finds_what_an_editor_would_undo_and_redo(actions):
    editor, history = Editor(), [Change(1, "create")]
    for action in actions:
        stack = UndoStack.replay(history)
        expected = {"undo": stack.undo_target(), "redo": stack.redo_target()}
        version = history[-1].version + 1
        brought_back = editor.apply(action, version)
        if action in expected:
            assert expected[action] == brought_back
        if brought_back is not None:
            history.append(Change(version, {"edit": "update"}.get(action, action)))
