"""What routes call outside a turn that needs what the runtime holds: an embedder, a model (to
summarize, or the provider's model list) or the turn lock. None holds a transaction open across an
embedding or a model call, and none imports another."""
