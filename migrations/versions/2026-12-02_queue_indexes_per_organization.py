"""The embedding queues' indexes lead with organization_id: the workers claim one organization's rows
at a time (Citus allows FOR UPDATE only within one shard, docs/scale-out.md), and a claim of one
organization must not walk every other organization's backlog.

Revision ID: 5c1e7a9d3b20
Revises: 891482a79f86
Create Date: 2026-12-02 03:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "5c1e7a9d3b20"
down_revision = "891482a79f86"
branch_labels = None
depends_on = None

# Fixed here, not imported: a migration must not change when application code does.
MESSAGE_QUEUE = "embedding IS NULL AND kind = 'message' AND coalesce(content, '') <> '' AND embed_attempts < 5"
CHUNK_QUEUE = "embedding IS NULL AND embed_attempts < 5"
QUEUES = (("message", "seq", MESSAGE_QUEUE), ("file_chunk", "id", CHUNK_QUEUE))  # table, queue order, predicate


def _recreate(*, per_organization: bool) -> None:
    for table, order, predicate in QUEUES:
        name = f"ix_{table}_embedding_queue"
        columns = ["organization_id", order] if per_organization else [order]
        op.drop_index(name, table_name=table, postgresql_where=sa.text(predicate))
        op.create_index(name, table, columns, postgresql_where=sa.text(predicate))


def upgrade() -> None:
    _recreate(per_organization=True)


def downgrade() -> None:
    _recreate(per_organization=False)
