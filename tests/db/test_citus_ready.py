"""The migrated schema can be distributed by Citus on organization_id (docs/scale-out.md).

Read from PostgreSQL's catalogs, not from the models: every table is classified (distributed by
organization_id, reference, or local to the coordinator), and
- a distributed table's organization_id is NOT NULL and part of its primary key and of every unique
  constraint and unique index, so each one can be enforced inside one shard;
- a foreign key between distributed tables maps organization_id to organization_id, so both rows
  live in co-located shards; one to a reference table is fine; a reference table refers to
  reference tables only (Citus refuses a reference → distributed key);
- no table a turn writes has an identity or sequence-backed column, and every other one is in
  the allow-list below, which says what Citus does with it, so a new counter cannot slip in unnoticed.
"""

from dataclasses import dataclass

import asyncpg

TENANT_KEY = "organization_id"

# Replicated to every node. Each entry says why the table cannot be distributed by organization.
REFERENCE_TABLES = {
    "organization": "the tenants themselves: every distributed table's organization_id refers to it",
    "api_key": "looked up by the SHA-256 of a key before its organization is known, so that hash is unique"
    " across organizations; a few rows per organization, written only by administrators",
    "tool": "built-in tools have no organization (NULL, which a distribution column cannot hold) and are shared by"
    " all; every turn joins agent_tool to it, which a reference table keeps on the agent's own node",
    "mcp_server": "tool (a reference table) cascades from it: an MCP server's tools go with their server, and"
    " a reference table may only refer to reference tables",
}
# Only on the coordinator.
LOCAL_TABLES = {"alembic_version": "Alembic's bookkeeping; migrations run on the coordinator"}

# Identity columns. Citus (11 and later) gives each node its own range of a bigint sequence: values
# stay unique, and follow insertion order among rows inserted through one node. memvm sends every
# statement through the coordinator (its advisory locks require one node), so each column below keeps
# today's order; each entry says how often it is drawn and what would reorder if inserts went through
# several nodes (docs/scale-out.md, "No counter on a turn's path").
IDENTITY_COLUMNS = {
    "file_chunk.id": "the file worker, per chunk stored: the embedding queue's order and a search tie-breaker",
    "agent_block.position": "attaching a block: the order an agent's blocks render in",
    "agent_archive.position": "attaching an archive: the order of an agent's archives",
    "agent_folder.position": "attaching a folder: the order of an agent's folders",
    "agent_tool.position": "attaching a tool: the order of an agent's tools",
}

COLUMNS = """
SELECT c.relname AS table_name, a.attname AS column_name, a.attnotnull AS not_null,
       a.attidentity <> '' OR coalesce(pg_get_expr(d.adbin, d.adrelid), '') LIKE 'nextval(%' AS counter
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
"""

# Unique and exclusion constraints, foreign keys, and unique indexes that back no constraint.
KEYS = """
SELECT con.conname AS name, con.contype::text AS kind, c.relname AS table_name,
       ARRAY(SELECT attname FROM unnest(con.conkey) WITH ORDINALITY k(num, pos)
             JOIN pg_attribute ON attrelid = con.conrelid AND attnum = k.num ORDER BY k.pos) AS columns,
       r.relname AS referred_table,
       ARRAY(SELECT attname FROM unnest(con.confkey) WITH ORDINALITY k(num, pos)
             JOIN pg_attribute ON attrelid = con.confrelid AND attnum = k.num ORDER BY k.pos) AS referred_columns
FROM pg_constraint con
JOIN pg_class c ON c.oid = con.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_class r ON r.oid = con.confrelid
WHERE n.nspname = 'public' AND con.contype IN ('p', 'u', 'x', 'f')
UNION ALL
SELECT i.relname, 'i', c.relname,
       ARRAY(SELECT attname FROM unnest(ix.indkey) k(num) JOIN pg_attribute ON attrelid = c.oid AND attnum = k.num),
       NULL, NULL
FROM pg_index ix
JOIN pg_class i ON i.oid = ix.indexrelid
JOIN pg_class c ON c.oid = ix.indrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND ix.indisunique
  AND NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conindid = ix.indexrelid)
"""


