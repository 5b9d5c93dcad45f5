"""Context windows kept between turns, so a turn reads only the messages stored since the last.

A turn sends its whole window to the model, and rebuilding it from the database every turn (decoding
every row, converting each message, estimating its tokens) grew with the window: with a few hundred
messages it was a fifth of a turn's CPU. A process now keeps each window it read and, at the next turn
of that conversation, reads the messages after the last one it kept, with a check of those it kept:
how many the window still holds and the sum of a hash of each as the model reads it (seeded with its
seq). Any change the model would see, an eviction, a message stored out of order, or an edit, changes
the check, and the window is read again whole; writes that change nothing the model reads (the
embedding worker's) leave it valid. Nothing is shared between processes: each checks against the
database, which stays the only truth.

Kept windows are bounded by their estimated tokens (MEMVM_WINDOW_CACHE_TOKENS), least recently used
first out; 0 keeps none.
"""

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.llm.types import ChatMessage
from memvm.messages import service as messages
from memvm.runtime.loop.conversation import ChatHistory


@dataclass(frozen=True)
class _Kept:
    last_seq: int  # of the newest message the window held when read
    count: int  # the window's messages then, chat or not (approval requests count, too)
    seen: int  # the sum of their `seen` hashes
    messages: tuple[ChatMessage, ...]
    tokens: int

    def history(self) -> ChatHistory:
        return ChatHistory(list(self.messages), self.tokens)

    def after(self, newer: Sequence[Row[Any]], history: ChatHistory) -> "_Kept":
        """What to keep once `newer` (whose messages `history` now ends with) was read after these."""
        last_seq = max([self.last_seq, *(row.seq for row in newer)])
        seen = self.seen + sum(row.seen for row in newer)
        return _Kept(last_seq, self.count + len(newer), seen, tuple(history.messages), history.tokens)


_NONE_KEPT = _Kept(last_seq=-1, count=0, seen=0, messages=(), tokens=0)  # -1: below every seq


@dataclass(frozen=True)
class WindowRead:
    history: ChatHistory
    reused: int  # messages taken from what this process kept, not read from the database


class KeptWindows:
    """This process's windows, by organization, agent and conversation."""

    def __init__(self, max_tokens: int) -> None:
        self._max_tokens = max_tokens
        self._tokens = 0
        self._kept: OrderedDict[tuple[str, str, str | None], _Kept] = OrderedDict()

    async def read(self, session: AsyncSession, organization_id: str, agent_id: str, conversation_id: str | None) -> WindowRead:
        """The conversation's window as the model reads it, in the session's transaction."""
        key = (organization_id, agent_id, conversation_id)
        kept = self._kept.get(key, _NONE_KEPT)
        rows = await messages.chat_window_since(session, agent_id, conversation_id, kept.last_seq)
        if kept is not _NONE_KEPT and not _still_holds(kept, rows):
            kept = _NONE_KEPT
            rows = await messages.chat_window_since(session, agent_id, conversation_id, kept.last_seq)
        newer = rows[1:]
        history = kept.history()
        history.extend(newer)
        self._keep(key, kept.after(newer, history))
        return WindowRead(history, reused=len(kept.messages))

    def _keep(self, key: tuple[str, str, str | None], kept: _Kept) -> None:
        if (old := self._kept.pop(key, None)) is not None:
            self._tokens -= old.tokens
        if kept.tokens > self._max_tokens:
            return
        self._kept[key] = kept
        self._tokens += kept.tokens
        while self._tokens > self._max_tokens:
            _, dropped = self._kept.popitem(last=False)
            self._tokens -= dropped.tokens


def _still_holds(kept: _Kept, rows: Sequence[Row[Any]]) -> bool:
    """Whether the window still holds exactly the kept messages, unchanged, with the newer ones after
    them (a new running summary goes first: the window is read again)."""
    check, newer = rows[0], rows[1:]
    unchanged = check.kept == kept.count and (check.kept_seen or 0) == kept.seen
    return unchanged and all(row.kind != "summary" for row in newer)
