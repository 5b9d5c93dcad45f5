"""In-process fakes of external services for tests (real sockets, no threads)."""
