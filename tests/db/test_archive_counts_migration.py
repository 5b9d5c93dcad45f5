"""The archive counts' migration fills them from the passages already stored, and goes back cleanly."""

from memvm.actors import DEFAULT_ORGANIZATION_ID
from tests.support.pg import database_at, migrate_to

BEFORE_ARCHIVE_COUNTS = "5c1e7a9d3b20"
ARCHIVE_COUNTS = "6d2f8b4e1a73"
PASSAGES = {  # id: (archive, tags)
    "passage-1": ("archive-1", ["work", "travel"]),
    "passage-2": ("archive-1", ["work"]),
    "passage-3": ("archive-1", []),
    "passage-4": ("archive-2", ["work", "family"]),
}
COUNTS_GONE = (
    "SELECT to_regclass('archive_tag') IS NULL AND NOT EXISTS (SELECT FROM information_schema.columns"
    " WHERE table_name = 'archive' AND column_name = 'passage_count')"
)


async def test_archive_counts_are_filled_from_existing_passages_and_go_with_a_downgrade(server_url):
    async with database_at(server_url, "upgrade_archive_counts", BEFORE_ARCHIVE_COUNTS) as (url, db):
        for archive_id in ("archive-1", "archive-2", "archive-3"):
            await db.execute(
                "INSERT INTO archive (id, organization_id, name, embedding_model, embedding_dim, metadata)"
                " VALUES ($1, $2, 'a', 'm', 3, '{}')",
                archive_id,
                DEFAULT_ORGANIZATION_ID,
            )
        for passage_id, (archive_id, tags) in PASSAGES.items():
            await db.execute(
                "INSERT INTO passage (id, organization_id, archive_id, text, embedding, embedding_model, embedding_dim,"
                " tags, metadata, writer_type) VALUES ($1, $2, $3, 'note', '[1,0,0]', 'm', 3, $4, '{}', 'api')",
                passage_id,
                DEFAULT_ORGANIZATION_ID,
                archive_id,
                tags,
            )
        await migrate_to(url, ARCHIVE_COUNTS)
        counts = [tuple(row) for row in await db.fetch("SELECT id, passage_count FROM archive ORDER BY id")]
        tags = [tuple(row) for row in await db.fetch("SELECT archive_id, tag, passages FROM archive_tag ORDER BY 1, 2")]
        owners = await db.fetchval("SELECT array_agg(DISTINCT organization_id) FROM archive_tag")
        await db.execute("DELETE FROM archive WHERE id = 'archive-2'")
        left = await db.fetchval("SELECT array_agg(DISTINCT archive_id) FROM archive_tag")
        await migrate_to(url, BEFORE_ARCHIVE_COUNTS, down=True)
        gone = await db.fetchval(COUNTS_GONE)

    assert counts == [("archive-1", 3), ("archive-2", 1), ("archive-3", 0)]
    assert tags == [
        ("archive-1", "travel", 1),
        ("archive-1", "work", 2),
        ("archive-2", "family", 1),
        ("archive-2", "work", 1),
    ]
    assert (owners, left, gone) == ([DEFAULT_ORGANIZATION_ID], ["archive-1"], True)
