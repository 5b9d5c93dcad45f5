"""Request and response shapes of the messages API (LettaRequest, LettaResponse)."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_STEPS_DEFAULT = 50


class TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["text"] = "text"
    text: str


class MessageCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["message"] | None = "message"
    role: Literal["user", "system", "assistant"] = "user"
    content: str | list[TextPart]
    name: str | None = None
    otid: str | None = Field(
        None, max_length=200, description="Client id of this message; a repeated otid returns the stored result."
    )
    sender_id: str | None = None

    @property
    def text(self) -> str:
        return self.content if isinstance(self.content, str) else "\n".join(part.text for part in self.content)


class SendRequest(BaseModel):
    """LettaStreamingRequest: `messages` or `input`, plus loop and streaming options."""

    model_config = ConfigDict(extra="ignore")

    messages: list[MessageCreate] | None = None
    input: str | list[TextPart] | None = None
    max_steps: int = Field(MAX_STEPS_DEFAULT, ge=1, le=500)
    include_return_message_types: list[str] | None = None
    include_compaction_messages: bool = False
    streaming: bool = False
    stream_tokens: bool = False
    include_pings: bool = True
    background: bool = False

    @model_validator(mode="after")
    def _one_input(self) -> "SendRequest":
        if (self.messages is None) == (self.input is None):
            raise ValueError("give exactly one of `messages` (a list) or `input` (a string)")
        if self.messages is not None and not self.messages:
            raise ValueError("`messages` is empty; send at least one message")
        return self

    def input_messages(self) -> list[MessageCreate]:
        if self.messages is not None:
            return self.messages
        return [MessageCreate(role="user", content=self.input)]


StopReason = Literal[
    "end_turn",
    "max_steps",
    "tool_rule",
    "requires_approval",
    "error",
    "llm_api_error",
    "invalid_llm_response",
    "invalid_tool_call",
    "no_tool_call",
    "max_tokens_exceeded",
    "context_window_overflow_in_system_prompt",
    "cancelled",
]


class UsageStatistics(BaseModel):
    message_type: Literal["usage_statistics"] = "usage_statistics"
    completion_tokens: int = 0
    prompt_tokens: int = 0
    total_tokens: int = 0
    step_count: int = 0
    context_tokens: int | None = None
    run_ids: list[str] | None = None


class StopReasonMessage(BaseModel):
    message_type: Literal["stop_reason"] = "stop_reason"
    stop_reason: StopReason


class LettaResponse(BaseModel):
    messages: list[dict[str, Any]]
    stop_reason: StopReasonMessage
    usage: UsageStatistics
