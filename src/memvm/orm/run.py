"""Turns (runs) and the model calls inside them (steps)."""

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, DateTime, Index, Integer, String, func, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from memvm.db.base import Base, TenantOwned, tenant_foreign_key


class Run(TenantOwned, Base):
    """One turn: a send request, its options and its outcome (a retried send returns the stored one)."""

    __tablename__ = "run"
    __table_args__ = (
        Index("ix_run_organization_id_created_at_id", "organization_id", "created_at", "id"),
        Index("ix_run_conversation_id", "conversation_id", postgresql_where=text("conversation_id IS NOT NULL")),
        tenant_foreign_key("agent_id", "agent", ondelete="CASCADE"),
        tenant_foreign_key("conversation_id", "conversation", ondelete="CASCADE"),
    )

    id: Mapped[str] = mapped_column(String, primary_key=True)
    agent_id: Mapped[str] = mapped_column(String, index=True)
    # None: the agent's default conversation.
    conversation_id: Mapped[str | None] = mapped_column(String)
    status: Mapped[str] = mapped_column(String)  # created | running | completed | failed | cancelled
    stop_reason: Mapped[str | None] = mapped_column(String)
    usage: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True))
    request_config: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True))  # the send's options
    background: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    ttft_ns: Mapped[int | None] = mapped_column(BigInteger)  # start → first thing the client was sent
    total_duration_ns: Mapped[int | None] = mapped_column(BigInteger)
    cancel_requested_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))  # stop at the next safe point
    # Where a finished background run is POSTed, and how that went.
    callback_url: Mapped[str | None] = mapped_column(String)
    callback_sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    callback_status_code: Mapped[int | None] = mapped_column(Integer)
    callback_error: Mapped[str | None] = mapped_column(String)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.clock_timestamp())
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Step(TenantOwned, Base):
    """One model call of a run and what came of it."""

    __tablename__ = "step"
    __table_args__ = (
        Index("ix_step_organization_id_created_at_id", "organization_id", "created_at", "id"),
        tenant_foreign_key("agent_id", "agent", ondelete="CASCADE"),
        tenant_foreign_key("run_id", "run", ondelete="CASCADE"),
    )

    id: Mapped[str] = mapped_column(String, primary_key=True)
    agent_id: Mapped[str] = mapped_column(String, index=True)
    run_id: Mapped[str] = mapped_column(String, index=True)
    conversation_id: Mapped[str | None] = mapped_column(String)  # the run's
    model: Mapped[str | None] = mapped_column(String)  # the handle, provider/model
    status: Mapped[str] = mapped_column(String)  # success | failed | cancelled
    stop_reason: Mapped[str | None] = mapped_column(String)  # set on the step that ended the run
    prompt_tokens: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    completion_tokens: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    model_ms: Mapped[float | None] = mapped_column()  # the model call
    server_ms: Mapped[float | None] = mapped_column()  # memvm's own work after it: tools, storing
    tool_calls: Mapped[list[str]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))  # tool names called
    error_type: Mapped[str | None] = mapped_column(String)
    error: Mapped[str | None] = mapped_column(String)
    feedback: Mapped[str | None] = mapped_column(String)  # positive | negative, as a client rated the step
    tags: Mapped[list[str]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))  # the client's, with its feedback
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.clock_timestamp())


class RunEvent(TenantOwned, Base):
    """One streamed event of a background run, numbered, so a client can resume from a cursor."""

    __tablename__ = "run_event"
    __table_args__ = (tenant_foreign_key("run_id", "run", ondelete="CASCADE"),)

    run_id: Mapped[str] = mapped_column(String, primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.clock_timestamp())
