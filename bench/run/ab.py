"""A/B on one machine, running: the same points under two environments, rounds alternating A and B.

Each environment is a command prefix that invokes fsdp-bench there (another virtualenv's
`fsdp-bench`, `python -m bench` of another checkout) or sets its environment (`env FOO=1`).
Rounds alternate the order (A B, B A, A B, ...) so slow drift of the machine (heat, other
jobs) falls on both sides alike. Every run writes its own results folder; the ratio B/A of
median tokens/s and its bootstrap CI come from the step times of all rounds (bench.analysis.stats:
rounds resampled, then steps), so the interval carries the round-to-round spread.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


def build_command(prefix: str) -> list[str]:
    """The argv that starts fsdp-bench for one side (a prefix split with shlex, never run by a shell).

    A prefix that only sets the environment (`env FOO=1`, `FOO=1`, or empty) gets this
    interpreter's `python -m bench` appended; anything else is taken as the fsdp-bench command.
    """
    tokens = shlex.split(prefix)
    if tokens and all(_is_assignment(t) for t in tokens):
        tokens = ["env", *tokens]  # shell-style `FOO=1` needs `env` without a shell
    if not tokens or (Path(tokens[0]).name == "env" and not _env_runs_a_program(tokens[1:])):
        return [*tokens, sys.executable, "-m", "bench"]
    return tokens


def _env_runs_a_program(args: list[str]) -> bool:
    """Whether `env ARGS` names a program (a word that is not an option, its value, or NAME=VALUE)."""
    takes_value = False
    for token in args:
        if takes_value:
            takes_value = False
        elif token in ("-u", "--unset", "-C", "--chdir"):
            takes_value = True
        elif not token.startswith("-") and not _is_assignment(token):
            return True
    return False


def _is_assignment(token: str) -> bool:
    name, eq, _ = token.partition("=")
    return bool(eq) and name.isidentifier()


@dataclass(frozen=True)
class RunOutcome:
    side: str
    round: int
    point: int
    returncode: int
    seconds: float
    results_dir: str
    log: str


def schedule(rounds: int) -> list[tuple[int, str]]:
    """(round, side) in run order: A B, then B A, alternating."""
    order = []
    for r in range(rounds):
        order += [(r, "A"), (r, "B")] if r % 2 == 0 else [(r, "B"), (r, "A")]
    return order


def run_rounds(
    commands: dict[str, list[str]],
    points: list[list[str]],
    rounds: int,
    out: Path,
    *,
    timeout_s: float,
    progress: Callable[[str], None] = print,
    side_overrides: dict[str, list[str]] | None = None,
) -> list[RunOutcome]:
    """Run every point once per side per round; each run writes OUT/<side>/round<r>/ and a log.

    `side_overrides`: extra overrides for one side only (`--a-overrides`/`--b-overrides`), such as
    a setting that observes a point without changing its identity (`telemetry.enabled=false`)."""
    outcomes = []
    extra = side_overrides or {}
    for r, side in schedule(rounds):
        for i, overrides in enumerate(points):
            results_dir = out / side / f"round{r:02d}"
            log = out / "logs" / f"{side}-round{r:02d}-point{i}.log"
            argv = [*commands[side], "run", *overrides, *extra.get(side, []), f"results_dir={results_dir}"]
            outcome = _run_one(argv, side, r, i, results_dir, log, timeout_s)
            outcomes.append(outcome)
            status = "ok" if outcome.returncode == 0 else f"exit {outcome.returncode} (see {log})"
            progress(f"round {r + 1}/{rounds} {side} point {i + 1}/{len(points)}: {status} in {outcome.seconds:.1f} s")
    return outcomes


def _run_one(argv, side, r, i, results_dir, log, timeout_s) -> RunOutcome:
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with log.open("w") as handle:
        handle.write("$ " + shlex.join(argv) + "\n")
        handle.flush()
        try:
            code = subprocess.run(argv, stdout=handle, stderr=subprocess.STDOUT, timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            handle.write(f"\ntimed out after {timeout_s} s\n")
            code = 124  # timeout(1)'s exit status
    return RunOutcome(side, r, i, code, time.perf_counter() - start, str(results_dir), str(log))


@dataclass(frozen=True)
class AbPlan:
    """Both sides' fsdp-bench commands and own overrides, and the points (override lists) each runs."""

    commands: dict[str, list[str]]
    side_overrides: dict[str, list[str]]
    points: list[list[str]]


@dataclass
class AbResult:
    outcomes: list[RunOutcome]
    rows: list  # bench.analysis.check.abtest.AbRow, one per point measured on both sides
    envs: dict  # side -> its environment fingerprint

    @property
    def failed(self) -> list[RunOutcome]:
        return [o for o in self.outcomes if o.returncode != 0]


def plan_ab(a: str, b: str, a_overrides: str, b_overrides: str, overrides: list[str]) -> AbPlan:
    """Both sides checked before anything runs (ConfigError naming the flag): each command splits
    and exists, each side's overrides are valid and keep every point's id."""
    from bench.config.compose import load_grid
    from bench.config.problems import ConfigError

    try:
        commands = {"A": build_command(a), "B": build_command(b)}
        sides = {"A": shlex.split(a_overrides), "B": shlex.split(b_overrides)}
    except ValueError as exc:  # shlex's "No closing quotation"
        raise ConfigError([f"--a/--b: {exc}"]) from None
    for argv in commands.values():
        if shutil.which(argv[0]) is None:
            raise ConfigError([f"--a/--b: command not found: {argv[0]}"])
    points = [list(p.overrides) for p in load_grid(overrides)]
    for side, extra in sides.items():
        _check_side(points, extra, side)
    return AbPlan(commands, sides, points)


def _check_side(points: list[list[str]], extra: list[str], side: str) -> None:
    """A side's own overrides must be valid and keep every point's id: otherwise the two sides
    would measure different points and nothing would match (ConfigError, exit 2)."""
    from bench.config.compose import load_point
    from bench.config.problems import ConfigError

    if not extra:
        return
    flag = f"--{side.lower()}-overrides"
    for overrides in points:
        try:
            both, alone = load_point([*overrides, *extra]).spec, load_point(overrides).spec
        except ConfigError as exc:
            raise ConfigError([f"{flag}: {line}" for line in exc.lines]) from None
        if both.point_id != alone.point_id:
            raise ConfigError(
                [
                    f"{flag}: {' '.join(extra)} changes what the point measures (its id); give such a setting to "
                    "both sides as an override, or compare two sweeps with `fsdp-bench check`"
                ]
            )


def run_ab(plan: AbPlan, rounds: int, out: Path, *, timeout_s: float) -> AbResult:
    """Every round of both sides, then B/A per point from every run's records (bench.analysis.check.abtest)."""
    from bench.analysis.check import abtest

    outcomes = run_rounds(
        plan.commands, plan.points, rounds, out, timeout_s=timeout_s, side_overrides=plan.side_overrides
    )
    a_points, b_points, envs = abtest.load_sides(out)
    return AbResult(outcomes, abtest.summarize(a_points, b_points), envs)
