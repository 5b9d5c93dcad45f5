"""URL helpers for the tests' PostgreSQL."""

from sqlalchemy.engine import make_url


def with_database(url: str, database: str) -> str:
    return make_url(url).set(database=database).render_as_string(hide_password=False)


def asyncpg_dsn(url: str) -> dict:
    parsed = make_url(url)
    return {"user": parsed.username, "database": parsed.database, "host": parsed.query.get("host") or parsed.host}
