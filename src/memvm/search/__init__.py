"""Search over external memory: archival passages (vector) and conversation history (hybrid)."""
