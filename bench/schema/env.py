"""Where and under which conditions a measurement ran: software, devices, hosts and their load."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from bench.schema.base import Strict


class HostLoad(Strict):
    """A host's 1-minute load average when the timed window opened and closed, and the cores the
    point's ranks on it used (CPU threads; one per rank on GPU)."""

    host: str
    cores: int
    ranks_cores: int
    before: float
    after: float

    @property
    def loaded(self) -> bool:
        """Other work used cores beyond the ones this point's ranks use."""
        return max(self.before, self.after) > self.ranks_cores + 0.5


class EnvInfo(Strict):
    torch: str | None = None
    cuda: str | None = None
    nccl: str | None = None
    driver: str | None = None  # the NVIDIA kernel driver (CUDA only); not in the fingerprint, history shows it
    device_name: str | None = None
    device_count: int | None = None
    hostnames: list[str] = Field(default_factory=list)
    rank_hosts: list[str] = Field(default_factory=list)  # each rank's node, in rank order (names stragglers)
    python: str | None = None
    platform: str | None = None
    git_sha: str | None = None
    git_dirty: bool | None = None
    # The fsdp-bench that launched the point (bench/config/version.py): package version, plus "+g<commit>"
    # (".dirty") when run from a checkout. Not in the fingerprint: a harness upgrade keeps baselines comparable.
    harness: str | None = None
    env_vars: dict[str, str] = Field(default_factory=dict)
    # Whether the point ran holding the host lock (bench/run/ownership/locks.py): True held, False skipped
    # (sweep.allow_concurrent=true), None not applicable (a cluster launcher).
    exclusive_host: bool | None = None

    def fingerprint(self) -> dict[str, Any]:
        """What must match for two results to be comparable: software and hardware, not hosts."""
        return {
            "torch": self.torch,
            "cuda": self.cuda,
            "nccl": self.nccl,
            "device_name": self.device_name,
            "platform": self.platform,
        }
