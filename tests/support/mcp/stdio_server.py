"""The test tools over stdio: `python stdio_server.py` (its own directory is on sys.path, so
tools.py is found inside the jail too, where the tests package is not)."""

from tools import build_server

if __name__ == "__main__":
    build_server().run("stdio")
