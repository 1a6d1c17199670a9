"""Write docs/configuration.md from the schema's field descriptions and the YAML config tree.

    python scripts/gen_config_reference.py          # write docs/configuration.md
    python scripts/gen_config_reference.py --check  # exit 1 if docs/configuration.md is stale

Sources, so the reference cannot drift from the code:
- the top level, `train.*`, `sweep.name`/`sweep.point_timeout_s`, `debug.*`, `telemetry.*`, `profile.*`, `model.*`, `cluster.*`
  and the device fields: bench.schema (type, constraints, default, description);
- the other `sweep.*` keys, and defaults the user gets: sweeps/config.yaml (values and comments);
- each launcher's options: sweeps/launcher/<name>.yaml (keys, values, end-of-line comments), typed
  by the launcher's options dataclass;
- the options of every config group: the shipped files under sweeps/<group>/ (the first sentence of
  the comment at the top of each file), with facts from the files and from bench.schema.recipes.

Only the shipped tree is read (FSDP_BENCH_CONFIG_DIR is ignored). The output is deterministic:
sorted, no timestamps.
"""

from __future__ import annotations

import argparse
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

SWEEPS = ROOT / "sweeps"
OUTPUT = ROOT / "docs" / "configuration.md"
COMMAND = "python scripts/gen_config_reference.py"
GROUPS = ("model", "cluster", "device", "strategy", "precision", "launcher", "experiment")

# Keys that neither the schema nor sweeps/config.yaml describes yet. A description added at the
# source (a pydantic `description=`, a YAML comment) wins over these.
FALLBACK = {
    "nodes": "nodes (torchrun agents, Slurm nodes, PyTorchJob workers); world size = nodes x gpus_per_node",
    "results_dir": "where records go: <results_dir>/<sweep.name>/<point_id>/result.json",
    "report": "sweep only: write the report into <results_dir>/<sweep.name>/report/ at the end",
    "sweep.repeats": "run every point this many times (integer >= 1), interleaved; `repeat` is part of the point id",
    "model.name": "the preset's name (the file name under sweeps/model/)",
    "model.dim": "hidden size",
    "model.n_layers": "transformer blocks",
    "model.n_heads": "attention heads (must divide dim)",
    "model.n_kv_heads": "key/value heads, grouped-query attention (must divide n_heads)",
    "model.ffn_dim": "hidden size of the SwiGLU MLP",
    "model.vocab_size": "vocabulary size (input embedding and output projection)",
    "model.max_seq_len": "longest train.seq_len allowed",
    "cluster.name": "the preset's name (the file name under sweeps/cluster/)",
    "cluster.device": "the node's accelerator: `- /device@device: NAME` in the file's defaults list",
    "cluster.device_type": "cuda (NCCL, one GPU per rank) or cpu (gloo)",
    "cluster.gpus_per_node": "GPUs a node has (a point's gpus_per_node may use fewer)",
    "cluster.efa_devices": "EFA devices per node (Kubeflow requests them; Slurm and Kubeflow set FI_* when > 0)",
    "cluster.source": "where the numbers come from",
    "device.name": "the preset's name (the file name under sweeps/device/)",
    "device.memory_gib": "memory per device, GiB",
    "device.source": "where the numbers come from",
}
# Fields filled in when a point is composed, not set by users: left out of the tables.
COMPOSED = {"overrides"}


# --- YAML comments -----------------------------------------------------------------------------


