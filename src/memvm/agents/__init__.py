"""Agents: schemas, SQL, lifecycle, and compiling their system prompts."""
