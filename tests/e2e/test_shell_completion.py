"""Shell completion through bash itself: argcomplete's hook, as `eval "$(register-python-argcomplete
fsdp-bench)"` installs it (README), asked for a line as bash asks it at a TAB. bash splits words at
`=` (COMP_WORDBREAKS), so `model=ti<TAB>` completes `ti`, not the whole word. Each case is one bash
and one fsdp-bench start, no ranks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.config.registry import SHIPPED

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.skipif(
    shutil.which("bash") is None
    or not (BIN / "fsdp-bench").exists()
    or not (BIN / "register-python-argcomplete").exists(),
    reason="needs bash, the fsdp-bench console script and argcomplete's register-python-argcomplete",
)

# What bash does at a TAB: the line and the cursor (COMP_LINE, COMP_POINT, COMP_WORDS split at
# COMP_WORDBREAKS, COMP_CWORD), then the function `complete -p fsdp-bench` names; COMPREPLY is the answer.
ASK = r"""
eval "$(register-python-argcomplete fsdp-bench)"
read -r -a spec <<< "$(complete -p fsdp-bench)"
function=${spec[-2]}
[[ $COMP_WORDBREAKS == *=* ]] || { echo "COMP_WORDBREAKS without '='" >&2; exit 3; }
COMP_LINE=$1
COMP_POINT=${#COMP_LINE}
words=${COMP_LINE//=/ = }
read -r -a COMP_WORDS <<< "$words"
[[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
[[ $COMP_LINE == *"=" ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
"$function" fsdp-bench "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"""


def complete(line: str, **env: str) -> list[str]:
    environment = {k: v for k, v in os.environ.items() if k != "FSDP_BENCH_CONFIG_DIR"}
    environment.update(PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", **env)
    proc = subprocess.run(["bash", "-c", ASK, "ask", line], capture_output=True, text=True, env=environment, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [word.rstrip() for word in proc.stdout.splitlines() if word.strip()]


def test_commands_flags_options_keys_and_values_through_bash(tmp_path):
    assert complete("fsdp-bench sw") == ["sweep"]
    assert complete("fsdp-bench sweep --dr") == ["--dry-run"]
    assert complete("fsdp-bench sweep model=ti") == ["tiny", "tinyllama-1.1b"]  # the word after `=`
    assert complete("fsdp-bench plan train.checkpoint=") == ["none", "sync", "async"]
    assert "train.seq_len=" in complete("fsdp-bench run train.se")
    model = yaml.safe_load((SHIPPED / "model" / "tiny.yaml").read_text())
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "tiny-wide.yaml").write_text(yaml.safe_dump({**model, "name": "tiny-wide", "dim": 512}))
    assert complete("fsdp-bench sweep model=tiny-", FSDP_BENCH_CONFIG_DIR=str(tmp_path)) == ["tiny-wide"]
