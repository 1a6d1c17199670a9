"""The parent-to-rank protocol's names and numbers (bench/schema/protocol.py, where its files are laid out):
plain constants, importable without pydantic, so code that only lists a results folder's files
(bench/analysis/folder_listing.py) need not import the schema. protocol.py gives the same names; import
them from either.
"""

from __future__ import annotations

SWEEP_LOCK = ".lock"  # in the sweep folder: its holder's pid, host and token (ranks read it: lifeline.py)
# The holder touches its sweep lock this often; one not touched for OWNER_SILENT_S is gone (ranks on
# other hosts cannot see its pid). Longer than an NFS client's attribute cache (60 s at most).
OWNER_HEARTBEAT_S = 15.0
OWNER_SILENT_S = 180.0
LAUNCHES_DIR = "_launches"  # in the sweep folder: one <stamp>-<label>/ per launch, holding LAUNCH_FILE
JOB_FILE = "job.json"  # in a launch folder: the cluster job it submitted, until the job is seen to end
LAUNCH_FILE = "launch.json"
STARTED_MARK = "started"
RESULT_FILE = "result.json"
ERRORS_DIR = "errors"
# The sampled series of every rank (fsdp_core/telemetry.py), named in the record's metrics.telemetry.sidecar.
TELEMETRY_PARQUET = "telemetry.parquet"
TELEMETRY_CSV = "telemetry.csv"  # where pyarrow is not installed
TELEMETRY_SIDECARS = (TELEMETRY_PARQUET, TELEMETRY_CSV)
# Each rank's profiler trace of the profiled steps (profile.enabled, fsdp_core/profiling.py), gzipped
# Chrome-trace JSON that Perfetto and Holistic Trace Analysis open: trace_rank<R>.json.gz, named in
# the record's metrics.step_breakdown.traces.
TRACE_PREFIX = "trace_rank"
TRACE_SUFFIX = ".json.gz"
TRACE_GLOB = f"{TRACE_PREFIX}*{TRACE_SUFFIX}"
# Each rank's Flight Recorder dump of a point that hung (fsdp_core/flight_recorder.py): flight_recorder/rank<R>.json,
# written on SIGTERM or at the point's deadline less a lead, deleted when the point finishes; read by the
# parent's hang verdict (bench/analysis/hang.py).
FLIGHT_RECORDER_DIR = "flight_recorder"
# The parent sets it in every rank's environment (unless already set): how many collectives each group
# keeps; torch's own default, named so that the record's env.env_vars shows it.
FR_BUFFER_ENV = "TORCH_FR_BUFFER_SIZE"
FR_BUFFER_DEFAULT = 2000
# Each rank also dumps on its own this long before the point's deadline (room to write it and for the
# launcher to read it); a launcher that only sees files some seconds after they are written (Kubeflow's
# results URL, pushed every launcher.sync_interval_s) sets a longer lead in FR_LEAD_ENV.
FR_DEADLINE_LEAD_S = 5.0
FR_LEAD_ENV = "FSDP_BENCH_FR_LEAD_S"
# What a dump says the harness was doing (fsdp_core/flight_recorder.py `doing`), "<phase> of step <S>":
# the verdict names the step timer's barriers as the harness's own, and a gloo all_reduce in backward as
# FSDP's reduce-scatter (gloo records it so). An out-of-memory's reason names the same phases.
FR_OPENING_BARRIER = "the step timer's opening barrier"
FR_CLOSING_BARRIER = "the step timer's closing barrier"
FR_BACKWARD = "backward"
FR_FORWARD = "forward"
FR_OPTIMIZER = "optimizer step"
FR_CHECKPOINT = "checkpoint save"
# profile.memory_history (CUDA): the allocator's snapshot of rank R written on its out-of-memory,
# memory_snapshot_rank<R>.pickle beside the record (pytorch.org/memory_viz opens it).
MEMORY_SNAPSHOT_PREFIX = "memory_snapshot_rank"
MEMORY_SNAPSHOT_SUFFIX = ".pickle"
MEMORY_SNAPSHOT_GLOB = f"{MEMORY_SNAPSHOT_PREFIX}*{MEMORY_SNAPSHOT_SUFFIX}"
PREFLIGHT_DIR = "_preflight"
PREFLIGHT_MEASUREMENTS = "measurements.json"
PREFLIGHT_RECORD = "preflight.json"
# The process groups' collective timeout outlasts the point timeout by this much, so the launcher's
# watch always ends a hang first (status `timeout`); otherwise a peer's collective timeout could
# win the race and the point would read as `failed` with a secondary "timed out" message.
PG_TIMEOUT_MARGIN_S = 60.0
# Environment variables the parent sets for every rank it starts.
RANKS_PER_HOST_ENV = "FSDP_BENCH_RANKS_PER_HOST"  # ranks sharing this host's cores (thread sizing)
NODE_NAME_ENV = "FSDP_BENCH_NODE_NAME"  # the node a rank runs on, where the hostname would not say
# Checkpoint layout (train.checkpoint): each save goes into a new step folder; the marker, written
# last, names the latest complete one, so a save that fails part-way never hides the previous one.
CHECKPOINT_SUBDIR = "checkpoint"  # the default checkpoint dir: <point_dir>/checkpoint
CHECKPOINT_MARKER = "latest"
CHECKPOINT_STEP_PREFIX = "step-"
DCP_METADATA_FILE = ".metadata"  # DCP writes it last, after every rank's files: a complete step folder has it
# Whole-job accounting (fsdp_core/job.py): each attempt at a point journals what it did in the point's
# JOB_DIR (rank R of attempt A: attempt<A>.rank<R>.json; the kill it fired: kill<A>.json), so that a
# restarted attempt can account for the ones a failure ended and keep the losses of the steps that survived.
JOB_DIR = "job"
# The wall-clock time (seconds since the epoch) at which the launch's resources were running: set by
# the launcher for every rank it starts; the whole job's wall starts here.
LAUNCHED_AT_ENV = "FSDP_BENCH_LAUNCHED_AT"
# How long the launch waited in a queue before that moment (seconds), where the launcher knows it.
QUEUED_S_ENV = "FSDP_BENCH_QUEUED_S"
