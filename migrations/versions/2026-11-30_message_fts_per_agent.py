"""Full-text index per agent: GIN over (agent_id, fts), so a search reads only its agent's matches.

The previous GIN over fts alone matched a lexeme in every agent's history and filtered by agent
afterwards, so a common word cost as much as the whole server's messages that contain it.
btree_gin (a contrib extension shipped with PostgreSQL, trusted) lets GIN index agent_id.

Revision ID: 87555ae4a455
Revises: fc98feacdd8a
Create Date: 2026-11-30 02:00:00
"""

from alembic import op

revision = "87555ae4a455"
down_revision = "fc98feacdd8a"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
    op.create_index("ix_message_agent_id_fts", "message", ["agent_id", "fts"], unique=False, postgresql_using="gin")
    op.drop_index("ix_message_fts", table_name="message", postgresql_using="gin")


def downgrade() -> None:
    op.create_index("ix_message_fts", "message", ["fts"], unique=False, postgresql_using="gin")
    op.drop_index("ix_message_agent_id_fts", table_name="message", postgresql_using="gin")
