"""MemFS: an agent's memory as a git repository, served over git smart HTTP (issue 26)."""
