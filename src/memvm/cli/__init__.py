"""`memvm`, the command line (`memvm = "memvm.cli:main"`, or `python -m memvm.cli`).

Top down, as the import contract orders them: commands.py is the parser; serve.py and each other
command's module (worker, keys, agentfiles, blocks, backup, database) adds its own subcommands and
runs them; serve's process code is beside them (preflight.py: its checks before anything listens,
http_processes.py and head_limits.py: its HTTP processes, worker.py: the embedding worker's). The
modules import the server and the database stack only inside the functions that need them:
`memvm --help` loads neither, and the serve supervisor never loads the web framework.
"""

from memvm.cli.commands import main

__all__ = ["main"]
