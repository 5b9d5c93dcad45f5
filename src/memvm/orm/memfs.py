"""An agent's memory as a git repository (MemFS): the commits served so far, in order, every git
object they reach, and the files that are not blocks (reference/, skills/, …), kept as pushed."""

from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, Integer, LargeBinary, SmallInteger, String, Text, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from memvm.db.base import Base, TenantOwned, tenant_foreign_key


class MemfsCommit(TenantOwned, Base):
    """The agent's branch, append-only: once fetched, a commit never changes. `blocks` records which
    version of each block the commit's tree shows ({block_id: [path, version]})."""

    __tablename__ = "memfs_commit"
    __table_args__ = (tenant_foreign_key("agent_id", "agent", ondelete="CASCADE"),)

    agent_id: Mapped[str] = mapped_column(String, primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    sha: Mapped[str] = mapped_column(String)
    blocks: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.clock_timestamp())


class MemfsObject(TenantOwned, Base):
    """A git object (blob, tree or commit) of the agent's repository, as git stores it (its type
    number and raw content)."""

    __tablename__ = "memfs_object"
    __table_args__ = (tenant_foreign_key("agent_id", "agent", ondelete="CASCADE"),)

    agent_id: Mapped[str] = mapped_column(String, primary_key=True)
    sha: Mapped[str] = mapped_column(String, primary_key=True)
    type_num: Mapped[int] = mapped_column(SmallInteger)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class MemfsFile(TenantOwned, Base):
    """A file of the repository that is no block, as the last push left it (its blob is a MemfsObject)."""

    __tablename__ = "memfs_file"
    __table_args__ = (tenant_foreign_key("agent_id", "agent", ondelete="CASCADE"),)

    agent_id: Mapped[str] = mapped_column(String, primary_key=True)
    path: Mapped[str] = mapped_column(Text, primary_key=True)
    mode: Mapped[int] = mapped_column(Integer)
    blob_sha: Mapped[str] = mapped_column(String)
