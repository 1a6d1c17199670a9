import sys

from bench.cli.main import entry

sys.exit(entry())
