"""Running the model's tool calls: the executor and the built-in tools' handlers. The tools as
stored rows (catalog, attachments, JSON schemas) are the `memvm.tools` domain."""
