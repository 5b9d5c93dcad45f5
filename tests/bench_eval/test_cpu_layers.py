"""bench/cpu_layers.py's split of a py-spy profile: each sample goes to the first layer whose rule its
stack meets, and the database layer's samples to their part."""

from pathlib import Path

from bench.cpu_layers import layers

ROOT = "_run_module_as_main (<frozen runpy>:198);Server.run (uvicorn/server.py:67)"
CHAT = "OpenAIChatModel.complete (memvm/llm/openai_chat.py:80)"
FLUSH = "Session._flush (sqlalchemy/orm/session.py:4730);_emit_insert_statements (sqlalchemy/orm/persistence.py:1100)"
SAMPLES = {
    # a model call's own database-free stack, even where the SDK's HTTP client runs
    f"{ROOT};{CHAT};AsyncAPIClient.request (openai/_base_client.py:1500)": 7,
    f"{ROOT};Turn._store_step (memvm/runtime/loop/turn.py:300);{FLUSH}": 5,
    f"{ROOT};chat_window (memvm/messages/repository.py:41);PreparedStatement.fetch (asyncpg/prepared_stmt.py:176)": 3,
    f"{ROOT};to_chat (memvm/runtime/loop/conversation.py:38)": 2,
    f"{ROOT};Router.__call__ (starlette/routing.py:700)": 4,
    "Thread._bootstrap (threading.py:995);Thread._bootstrap_inner (threading.py:1038)": 50,  # an idle pool thread
}


def test_samples_are_split_by_layer_and_database_part(tmp_path: Path) -> None:
    profile = tmp_path / "http.txt"
    profile.write_text("".join(f"{stack} {count}\n" for stack, count in SAMPLES.items()) + "a line py-spy cut short\n")

    by_layer, by_part = layers(profile)

    assert by_layer == {
        "model calls: openai SDK and its HTTP client": 7,
        "database: SQLAlchemy and asyncpg": 8,
        "memvm's own code": 2,
        "HTTP serving: uvicorn/uvloop, Starlette, FastAPI, pydantic": 4,
    }
    assert by_part == {"SQLAlchemy: the unit of work's flush": 5, "asyncpg protocol (encoding parameters, decoding rows)": 3}
