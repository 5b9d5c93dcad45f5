"""`memvm agents import` and `memvm agents export` against a database: a Letta export goes in, the
agent comes out as a file that imports again; a bad file is refused with its problems."""

import json
from pathlib import Path

from tests.support.serve import child_env, memvm

FIXTURES = Path(__file__).parent.parent / "agentfiles" / "fixtures"


def test_import_then_export_from_the_command_line(database_url: str, tmp_path: Path) -> None:
    env = child_env(MEMVM_DATABASE_URL=database_url)
    imported = memvm(env, "agents", "import", str(FIXTURES / "letta-0.16.8-sample.af"), "--model", "openai/gpt-4o-mini")
    assert imported.returncode == 0, imported.stderr
    [agent_id] = imported.stdout.split()

    exported = memvm(env, "agents", "export", agent_id)
    assert exported.returncode == 0, exported.stderr
    file = json.loads(exported.stdout)
    assert file["agents"][0]["name"] == "sample-editor" and file["agents"][0]["model"] == "openai/gpt-4o-mini"
    assert len(file["agents"][0]["messages"]) == 9  # the compiled system prompt and the 8 stored messages

    (tmp_path / "again.af").write_text(exported.stdout)
    again = memvm(env, "agents", "import", str(tmp_path / "again.af"), "--name", "second")
    assert again.returncode == 0, again.stderr
    assert len(again.stdout.split()) == 1

    refused = memvm(env, "agents", "import", str(FIXTURES / "bad-file.af"))
    missing = memvm(env, "agents", "export", "agent-00000000-0000-4000-8000-000000000000")
    assert refused.returncode == 1 and "4 problem(s)" in refused.stderr
    assert missing.returncode == 1 and "not found" in missing.stderr
