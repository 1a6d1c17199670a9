"""What a newcomer learns from the command line alone: `--help` of every command that composes
configs lists each group with its options (the user's marked), the experiments and the keys;
`--cfg job`/`--info` show a point's config and where it came from; a typo gets the closest word,
and an unknown flag is refused by the command it was given to. In-process calls: nothing launches."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import yaml
from bench_cli import in_process

from bench.config.catalog import LISTED_GROUPS, opening_line, sections
from bench.config.problems import did_you_mean
from bench.config.registry import SHIPPED, option_files
from bench.schema.spec import RunSpec

COMPOSING = ("run", "sweep", "plan", "preflight", "ab")


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    """A user's folder with a model of its own and an experiment of its own; a clean search path."""
    monkeypatch.delenv("FSDP_BENCH_CONFIG_DIR", raising=False)
    root = tmp_path / "mine"
    (root / "model").mkdir(parents=True)
    model = yaml.safe_load((SHIPPED / "model" / "llama3-8b.yaml").read_text())
    (root / "model" / "llama3.1-8b.yaml").write_text(yaml.safe_dump({**model, "name": "llama3.1-8b"}))
    (root / "experiment").mkdir()
    shutil.copy(SHIPPED / "experiment" / "cpu_smoke.yaml", root / "experiment" / "my_smoke.yaml")
    text = (root / "experiment" / "my_smoke.yaml").read_text()
    (root / "experiment" / "my_smoke.yaml").write_text(text.replace("# The default sweep", "# Our own sweep", 1))
    return root


def listed(help_text: str) -> dict[str, tuple[list[str], list[str]]]:
    """group -> (shipped options, the user's) as the help's group lines give them."""
    found = {}
    for group in LISTED_GROUPS:
        line = re.search(rf"^  {group}: (.*)$", help_text, re.M)[1]
        yours = re.search(r"\(yours: ([^)]*)\)", line)
        shipped = line.split(" (")[0].strip()
        found[group] = (shipped.split(", "), yours[1].split(", ") if yours else [])
    return found


@pytest.mark.parametrize("command", COMPOSING)
def test_help_lists_every_group_with_the_registrys_options_and_every_experiment_and_key(command, monkeypatch):
    monkeypatch.delenv("FSDP_BENCH_CONFIG_DIR", raising=False)
    rc, out, err, _ = in_process(command, "--help")
    assert (rc, err) == (0, "")
    assert listed(out) == {group: (sorted(option_files(group)), []) for group in LISTED_GROUPS}
    for name, path in option_files("experiment").items():
        assert re.search(rf"^  {re.escape(name)} +{re.escape(opening_line(path))}$", out, re.M), name
    assert opening_line(SHIPPED / "experiment" / "cpu_smoke.yaml").startswith("The default sweep:")
    keys = re.search(r"^  (nodes, .*)$", out, re.M)[1].split(", ")
    assert keys == ["nodes", "gpus_per_node", "train.*", "results_dir", "report", "sweep.*", "search.*",
                    "preflight.*", "telemetry.*", "profile.*", "debug.*"]  # fmt: skip
    assert "docs/configuration.md" in out


def test_help_marks_the_users_options_from_config_dir_or_the_environment(user_dir, monkeypatch):
    shipped = {group: sorted(option_files(group)) for group in LISTED_GROUPS}
    expected = {g: (shipped[g], {"model": ["llama3.1-8b"], "experiment": ["my_smoke"]}.get(g, [])) for g in shipped}
    by_flag = in_process("sweep", "--config-dir", user_dir, "--help")
    by_env = in_process("plan", "--help", env={**__import__("os").environ, "FSDP_BENCH_CONFIG_DIR": str(user_dir)})
    for run in (by_flag, by_env):
        assert run.rc == 0 and listed(run.stdout) == expected
        assert re.search(r"^  my_smoke +Our own sweep: the whole pipeline", run.stdout, re.M)
    assert "model: debug, " in by_flag.stdout and "(yours: llama3.1-8b)" in by_flag.stdout


