"""The agent step loop and what it needs: context window, policy, compaction, the turn lock."""
