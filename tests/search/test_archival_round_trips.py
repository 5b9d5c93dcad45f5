"""The archival routes that embed read which model applies without a transaction (db/uow.py
`reading`), so each takes one transaction: the insert's, or the search's (which needs one for its
vector search settings). The embedding call sits between the two units, so they cannot be one.

A first insert and search warm the pooled connections up first: asyncpg introspects a type the first
time a connection sends it (a `SELECT current_setting('jit')` and a `WITH RECURSIVE typeinfo_tree`),
once per connection, not per request."""

import asyncio

from tests.db.test_read_only_units import sent_alone
from tests.loop.test_turn_round_trips import counted, quiet_client
from tests.search.test_archival_api import insert, search
from tests.support.api import create_agent


async def test_an_insert_and_a_search_each_send_one_begin_and_one_commit(settings):
    async with quiet_client(settings) as (client, engine):
        agent = await create_agent(client, model="openai/scripted-model")
        await insert(client, agent["id"], "Ada tends the lighthouse lamp on Tuesdays.")
        await search(client, agent["id"], "who tends the lamp?", top_k=3)
        with sent_alone(engine) as inserting, counted(engine) as inserted:
            await insert(client, agent["id"], "Bob keeps bees on the roof of the harbour office.")
            await asyncio.sleep(0)  # asyncpg calls its query loggers soon, not at once
        with sent_alone(engine) as searching, counted(engine) as searched:
            found = await search(client, agent["id"], "who keeps bees?", top_k=3)
            await asyncio.sleep(0)

    assert found["results"][0]["content"] == "Bob keeps bees on the roof of the harbour office."
    assert [sql.split()[0] for sql in inserting] == ["BEGIN", "COMMIT;"] and inserted.transactions == 1
    assert [sql.split()[0] for sql in searching] == ["BEGIN", "COMMIT;"] and searched.transactions == 1
