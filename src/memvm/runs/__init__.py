"""Runs (one per turn) and steps (one per model call): how a turn went, for clients and operators."""
