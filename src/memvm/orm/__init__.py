"""ORM tables; importing this package registers every table on Base.metadata (Alembic's target)."""

from memvm.db.base import Base
from memvm.orm.agent import Agent, AgentBlock
from memvm.orm.block import Block, BlockChange

__all__ = ["Agent", "AgentBlock", "Base", "Block", "BlockChange"]