@dataclass(frozen=True)
class Key:
    name: str
    kind: str  # p primary key, u unique, x exclusion, f foreign key, i unique index
    table: str
    columns: list[str]
    referred_table: str | None
    referred_columns: list[str] | None


def classify(tables: set[str], tenant_columns: dict[str, bool]) -> tuple[set[str], list[str]]:
    """The distributed tables, and the tables nobody classified."""
    distributed = {t for t in tenant_columns if t not in REFERENCE_TABLES and t not in LOCAL_TABLES}
    unclassified = sorted(tables - distributed - REFERENCE_TABLES.keys() - LOCAL_TABLES.keys())
    return distributed, [f"{t}: neither distributed (no {TENANT_KEY}) nor a reference or local table" for t in unclassified]


def tenant_key_violation(key: Key, distributed: set[str]) -> str | None:
    """Why Citus could not keep this key within one organization's shard, if it could not."""
    if key.table not in distributed:
        if key.kind == "f" and key.referred_table not in REFERENCE_TABLES:
            return f"{key.name}: the reference table {key.table} refers to {key.referred_table}, not a reference table"
        return None
    if key.kind != "f":
        return None if TENANT_KEY in key.columns else f"{key.name} on {key.table}{tuple(key.columns)} lacks {TENANT_KEY}"
    if key.referred_table in REFERENCE_TABLES:
        return None
    pairs = list(zip(key.columns, key.referred_columns or [], strict=True))
    if key.referred_table in distributed and (TENANT_KEY, TENANT_KEY) in pairs:
        return None
    referred = f"{key.referred_table}{tuple(key.referred_columns or [])}"
    return f"{key.name}: {key.table}{tuple(key.columns)} → {referred} does not map {TENANT_KEY} to {TENANT_KEY}"


# What a turn writes (block and block_change when the agent edits its memory): no counter may be
# drawn there (docs/scale-out.md).
TURN_TABLES = {"message", "step", "run", "run_event", "block", "block_change"}


def counter_violations(counters: set[str]) -> list[str]:
    on_turns = [f"{c}: a counter in a table a turn writes" for c in sorted(counters) if c.split(".")[0] in TURN_TABLES]
    unlisted = [
        f"{c}: an identity or sequence column not in IDENTITY_COLUMNS" for c in sorted(counters - IDENTITY_COLUMNS.keys())
    ]
    stale = [f"{c}: in IDENTITY_COLUMNS but no longer a counter" for c in sorted(IDENTITY_COLUMNS.keys() - counters)]
    return on_turns + unlisted + stale


async def test_every_tenant_table_can_be_distributed_by_organization(db: asyncpg.Connection):
    columns = await db.fetch(COLUMNS)
    tables = {row["table_name"] for row in columns}
    tenant_columns = {row["table_name"]: row["not_null"] for row in columns if row["column_name"] == TENANT_KEY}
    distributed, violations = classify(tables, tenant_columns)
    violations += [f"{t}.{TENANT_KEY} may be NULL" for t in sorted(distributed) if not tenant_columns[t]]
    keys = [Key(*row) for row in await db.fetch(KEYS)]
    violations += [v for key in keys if (v := tenant_key_violation(key, distributed))]
    violations += [f"{t} has no primary key" for t in sorted(distributed - {key.table for key in keys if key.kind == "p"})]
    counters = {f"{row['table_name']}.{row['column_name']}" for row in columns if row["counter"]}
    violations += counter_violations(counters)

    print(
        f"checked {len(distributed)} distributed tables ({', '.join(sorted(distributed))}),"
        f" {len(REFERENCE_TABLES)} reference, {len(LOCAL_TABLES)} local;"
        f" {sum(k.kind in 'pux' for k in keys)} primary keys and unique constraints,"
        f" {sum(k.kind == 'i' for k in keys)} unique indexes, {sum(k.kind == 'f' for k in keys)} foreign keys,"
        f" {len(counters)} identity columns"
    )
    assert violations == [], "\n".join(violations)
