"""Text → vectors for memory search: an offline local model by default (local.py), or an
OpenAI-compatible endpoint (openai_embedder.py); registry.py picks one by handle. Import the modules
themselves: this package imports nothing, so that loading the port does not load numpy or the SDK."""
