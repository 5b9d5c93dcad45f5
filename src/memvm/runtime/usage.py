"""Token usage of one turn, summed over its steps, in Letta's `usage_statistics` shape."""

from dataclasses import dataclass
from typing import Any

from memvm.llm.types import Completion
from memvm.runtime.tokens import estimate_text


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    step_count: int = 0
    context_tokens: int | None = None

    def add(self, completion: Completion, estimated_prompt: int) -> None:
        usage = completion.usage
        prompt = usage.prompt_tokens if usage else estimated_prompt
        completion_tokens = usage.completion_tokens if usage else estimate_text(completion.content)
        self.prompt_tokens += prompt
        self.completion_tokens += completion_tokens
        self.total_tokens += prompt + completion_tokens
        self.step_count += 1
        self.context_tokens = prompt + completion_tokens

    def as_letta(self, run_id: str) -> dict[str, Any]:
        return {
            "message_type": "usage_statistics",
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "step_count": self.step_count,
            "context_tokens": self.context_tokens,
            "run_ids": [run_id],
        }
