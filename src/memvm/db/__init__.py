"""Database plumbing: engine, transactions, embedded server, migrations."""
