"""Folders (Letta's sources): named groups of files, attached to agents."""
