"""Shell completion of overrides (argcomplete calls `complete_override` at each TAB, in a fresh
`fsdp-bench`, so the user's config folders and new presets complete too).

`model=<TAB>` gives the group's options, `train.<TAB>` the section's keys, `train.checkpoint=<TAB>`
the values the key allows, `model=tiny,<TAB>` the next value of a grid. Words come whole
(`model=tiny`); argcomplete cuts them where bash splits words (at `=`). Imports neither torch nor
Hydra: completion must answer within a keystroke.
"""

from __future__ import annotations

from typing import Any


def complete_override(prefix: str, parsed_args: Any = None, **_: Any) -> list[str]:
    """Every override word that starts with `prefix` (argcomplete's completer signature)."""
    from bench.config.registry import RegistryError, add_user_dirs

    try:
        add_user_dirs(getattr(parsed_args, "config_dir", None) or [])
        return _words(prefix)
    except RegistryError:  # a folder that is missing or repeats a shipped name: nothing to offer
        return []


def _words(prefix: str) -> list[str]:
    from bench.config.catalog import LISTED_GROUPS, allowed_values, sections
    from bench.config.registry import GROUPS

    sign = prefix[: len(prefix) - len(prefix.lstrip("+~"))]
    word = prefix[len(sign) :]
    key, equals, value = word.partition("=")
    if equals:
        done, _, _ = value.rpartition(",")
        start = f"{sign}{key}={done + ',' if done else ''}"
        return [start + v for v in allowed_values(key) if (start + v).startswith(prefix)]
    keyed = sections()
    section, dot, _ = word.partition(".")
    if dot:
        return [
            f"{sign}{section}.{sub}=" for sub in keyed.get(section, []) if f"{sign}{section}.{sub}=".startswith(prefix)
        ]
    words = [f"{g}=" for g in GROUPS if g in LISTED_GROUPS] + [f"{k}." if sub else f"{k}=" for k, sub in keyed.items()]
    found = [sign + w for w in words if (sign + w).startswith(prefix)]
    if len(found) == 1 and found[0].endswith("."):  # one section: its keys, so the word goes on
        return _words(found[0])
    return found
