"""memvm: a self-hostable REST server for stateful LLM agents."""

__version__ = "0.1.0"
