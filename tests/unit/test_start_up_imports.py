"""What a process imports decides how long `memvm serve` takes to answer: it imports the app once, while
its embedded PostgreSQL starts, and forks the HTTP processes from there after its checks. These guard
the imports that start-up defers (see processes.DEFERRED_IMPORTS, and the MCP SDK's)."""

import subprocess
import sys

from memvm.processes import DEFERRED_IMPORTS


def modules_loaded_by(statement: str, candidates: tuple[str, ...]) -> list[str]:
    """The candidates a fresh interpreter has loaded after `statement` (a None in sys.modules is a
    module skipped, not loaded)."""
    check = f"import sys\n{statement}\nprint(','.join(m for m in {candidates!r} if sys.modules.get(m) is not None))"
    output = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True, timeout=120)
    return [name for name in output.stdout.strip().split(",") if name]


def test_the_app_loads_without_the_deferred_modules() -> None:
    assert modules_loaded_by("import memvm.main", DEFERRED_IMPORTS) == []


def test_the_app_loads_without_the_mcp_sdk() -> None:
    """The SDK takes most of a second and about 28 MiB to import: a process imports it on its first MCP
    request (mcpclient/sdk.py), and `memvm serve` answers without it."""
    assert modules_loaded_by("import memvm.main", ("mcp",)) == []


def test_the_app_loads_without_git_or_the_console_templates() -> None:
    """dulwich (api/git.py) and jinja2 (the console's templates) load on their first request: together
    about a third of a second of a start's CPU, which most servers never use."""
    assert modules_loaded_by("import memvm.main", ("dulwich", "jinja2")) == []


def test_the_command_line_loads_without_the_database_stack() -> None:
    """Every `memvm` command imports these; `memvm serve` loads the stacks only when it needs them."""
    statement = "import memvm.cli, memvm.cli.http_processes, memvm.cli.worker, memvm.db.database"

    assert modules_loaded_by(statement, ("sqlalchemy", "fastapi", "asyncpg", *DEFERRED_IMPORTS)) == []


def test_the_supervisor_checks_before_listening_without_the_web_stack() -> None:
    """It does load the database stack to check the database before anything listens (memvm.cli.preflight),
    but neither the web framework nor the deferred modules: the HTTP processes load those."""
    assert modules_loaded_by("import memvm.cli.preflight", ("fastapi", "starlette", *DEFERRED_IMPORTS)) == []


def test_serve_skips_the_optional_extras_its_libraries_would_load() -> None:
    """httpx loads its command-line client (rich, pygments) and alembic's mako its highlighting
    (pygments) whenever those are installed, as on a developer's machine; FastAPI loads pydantic.v1 to
    ask whether a route's types are version-1 models. `memvm serve` uses none of them."""
    statement = (
        "import memvm.processes as processes\n"
        "processes.skip_unused_extras()\n"
        "import httpx, alembic.runtime.migration, memvm.cli.preflight, memvm.main\n"
        "from memvm.config import Settings\n"
        "memvm.main.create_app(Settings())"
    )

    assert modules_loaded_by(statement, ("rich", "pygments", "pydantic.v1")) == []


def test_the_background_thread_imports_every_deferred_module() -> None:
    statement = "import memvm.processes as processes\nprocesses.import_deferred_in_background().join(timeout=60)"

    assert modules_loaded_by(statement, DEFERRED_IMPORTS) == list(DEFERRED_IMPORTS)
