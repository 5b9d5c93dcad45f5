"""Agents' system prompts: the default template, and compiling memory into the stored prompt.

Every domain that changes what a prompt shows (blocks, attachments, archives, messages, the agent
itself) calls `service.recompile_agents` in its own transaction. This package sits below all of
them, so it reads the tables that feed a prompt itself (repository.py) instead of calling them.
"""
