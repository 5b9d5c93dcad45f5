"""Conversation messages: request/response shapes, SQL, and the Letta message format."""
