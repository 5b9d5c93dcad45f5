"""organization_id in every key between tenant tables, so Citus can distribute them by it
(docs/scale-out.md): it leads each tenant table's primary key, every unique key of theirs, and every
foreign key from one to another (both sides), with the same ON DELETE / ON UPDATE actions; an agent's
default archive, when deleted, sets only default_archive_id to NULL. tool → mcp_server (both reference
tables under Citus) gains it too, which also keeps a server's tools in its organization.

Revision ID: 891482a79f86
Revises: 3e8a1f6c2b94
Create Date: 2026-12-01 23:30:00
"""

from typing import NamedTuple

from alembic import op

revision = "891482a79f86"
down_revision = "3e8a1f6c2b94"
branch_labels = None
depends_on = None

TENANT_KEY = "organization_id"

# Each tenant table's primary key before this revision; organization_id now leads it.
PRIMARY_KEYS = {
    "agent": ["id"],
    "agent_archive": ["agent_id", "archive_id"],
    "agent_block": ["agent_id", "block_id"],
    "agent_file": ["id"],
    "agent_folder": ["agent_id", "folder_id"],
    "agent_tool": ["agent_id", "tool_id"],
    "archive": ["id"],
    "block": ["id"],
    "block_change": ["id"],
    "conversation": ["id"],
    "conversation_block": ["conversation_id", "label"],
    "file_chunk": ["id"],
    "folder": ["id"],
    "folder_file": ["id"],
    "identity": ["id"],
    "identity_agent": ["identity_id", "agent_id"],
    "identity_block": ["identity_id", "block_id"],
    "mcp_server": ["id"],
    "memfs_commit": ["agent_id", "seq"],
    "memfs_file": ["agent_id", "path"],
    "memfs_object": ["agent_id", "sha"],
    "message": ["id"],
    "passage": ["id"],
    "run": ["id"],
    "run_event": ["run_id", "seq"],
    "step": ["id"],
}


class Unique(NamedTuple):
    table: str
    columns: list[str]
    old_name: str
    new_name: str


UNIQUES = [
    # Both names are what the code matches conflicts on (agent_block) or the label FKs refer to (block).
    Unique("block", ["id", "label"], "uq_block_id_label", "uq_block_id_label"),
    Unique("agent_block", ["agent_id", "label"], "uq_agent_block_agent_id_label", "uq_agent_block_agent_id_label"),
    Unique("message", ["seq"], "uq_message_seq", "uq_message_organization_id_seq"),
    Unique(
        "conversation_block", ["block_id"], "uq_conversation_block_block_id", "uq_conversation_block_organization_id_block_id"
    ),
    Unique(
        "folder_file",
        ["folder_id", "file_name"],
        "uq_folder_file_folder_id_file_name",
        "uq_folder_file_organization_id_folder_id_file_name",
    ),
    Unique("file_chunk", ["file_id", "seq"], "uq_file_chunk_file_id_seq", "uq_file_chunk_organization_id_file_id_seq"),
    Unique(
        "agent_file", ["agent_id", "file_id"], "uq_agent_file_agent_id_file_id", "uq_agent_file_organization_id_agent_id_file_id"
    ),
]
OTID_INDEX = ("uq_message_agent_id_otid", "uq_message_organization_id_agent_id_otid")


class ForeignKey(NamedTuple):
    table: str
    columns: list[str]
    referred_table: str
    referred_columns: list[str]
    name: str
    ondelete: str = "CASCADE"
    onupdate: str | None = None


def cascade(table: str, column: str, referred_table: str) -> ForeignKey:
    return ForeignKey(table, [column], referred_table, ["id"], f"fk_{table}_{column}_{referred_table}")


