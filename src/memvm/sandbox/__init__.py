"""Running untrusted tool code: one process per call, isolated by bubblewrap (or, if the operator
chose it, a plain subprocess), limited in time, memory, processes and output. No database here."""
