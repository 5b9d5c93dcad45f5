"""The agent loop: a send, its turn and the turn's steps (model call, policy, approvals, usage,
compaction), background runs and their cancel signals, the turn lock, and RuntimeDeps, what a
process hands every runtime call."""
