"""Core-memory blocks: schemas, SQL, and the single write path."""
