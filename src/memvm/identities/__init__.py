"""Identities (Letta's): who an organization's agents and blocks belong to."""