def test_commands_that_compose_nothing_keep_their_plain_help():
    rc, out, _, _ = in_process("report", "--help")
    assert rc == 0 and "config groups" not in out and out.startswith("usage: fsdp-bench report [-h] [--config-dir DIR]")


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["plan", "model=llama2-7"], "model: unknown model 'llama2-7' (did you mean llama2-7b?); allowed: debug, "),
        (["plan", "cluster=p5e.48xlarg"], "cluster: unknown cluster 'p5e.48xlarg' (did you mean p5e.48xlarge?); "),
        (
            ["plan", "train.seq_lenn=64"],
            "train.seq_lenn: unknown key 'seq_lenn' (did you mean seq_len?); allowed under ",
        ),
        (["plan", "nodez=2"], "nodez: unknown key 'nodez' (did you mean nodes?); allowed at the top level: "),
        (["run", "train.checkpoint=snyc"], "train.checkpoint: got 'snyc' (did you mean sync?); allowed: 'none', "),
        (["sweep", "sweep.force=ture"], "sweep.force: got 'ture' (did you mean true?); allowed: true, false"),
        (["plan", "launcher=slurn"], "launcher: unknown launcher 'slurn' (did you mean slurm?); allowed: kubeflow, "),
        (["plan", "model=zzz"], "model: unknown model 'zzz'; allowed: debug, "),
    ],
)
def test_a_typo_gets_the_closest_allowed_word_on_its_one_line(argv, line):
    rc, out, err, _ = in_process(*argv)
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"error: {line}"), err


def test_metric_and_field_typos_get_the_same_suggestion(tmp_path):
    from bench.analysis.check.thresholds import ThresholdError, parse_threshold

    with pytest.raises(
        ThresholdError, match=r"unknown metric 'tokens_per_ss' \(did you mean tokens_per_s\?\); allowed"
    ):
        parse_threshold("tokens_per_ss:-5%")
    rc, _, err, _ = in_process("history", "--metric", "tokens_per_ss", "--store", tmp_path / "none.sqlite")
    assert rc == 2 and "--metric 'tokens_per_ss': unknown (did you mean tokens_per_s?); allowed: " in err
    assert did_you_mean("point_idd", ["point_id", "fits"]) == " (did you mean point_id?)"
    assert did_you_mean("zzz", ["point_id", "fits"]) == ""


def test_a_launcher_field_typo_is_suggested():
    from bench.config.problems import ConfigError
    from bench.run.launch.options import parse_options
    from bench.run.launch.slurm import SlurmOptions

    with pytest.raises(ConfigError) as refused:
        parse_options(SlurmOptions, {"partitoin": "gpu"}, "slurm")
    (line,) = refused.value.lines
    assert line.startswith("launcher.partitoin: unknown field for launcher=slurm (did you mean partition?); allowed: ")


@pytest.mark.parametrize(
    ("argv", "usage", "error"),
    [
        (["sweep", "--dryrun"], "usage: fsdp-bench sweep ", "fsdp-bench sweep: error: unrecognized arguments: --dryrun (did you mean --dry-run?)"),
        (["plan", "model=debug", "--jsn"], "usage: fsdp-bench plan ", "fsdp-bench plan: error: unrecognized arguments: --jsn (did you mean --json?)"),
        (["report", "x", "--bogus"], "usage: fsdp-bench report ", "fsdp-bench report: error: unrecognized arguments: --bogus"),
        (["swep"], "usage: fsdp-bench [-h]", "fsdp-bench: error: argument command: invalid choice: 'swep' (did you mean sweep?) (choose from "),
    ],
)  # fmt: skip
def test_an_unknown_flag_or_command_is_refused_by_its_own_parser_with_the_closest_word(argv, usage, error):
    rc, out, err, _ = in_process(*argv)
    assert rc == 2 and out == ""
    assert err.startswith(usage) and err.splitlines()[-1].startswith(error), err


def test_cfg_job_composes_back_to_the_point_plan_predicts_for_every_shipped_experiment():
    for experiment in sorted(option_files("experiment")):
        rc, out, err, _ = in_process("sweep", "--cfg", "job", f"experiment={experiment}")
        assert (rc, err) == (0, ""), err
        config = yaml.safe_load(out)
        assert "hydra" not in config and "${" not in out  # the job's config, resolved
        planned = in_process("plan", f"experiment={experiment}", "--fields", "point_id")
        assert RunSpec.from_config(config).point_id == json.loads(planned.stdout)[0]["point_id"], experiment


