"""Archival memory: archives, passages, and which agents can read them."""
