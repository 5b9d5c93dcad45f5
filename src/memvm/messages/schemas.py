"""Request and response shapes of the messages API (LettaRequest, LettaResponse)."""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

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


class ApprovalReturn(BaseModel):
    """The answer to one call that waited for approval."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["approval"] = "approval"
    tool_call_id: str
    approve: bool
    reason: str | None = None


class ClientToolReturn(BaseModel):
    """The result of a call the client ran itself (a client-side tool, or an approval-waiting call)."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["tool"] = "tool"
    tool_call_id: str
    tool_return: str | list[TextPart]
    status: Literal["success", "error"]
    stdout: list[str] | None = None
    stderr: list[str] | None = None

    @property
    def text(self) -> str:
        return self.tool_return if isinstance(self.tool_return, str) else "\n".join(part.text for part in self.tool_return)


class ApprovalCreate(BaseModel):
    """The client's answer to a turn that stopped with `requires_approval`: one entry per waiting
    call in `approvals`, or (Letta's older form) `approve`/`reason` for all of them."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["approval"] = "approval"
    approvals: list[Annotated[ApprovalReturn | ClientToolReturn, Field(discriminator="type")]] | None = None
    approval_request_id: str | None = None
    approve: bool | None = None
    reason: str | None = None
    otid: str | None = Field(None, max_length=200)

    @model_validator(mode="after")
    def _some_answer(self) -> "ApprovalCreate":
        if not self.approvals and self.approve is None:
            raise ValueError("an approval message needs `approvals` (one per waiting tool call) or `approve`")
        return self


class ClientTool(BaseModel):
    """A tool the client runs itself: offered to the model for this request; a call to it stops the
    turn until the client sends the result back."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str | None = None
    parameters: dict[str, Any] | None = None


def _message_kind(item: Any) -> str:
    """Letta infers a message's type when it is missing: an approval has `approvals` or `approve`."""
    if isinstance(item, dict):
        return str(item.get("type") or ("approval" if "approvals" in item or "approve" in item else "message"))
    return str(getattr(item, "type", None) or "message")


InputMessage = Annotated[
    Annotated[MessageCreate, Tag("message")] | Annotated[ApprovalCreate, Tag("approval")], Discriminator(_message_kind)
]


class SendRequest(BaseModel):
    """LettaStreamingRequest: `messages` or `input`, plus loop and streaming options."""

    model_config = ConfigDict(extra="ignore")

    messages: list[InputMessage] | None = None
    input: str | list[TextPart] | None = None
    client_tools: list[ClientTool] | None = None
    callback_url: str | None = Field(
        None, pattern=r"^https?://", max_length=2000, description="Background runs: POST the finished run here."
    )
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
        if any(isinstance(m, ApprovalCreate) for m in self.messages or ()) and len(self.messages or ()) > 1:
            raise ValueError("an approval message must be sent alone; send other messages once the turn goes on")
        return self

    def input_messages(self) -> list[MessageCreate]:
        if self.messages is not None:
            return [message for message in self.messages if isinstance(message, MessageCreate)]
        return [MessageCreate(role="user", content=self.input)]

    def run_config(self) -> dict[str, Any]:
        """The options a run records (Letta's request_config), and its inputs' otids (a client that
        lost the stream finds the run by them before the inputs are stored)."""
        options = self.model_dump(
            include={"max_steps", "include_return_message_types", "streaming", "stream_tokens", "background"}
        )
        return options | ({"otids": otids} if (otids := self.otids()) else {})

    def otids(self) -> list[str]:
        return [message.otid for message in self.messages or () if message.otid]

    def approval(self) -> "ApprovalCreate | None":
        return next((message for message in self.messages or () if isinstance(message, ApprovalCreate)), None)


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
