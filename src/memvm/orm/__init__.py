"""ORM tables; importing this package registers every table on Base.metadata (Alembic's target)."""

from memvm.db.base import Base
from memvm.orm.agent import Agent, AgentBlock
from memvm.orm.archive import AgentArchive, Archive, ArchiveTag, Passage
from memvm.orm.block import Block, BlockChange
from memvm.orm.conversation import Conversation, ConversationBlock
from memvm.orm.file import AgentFile, FileChunk, FolderFile
from memvm.orm.folder import AgentFolder, Folder
from memvm.orm.identity import Identity, IdentityAgent, IdentityBlock
from memvm.orm.mcp_server import McpServer
from memvm.orm.memfs import MemfsCommit, MemfsFile, MemfsObject
from memvm.orm.message import Message
from memvm.orm.organization import ApiKey, Organization
from memvm.orm.run import Run, RunEvent, Step
from memvm.orm.tool import AgentTool, Tool

__all__ = [
    "Agent",
    "AgentArchive",
    "AgentBlock",
    "AgentFile",
    "AgentFolder",
    "AgentTool",
    "ApiKey",
    "Archive",
    "ArchiveTag",
    "Base",
    "Block",
    "BlockChange",
    "Conversation",
    "ConversationBlock",
    "FileChunk",
    "Folder",
    "FolderFile",
    "Identity",
    "IdentityAgent",
    "IdentityBlock",
    "McpServer",
    "MemfsCommit",
    "MemfsFile",
    "MemfsObject",
    "Message",
    "Organization",
    "Passage",
    "Run",
    "RunEvent",
    "Step",
    "Tool",
]
