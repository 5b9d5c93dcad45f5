"""Organizations and API keys: creating, listing and revoking keys, and resolving a key to its caller."""
