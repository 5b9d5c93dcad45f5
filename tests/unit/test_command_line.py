"""The two ways to run the command line: the `memvm` script (memvm.cli:main) and `python -m memvm.cli`."""

import subprocess
import sys

from memvm import __version__
from memvm.cli import main


def test_the_script_entry_point_is_the_command_line(capsys):
    assert main(["version"]) == 0
    assert capsys.readouterr().out == f"memvm {__version__}\n"


def test_python_m_memvm_cli_runs_the_command_line():
    ran = subprocess.run([sys.executable, "-m", "memvm.cli", "version"], capture_output=True, text=True, timeout=60)

    assert (ran.returncode, ran.stdout) == (0, f"memvm {__version__}\n")
