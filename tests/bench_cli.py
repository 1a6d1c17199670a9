"""The command line tests run: the installed console script next to this interpreter, `python -m bench`
where it is missing. A module of its own, not conftest: with several conftest.py files on the path,
`from conftest import` names whichever one was imported first."""

from __future__ import annotations

import sys
from pathlib import Path

_SCRIPT = Path(sys.executable).with_name("fsdp-bench")
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "bench"]
