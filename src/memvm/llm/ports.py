"""What the agent loop needs of a model. Implementations: llm/openai_chat.py (real), test fakes."""

from collections.abc import AsyncIterator
from typing import Protocol

from memvm.llm.types import Completion, ModelRequest, TextDelta


class ChatModel(Protocol):
    async def complete(self, request: ModelRequest) -> Completion:
        """One chat completion. Raises memvm.errors.LLMError subclasses after retries."""

    def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | Completion]:
        """Yield TextDelta pieces as they arrive, then exactly one final Completion."""
