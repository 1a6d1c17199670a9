"""What `--cfg job` and `--info` print: a point's composed config, and where a grid's configs came from.

`--cfg job` is Hydra's flag with Hydra's meaning for the job's config (resolved, as `--resolve`
prints it): the config a point runs with, which `RunSpec.from_config` validates as `run` would.
Hydra's other kinds (`hydra`, `all`) describe Hydra's own runtime node, which fsdp-bench does not
have: it composes through Hydra's compose API, in the parent, and never starts a Hydra job.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.config.problems import ConfigError

CFG_KINDS = ("job",)


def check_kind(kind: str) -> None:
    """ConfigError unless `--cfg` names a kind of config fsdp-bench has (asked before anything is composed)."""
    if kind not in CFG_KINDS:
        why = (
            " (Hydra's own runtime config: fsdp-bench composes without a Hydra job)" if kind in ("hydra", "all") else ""
        )
        raise ConfigError([f"--cfg: '{kind}' has no meaning here{why}; allowed: {', '.join(CFG_KINDS)}"])


def config_lines(grid: Sequence[Sequence[str]], kind: str, point: int | None) -> list[str]:
    """The composed, resolved config of the grid's first point (or `point`) as YAML lines; `grid`:
    each point's overrides (bench.config.compose `expand_grid`)."""
    import yaml

    from bench.config.compose import compose

    check_kind(kind)
    index = 0 if point is None else point
    if not 0 <= index < len(grid):
        raise ConfigError(
            [f"--point: {index} is outside the grid of {len(grid)} point(s); allowed: 0 to {len(grid) - 1}"]
        )
    config = compose(list(grid[index]))
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=False).rstrip("\n").splitlines()


def info_lines(grid: Sequence[Sequence[str]]) -> list[str]:
    """The config search path, each group's option in the first point and its file, and the grid."""
    from bench.config.catalog import LISTED_GROUPS
    from bench.config.compose import compose
    from bench.config.registry import is_user_file, option_files, search_dirs

    config = compose(list(grid[0]))
    chosen = {group: (config.get(group) or {}).get("name") for group in LISTED_GROUPS if group != "device"}
    chosen["device"] = ((config.get("cluster") or {}).get("device") or {}).get("name")
    chosen["experiment"] = next(
        (o.partition("=")[2] for o in reversed(grid[0]) if o.lstrip("+").startswith("experiment=")), None
    )
    lines = ["config search path:", *(f"  {folder}" for folder in search_dirs()), "chosen options (first point):"]
    for group, name in chosen.items():
        where = option_files(group).get(str(name)) if name else None
        if where is None:
            lines.append(f"  {group} '{name}'" if name else f"  {group}: none")
        else:
            lines.append(f"  {group} '{name}': {where}" + (" (yours)" if is_user_file(where) else ""))
    lines.append(f"grid: {len(grid)} point(s)")
    plain = "(the experiment as it is)" if chosen["experiment"] else "(the defaults)"
    lines += [
        f"  {i}: {' '.join(o for o in point if not o.lstrip('+').startswith('experiment=')) or plain}"
        for i, point in enumerate(grid)
    ]
    return lines