FOREIGN_KEYS = [
    ForeignKey("agent", ["default_archive_id"], "archive", ["id"], "fk_agent_default_archive_id_archive", "SET NULL"),
    cascade("agent_archive", "agent_id", "agent"),
    cascade("agent_archive", "archive_id", "archive"),
    cascade("agent_block", "agent_id", "agent"),
    ForeignKey("agent_block", ["block_id", "label"], "block", ["id", "label"], "fk_agent_block_block", onupdate="CASCADE"),
    cascade("agent_file", "agent_id", "agent"),
    cascade("agent_file", "file_id", "folder_file"),
    cascade("agent_file", "folder_id", "folder"),
    cascade("agent_folder", "agent_id", "agent"),
    cascade("agent_folder", "folder_id", "folder"),
    cascade("agent_tool", "agent_id", "agent"),
    cascade("conversation", "agent_id", "agent"),
    ForeignKey(
        "conversation_block", ["block_id", "label"], "block", ["id", "label"], "fk_conversation_block_block", onupdate="CASCADE"
    ),
    cascade("conversation_block", "conversation_id", "conversation"),
    cascade("file_chunk", "file_id", "folder_file"),
    cascade("file_chunk", "folder_id", "folder"),
    cascade("folder_file", "folder_id", "folder"),
    cascade("identity_agent", "agent_id", "agent"),
    cascade("identity_agent", "identity_id", "identity"),
    cascade("identity_block", "block_id", "block"),
    cascade("identity_block", "identity_id", "identity"),
    cascade("memfs_commit", "agent_id", "agent"),
    cascade("memfs_file", "agent_id", "agent"),
    cascade("memfs_object", "agent_id", "agent"),
    cascade("message", "agent_id", "agent"),
    cascade("message", "conversation_id", "conversation"),
    cascade("passage", "archive_id", "archive"),
    cascade("run", "agent_id", "agent"),
    cascade("run", "conversation_id", "conversation"),
    cascade("run_event", "run_id", "run"),
    cascade("step", "agent_id", "agent"),
    cascade("step", "run_id", "run"),
    cascade("tool", "mcp_server_id", "mcp_server"),
]


def _with_tenant(columns: list[str], tenant: bool) -> list[str]:
    return [TENANT_KEY, *columns] if tenant else columns


def _create_foreign_key(fk: ForeignKey, tenant: bool) -> None:
    ondelete = fk.ondelete
    if tenant and ondelete == "SET NULL":
        # Never organization_id: it is the row's own key, and NOT NULL.
        ondelete = f"SET NULL ({', '.join(fk.columns)})"
    op.create_foreign_key(
        fk.name,
        fk.table,
        fk.referred_table,
        _with_tenant(fk.columns, tenant),
        _with_tenant(fk.referred_columns, tenant),
        ondelete=ondelete,
        onupdate=fk.onupdate,
    )


def _rebuild_keys(tenant: bool) -> None:
    """Drop every key this revision changes and create it again, with organization_id (`tenant`) or
    without: foreign keys first, as they depend on the keys they refer to."""
    for fk in FOREIGN_KEYS:
        op.drop_constraint(fk.name, fk.table, type_="foreignkey")
    for unique in UNIQUES:
        op.drop_constraint(unique.new_name if not tenant else unique.old_name, unique.table, type_="unique")
    for table in PRIMARY_KEYS:
        op.drop_constraint(f"pk_{table}", table, type_="primary")
    for table, columns in PRIMARY_KEYS.items():
        op.create_primary_key(f"pk_{table}", table, _with_tenant(columns, tenant))
    for unique in UNIQUES:
        op.create_unique_constraint(
            unique.new_name if tenant else unique.old_name, unique.table, _with_tenant(unique.columns, tenant)
        )
    for fk in FOREIGN_KEYS:
        _create_foreign_key(fk, tenant)
    old_index, new_index = OTID_INDEX
    op.drop_index(old_index if tenant else new_index, table_name="message")
    op.create_index(
        new_index if tenant else old_index,
        "message",
        _with_tenant(["agent_id", "otid"], tenant),
        unique=True,
        postgresql_where="otid IS NOT NULL",
    )


def upgrade() -> None:
    _rebuild_keys(tenant=True)


def downgrade() -> None:
    _rebuild_keys(tenant=False)
