"""The model behind a small port: provider-neutral types, the ChatModel protocol, the OpenAI adapter."""