def test_cfg_point_n_is_that_points_config_and_info_names_the_files():
    grid = json.loads(in_process("plan", "experiment=cpu_smoke", "--fields", "point_id").stdout)
    for command in (["sweep"], ["plan", "experiment=cpu_smoke"]):
        rc, out, _, _ = in_process(*command, "-c", "job", "--point", "7")
        assert rc == 0 and RunSpec.from_config(yaml.safe_load(out)).point_id == grid[7]["point_id"]
    rc, out, _, _ = in_process("run", "--cfg", "job", "model=tiny", "nodes=2")
    config = yaml.safe_load(out)
    assert rc == 0 and (config["model"]["name"], config["nodes"], config["sweep"]["name"]) == ("tiny", 2, None)
    rc, out, _, _ = in_process("sweep", "--info", "strategy=no_shard")
    assert rc == 0
    assert out.splitlines()[:2] == ["config search path:", f"  {SHIPPED}"]
    assert f"  strategy 'no_shard': {SHIPPED / 'strategy' / 'no_shard.yaml'}" in out.splitlines()
    assert f"  device 'cpu': {SHIPPED / 'device' / 'cpu.yaml'}" in out.splitlines()
    assert "grid: 4 point(s)" in out.splitlines() and "  0: nodes=1 strategy=no_shard precision=fp32" in out


def test_info_names_a_users_folder_and_file(user_dir):
    rc, out, _, _ = in_process("plan", "--config-dir", user_dir, "--info", "model=llama3.1-8b")
    lines = out.splitlines()
    assert rc == 0 and lines[:3] == ["config search path:", f"  {SHIPPED}", f"  {user_dir}"]
    path = user_dir / "model" / "llama3.1-8b.yaml"
    assert f"  model 'llama3.1-8b': {path} (yours)" in lines
    assert lines[-2:] == ["grid: 1 point(s)", "  0: model=llama3.1-8b"]
    rc, out, _, _ = in_process("run", "--info", "experiment=cpu_scaling")
    assert rc == 0 and out.splitlines()[-2:] == ["grid: 1 point(s)", "  0: (the experiment as it is)"]


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["sweep", "--cfg", "job", "--point", "12"], "--point: 12 is outside the grid of 12 point(s); allowed: 0 to 11"),
        (["sweep", "--cfg", "hydra"], "--cfg: 'hydra' has no meaning here (Hydra's own runtime config: fsdp-bench "
         "composes without a Hydra job); allowed: job"),
        (["plan", "--cfg", "all"], "--cfg: 'all' has no meaning here (Hydra's own runtime config: fsdp-bench "
         "composes without a Hydra job); allowed: job"),
        (["run", "--cfg", "jobs"], "--cfg: 'jobs' has no meaning here; allowed: job"),
        (["run", "--point", "1"], "--point: chooses the point --cfg job prints; give --cfg job with it"),
        (["sweep", "--json"], "--json: prints a dry run's points; give --dry-run with it"),
        (["run", "--cfg", "job", "nodes=1,2"], "a comma-separated override makes a grid: use `fsdp-bench sweep` "
         "for grids"),  # as `run nodes=1,2` itself refuses it
        (["preflight", "--info", "strategy=full_shard,no_shard"], "a comma-separated override makes a grid: use "
         "`fsdp-bench sweep` for grids"),
    ],
)  # fmt: skip
def test_bad_cfg_point_and_json_flags_are_one_line_and_exit_2(argv, line):
    assert tuple(in_process(*argv))[:3] == (2, "", f"error: {line}\n")


def test_the_catalogues_keys_are_the_configs_without_hydras_own():
    keyed = sections()
    assert list(keyed) == ["nodes", "gpus_per_node", "train", "results_dir", "report", "sweep", "search",
                           "preflight", "telemetry", "profile", "debug"]  # fmt: skip
    assert {"seq_len", "checkpoint"} <= set(keyed["train"]) and keyed["nodes"] == []