def _split_comment(line: str) -> tuple[str, str]:
    """(code, comment) of a YAML line; a `#` inside quotes is not a comment."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def yaml_comments(path: Path) -> dict[str, str]:
    """Dotted key -> its comment: the end-of-line comment, else the comment lines right above it."""
    comments: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    above: list[str] = []
    for raw in path.read_text().splitlines():
        code, comment = _split_comment(raw)
        if not code.strip():
            above = above + [comment] if comment and not comment.startswith("@package") else []
            continue
        indent = len(code) - len(code.lstrip())
        match = re.match(r"^\s*([A-Za-z_][\w.-]*)\s*:", code)
        if not match or code.lstrip().startswith("-"):
            above = []
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key = ".".join([*(k for _, k in stack), match.group(1)])
        stack.append((indent, match.group(1)))
        text = comment or " ".join(above)
        if text:
            comments[key] = text
        above = []
    return comments


def header_comment(path: Path) -> str:
    """The first sentence of the comment block at the top of a YAML file ('' if none)."""
    lines = []
    for raw in path.read_text().splitlines():
        stripped = raw.strip()
        if not stripped.startswith("#"):
            break
        text = stripped.lstrip("#").strip()
        if not text.startswith("@package"):
            lines.append(text)
    joined = " ".join(lines).strip()
    parts = re.split(r"(?<!e\.g)(?<!i\.e)(?<=\.)\s+", joined, maxsplit=1)
    return parts[0] if parts else ""


def option_files(group: str) -> list[Path]:
    """The shipped options of a group, sorted (files starting with `_` are not options)."""
    return sorted(p for p in (SWEEPS / group).glob("*.yaml") if not p.stem.startswith("_"))


# --- types and defaults ------------------------------------------------------------------------


def type_name(hint: Any) -> str:
    """A short, readable type: `int | null`, `none, full, selective`, `mapping str -> float`."""
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return ", ".join(str(a) for a in typing.get_args(hint))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in typing.get_args(hint))
    if hint is type(None):
        return "null"
    if origin in (dict, typing.Dict):  # noqa: UP006
        args = typing.get_args(hint)
        return f"mapping {type_name(args[0])} -> {type_name(args[1])}" if args else "mapping"
    if origin in (list, tuple):
        args = typing.get_args(hint)
        return f"list of {type_name(args[0])}" if args else "list"
    if hint is typing.Any:
        return "any"
    names = {str: "str", int: "int", float: "float", bool: "bool", dict: "mapping", list: "list"}
    if hint in names:
        return names[hint]
    return getattr(hint, "__name__", str(hint))


def constraints(field: Any) -> str:
    """Pydantic numeric constraints as `>= 1`, `> 0`, `< 10`."""
    parts = []
    for item in field.metadata:
        for attr, symbol in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            value = getattr(item, attr, None)
            if value is not None:
                parts.append(f"{symbol} {fmt_value(value)}")
    return ", ".join(parts)


def fmt_value(value: Any) -> str:
    if value == "":
        return '""'
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e6:
        return f"{value:.1f}"
    if isinstance(value, (dict, list)):
        return yaml.safe_dump(value, default_flow_style=True, sort_keys=True, width=10**6).strip()
    return str(value)


def schema_default(field: Any) -> Any:
    from pydantic_core import PydanticUndefined

    if field.default_factory is not None:
        return field.default_factory()
    if field.default is PydanticUndefined:
        return PydanticUndefined
    return field.default


def yaml_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, dict):
        return "mapping"
    if isinstance(value, list):
        return "list"
    if value is None:
        return "null"
    return "str"


# --- rendering ---------------------------------------------------------------------------------


def cell(text: Any) -> str:
    """Markdown-table safe: no pipes, no `<` that could open an HTML tag, no line breaks."""
    return str(text).replace("\n", " ").replace("|", "\\|").replace("<", "&lt;")


def code(text: str) -> str:
    return f"`{text}`" if text else ""


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def field_row(key: str, field: Any, yaml_defaults: dict[str, Any], comments: dict[str, str]) -> list[str]:
    """key, type, default, description of one schema field (YAML default and comment where present)."""
    from pydantic_core import PydanticUndefined

    kind = type_name(field.annotation)
    limits = constraints(field)
    if limits:
        kind = f"{kind}, {limits}"
    if key in yaml_defaults:
        default = code(fmt_value(yaml_defaults[key]))
    else:
        value = schema_default(field)
        default = "required" if value is PydanticUndefined else code(fmt_value(value))
    description = field.description or comments.get(key) or FALLBACK.get(key, "")
    return [code(key), cell(kind), cell(default), cell(description)]


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted keys of a YAML mapping (a nested mapping also keeps its own key)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        out[dotted] = value
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{dotted}."))
    return out


def schema_section(title: str, intro: str, model: type, prefix: str, yaml_defaults, comments) -> list[str]:
    rows = []
    for name, field in model.model_fields.items():
        if name in COMPOSED:
            continue
        rows.append(field_row(f"{prefix}{name}", field, yaml_defaults, comments))
    return [f"## {title}", "", intro, "", *table(["key", "type", "default", "description"], rows), ""]


def top_level_section(config: dict[str, Any], comments: dict[str, str]) -> list[str]:
    from bench.schema.spec import RunSpec

    defaults = flatten(config)
    rows = [field_row(name, RunSpec.model_fields[name], defaults, comments) for name in ("nodes", "gpus_per_node")]
    for name in ("results_dir", "report"):
        value = config[name]
        rows.append(
            [code(name), yaml_type(value), code(fmt_value(value)), cell(comments.get(name) or FALLBACK.get(name, ""))]
        )
    intro = (
        "Set on the command line as `key=value` (`nodes=2`); a comma makes a grid (`nodes=1,2,4`). "
        "Config groups (`model=`, `cluster=`, `strategy=`, `precision=`, `launcher=`, `experiment=`) "
        "are listed under [Config groups](#config-groups)."
    )
    return ["## Top level", "", intro, "", *table(["key", "type", "default", "description"], rows), ""]


def sweep_section(config: dict[str, Any], comments: dict[str, str]) -> list[str]:
    from bench.schema.spec import PointSweep

    defaults = flatten(config)
    rows = [field_row(f"sweep.{name}", field, defaults, comments) for name, field in PointSweep.model_fields.items()]
    for name, value in config["sweep"].items():
        if name in PointSweep.model_fields:
            continue
        key = f"sweep.{name}"
        rows.append(
            [code(key), yaml_type(value), code(fmt_value(value)), cell(comments.get(key) or FALLBACK.get(key, ""))]
        )
    intro = (
        "`sweep.name` and `sweep.point_timeout_s` are part of every record's spec "
        "(bench.schema.spec.PointSweep); the other keys steer `fsdp-bench sweep` (sweeps/config.yaml)."
    )
    return ["## sweep.*", "", intro, "", *table(["key", "type", "default", "description"], rows), ""]


def cluster_section() -> list[str]:
    from bench.schema.spec import ClusterSpec

    base = yaml.safe_load((SWEEPS / "cluster" / "_base.yaml").read_text()) or {}
    defaults = {f"cluster.{k}": v for k, v in flatten(base).items() if k.split(".")[0] in ClusterSpec.model_fields}
    rows = []
    for name, field in ClusterSpec.model_fields.items():
        if name in COMPOSED:
            continue
        row = field_row(f"cluster.{name}", field, defaults, {})
        if name == "device":
            row[1] = "device (see [Device fields](#device-fields))"
        rows.append(row)
    intro = (
        "A cluster file (sweeps/cluster/NAME.yaml) describes one node type; its defaults list pulls in "
        "`_base` (the defaults below) and a device (`- /device@device: NAME`). Override any field on the "
        "command line: `cluster.inter_node_gbps=1600`, `cluster.peak_tflops.bf16=800`. Units: "
        "`intra_node_gbps` is one GPU's unidirectional NVLink bandwidth, `inter_node_gbps` the whole "
        "node's network bandwidth, both in Gbit/s."
    )
    return ["## cluster.*", "", intro, "", *table(["key", "type", "default", "description"], rows), ""]


def launcher_options_class(name: str) -> type | None:
    """The options dataclass of a launcher (typed fields), or None (local has no options)."""
    import importlib

    from bench.run.launch import LAUNCHER_CLASSES

    module = importlib.import_module(f"bench.run.launch.{name}")
    return getattr(getattr(module, LAUNCHER_CLASSES[name]), "options_class", None)


def launcher_section() -> list[str]:
    lines = [
        "## launcher.*",
        "",
        "Each launcher's options (sweeps/launcher/NAME.yaml), set as `launcher.KEY=VALUE` after "
        "`launcher=NAME`. An unknown key or a wrong type is refused before anything launches (exit 2).",
        "",
    ]
    for path in option_files("launcher"):
        data = yaml.safe_load(path.read_text()) or {}
        comments = yaml_comments(path)
        options = launcher_options_class(path.stem)
        hints = typing.get_type_hints(options) if options else {}
        lines += [f"### launcher={path.stem}", "", cell(header_comment(path)), ""]
        keys = [k for k in data if k != "name"]
        if not keys:
            lines += ["No options.", ""]
            continue
        rows = []
        for key in keys:
            kind = type_name(hints[key]) if key in hints else yaml_type(data[key])
            rows.append([code(f"launcher.{key}"), cell(kind), code(fmt_value(data[key])), cell(comments.get(key, ""))])
        lines += [*table(["key", "type", "default", "description"], rows), ""]
    return lines


# --- config groups -----------------------------------------------------------------------------


def _load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text()) or {}


def model_rows() -> list[list[str]]:
    from bench.schema.model import ModelSpec

    rows = []
    for path in option_files("model"):
        spec = ModelSpec.model_validate(_load(path))
        params = spec.params
        size = f"{params / 1e9:.2f} B" if params >= 1e9 else f"{params / 1e6:.2f} M" if params >= 1e6 else f"{params:,}"
        rows.append([code(path.stem), str(spec.dim), str(spec.n_layers), size, cell(header_comment(path))])
    return rows


def cluster_device(path: Path) -> str:
    for entry in _load(path).get("defaults") or []:
        if isinstance(entry, dict):
            for key, value in entry.items():
                if str(key).lstrip("/").startswith("device"):
                    return str(value)
    return ""


def cluster_rows() -> list[list[str]]:
    rows = []
    for path in option_files("cluster"):
        data = _load(path)
        links = f"NVLink {fmt_value(data.get('intra_node_gbps'))}, network {fmt_value(data.get('inter_node_gbps'))}"
        if data.get("efa_devices"):
            links += f", {data['efa_devices']} EFA"
        about = header_comment(path) or data.get("source", "")
        rows.append(
            [code(path.stem), code(cluster_device(path)), str(data.get("gpus_per_node", "")), links, cell(about)]
        )
    return rows


def device_rows() -> list[list[str]]:
    rows = []
    for path in option_files("device"):
        data = _load(path)
        peaks = data.get("peak_tflops") or {}
        peak = ", ".join(f"{k} {fmt_value(peaks[k])}" for k in ("bf16", "fp8") if k in peaks) or "none"
        rows.append([code(path.stem), fmt_value(data.get("memory_gib")), peak, cell(header_comment(path))])
    return rows


def recipe_rows(group: str) -> list[list[str]]:
    from bench.schema import recipes

    table_ = recipes.STRATEGIES if group == "strategy" else recipes.PRECISIONS
    rows = []
    for path in option_files(group):
        recipe = table_.get(path.stem)
        summary = recipe.summary if recipe else ""
        extra = ""
        if group == "precision" and recipe:
            extra = f"{recipe.param_dtype} / {recipe.reduce_dtype}"
            if recipe.device_types != ("cpu", "cuda"):
                extra += f"; {', '.join(recipe.device_types)} only"
        elif recipe:
            extra = f"mesh: {recipe.mesh}; reshard after forward: {fmt_value(recipe.reshard_after_forward)}"
        rows.append([code(path.stem), cell(summary), cell(extra), cell(header_comment(path))])
    return rows


def experiment_rows() -> list[list[str]]:
    rows = []
    for path in option_files("experiment"):
        grid = (_load(path).get("sweep") or {}).get("grid") or {}
        cells = "; ".join(f"{k}={v}" for k, v in grid.items())
        rows.append([code(path.stem), cell(cells), cell(header_comment(path))])
    return rows


def groups_section() -> list[str]:
    lines = [
        "## Config groups",
        "",
        "Select one option per group: `model=llama2-7b cluster=p5.48xlarge`. Defaults: "
        "`model=tiny strategy=full_shard precision=fp32 cluster=local-cpu launcher=local`, no experiment "
        "(`fsdp-bench sweep` uses `experiment=cpu_smoke` when given no experiment and no grid). Your own "
        "options: [custom-configs.md](custom-configs.md).",
        "",
        "### model",
        "",
        *table(["option", "dim", "n_layers", "params", "about"], model_rows()),
        "",
        "### cluster",
        "",
        "Links in Gbit/s: NVLink per GPU (one direction), network per node.",
        "",
        *table(["option", "device", "GPUs per node", "links", "about"], cluster_rows()),
        "",
        "### device",
        "",
        "Selected by a cluster file, not on the command line. Peaks: dense TFLOP/s.",
        "",
        *table(["option", "memory GiB", "peak TFLOP/s", "about"], device_rows()),
        "",
        "### strategy",
        "",
        *table(["option", "summary (bench/schema/recipes.py)", "recipe", "about"], recipe_rows("strategy")),
        "",
        "### precision",
        "",
        "Recipe: parameter (all-gather and compute) dtype / gradient-reduction dtype.",
        "",
        *table(["option", "summary (bench/schema/recipes.py)", "recipe", "about"], recipe_rows("precision")),
        "",
        "### launcher",
        "",
        *table(["option", "about"], [[code(p.stem), cell(header_comment(p))] for p in option_files("launcher")]),
        "",
        "### experiment",
        "",
        *table(["option", "grid (sweep.grid)", "about"], experiment_rows()),
        "",
    ]
    return lines


# --- the page ----------------------------------------------------------------------------------


def render() -> str:
    """The whole of docs/configuration.md."""
    from bench.schema.model import ModelSpec
    from bench.schema.options import PreflightSettings, SearchOptions
    from bench.schema.spec import DebugKnobs, DeviceSpec, ProfileSpec, TelemetrySpec, TrainSpec

    config_path = SWEEPS / "config.yaml"
    config = _load(config_path)
    comments = yaml_comments(config_path)
    defaults = flatten(config)
    lines = [
        "# Configuration reference",
        "",
        f"Generated by `{COMMAND}` from bench/schema/ (spec.py, recipes.py) and the YAML tree under "
        "sweeps/; do not edit by hand. `tests/unit/test_docs.py` fails when this page is stale.",
        "",
        "Every command that composes points (`run`, `sweep`, `plan`, `preflight`, `ab`) takes these keys as Hydra "
        "overrides. How the tree is composed: [architecture.md](architecture.md#the-config-flow); adding "
        "your own models, clusters and devices: [custom-configs.md](custom-configs.md).",
        "",
        "From the command line: `--help` of those commands lists every group with its options (yours from "
        "`--config-dir` or `FSDP_BENCH_CONFIG_DIR` marked), the experiments and these keys; `--cfg job` "
        "(`-c job`) prints the first point's composed config as resolved YAML (`--point N` another point's) "
        "and `--info` the config search path, the file each group's option came from and the grid, both "
        "without running anything (`run`, `sweep`, `plan`, `preflight`; `run` and `preflight` take one point "
        "and refuse a grid there as they do when they run); `sweep --dry-run` shows what a "
        "sweep would run ([sweeps.md](sweeps.md#dry-run)). A mistyped group option, key or value is "
        "refused with the closest allowed one (`model: unknown model 'llama2-7' (did you mean "
        "llama2-7b?); allowed: ...`), and the shell completes all of them "
        "([development.md](development.md#shell-completion)).",
        "",
        *top_level_section(config, comments),
        *schema_section(
            "train.*", "How a point trains (bench.schema.spec.TrainSpec).", TrainSpec, "train.", defaults, comments
        ),
        *sweep_section(config, comments),
        *schema_section(
            "preflight.*",
            "What `fsdp-bench preflight` and `sweep.preflight=true` measure (bench.schema.options.PreflightSettings; "
            "[preflight.md](preflight.md)).",
            PreflightSettings,
            "preflight.",
            defaults,
            comments,
        ),
        *schema_section(
            "search.*",
            "What `fsdp-bench plan --best` and `sweep.autotune=K` rank by and hold fixed "
            "(bench.schema.options.SearchOptions; [planner.md](planner.md#searching-plan---best)). The searched axes are "
            "overrides: `strategy=...`, `precision=...`, `train.micro_batch=...`, `train.grad_accum=...`, "
            "`train.activation_checkpointing=...`, `train.compile=...`.",
            SearchOptions,
            "search.",
            defaults,
            comments,
        ),
        *schema_section(
            "debug.*",
            "Fault injection and slow-down, for testing the harness itself (bench.schema.spec.DebugKnobs). "
            "A fault fires only when both `fail_rank` and `fail_step` are set.",
            DebugKnobs,
            "debug.",
            defaults,
            comments,
        ),
        *schema_section(
            "telemetry.*",
            "What every rank samples during the timed steps (bench.schema.spec.TelemetrySpec; "
            "[telemetry.md](telemetry.md)). It observes and never changes a point: not part of its id.",
            TelemetrySpec,
            "telemetry.",
            defaults,
            comments,
        ),
        *schema_section(
            "profile.*",
            "torch.profiler traces of a few steps after the timed window, and each step split into compute, "
            "exposed communication and idle (bench.schema.spec.ProfileSpec; [engine.md](engine.md#profiled-steps)). "
            "It observes and never changes a point: not part of its id.",
            ProfileSpec,
            "profile.",
            defaults,
            comments,
        ),
        *schema_section(
            "model.*",
            "A Llama-architecture model (bench.schema.model.ModelSpec): the fields of sweeps/model/NAME.yaml, "
            "each overridable on the command line (`model.n_layers=2`).",
            ModelSpec,
            "model.",
            {},
            {},
        ),
        *cluster_section(),
        *schema_section(
            "Device fields",
            "One accelerator (bench.schema.spec.DeviceSpec): the fields of sweeps/device/NAME.yaml; in a point "
            "they are `cluster.device.*`. MFU divides by `peak_tflops`; ranks match the device torch reports "
            "against `match`.",
            DeviceSpec,
            "device.",
            {},
            {},
        ),
        *launcher_section(),
        *groups_section(),
    ]
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return write_or_check(argv, render, OUTPUT, COMMAND, __doc__.splitlines()[0])


def write_or_check(argv: list[str] | None, render_text, output: Path, command: str, description: str) -> int:
    """A generated page's command line (also scripts/gen_metrics_reference.py's): write it, or with
    --check exit 1 when the file is not what would be written."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is not what would be written")
    parser.add_argument("-o", "--output", type=Path, default=output, help=f"default: {output.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    text = render_text()
    if args.check:
        current = args.output.read_text() if args.output.exists() else None
        if current != text:
            print(f"{args.output}: stale; regenerate with `{command}`", file=sys.stderr)
            return 1
        print(f"{args.output}: up to date")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f"written: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
