"""What a tool handler gets: the step's transaction and who is acting."""

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.actors import Actor


@dataclass(frozen=True)
class ToolContext:
    session: AsyncSession
    agent_id: str
    actor: Actor
