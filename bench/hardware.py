"""The one table of device and cluster facts, each number with its source.

Used by MFU (the worker receives the device table with its spec) and by the planner.
Torch-free: `plan` must run on a laptop without a GPU.

Units: peak FLOP/s are dense (no structured sparsity), in TFLOP/s. Memory in GiB as
marketed (80 GB cards are treated as 80 GiB less what the driver reserves; the planner
applies its own headroom). Bandwidths in Gbit/s: `intra_node_gbps` is one GPU's
unidirectional NVLink bandwidth, `inter_node_gbps` the whole node's network bandwidth.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


@dataclass(frozen=True)
class DeviceFacts:
    """One accelerator model: what MFU divides by and what the planner fills."""

    name: str
    # torch.cuda.get_device_name() values of this device, without the "NVIDIA " prefix. Matched
    # exactly: "H200 NVL" or "H100 PCIe" have other peaks and must not borrow these.
    match: tuple[str, ...]
    memory_gib: float
    peak_tflops: dict[str, float]
    source: str


@dataclass(frozen=True)
class ClusterFacts:
    """One node type (instance type or generic node): its devices and its links."""

    name: str
    device: str
    gpus_per_node: int
    device_memory_gib: float
    peak_tflops: dict[str, float]
    intra_node_gbps: float
    inter_node_gbps: float
    efa_devices: int = 0
    # Per-message latency of a collective step (ring hop), seconds; NCCL's order of magnitude.
    link_latency_s: float = 10e-6
    device_type: str = "cuda"
    source: str = ""
    extra: dict[str, float] = field(default_factory=dict)

    def with_overrides(self, **overrides: object) -> ClusterFacts:
        """A copy with fields replaced (`cluster.inter_node_gbps=400`); None keeps the preset value."""
        allowed = {f.name for f in dataclasses.fields(self)}
        unknown = set(overrides) - allowed
        if unknown:
            raise ValueError(f"unknown cluster field(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        values = {k: v for k, v in overrides.items() if v is not None}
        if isinstance(values.get("peak_tflops"), dict):
            merged = dict(self.peak_tflops)
            merged.update({k: float(v) for k, v in values["peak_tflops"].items() if v is not None})
            values["peak_tflops"] = merged
        return dataclasses.replace(self, **values)


_NVIDIA_A100 = "NVIDIA A100 datasheet (dense): FP32 19.5, TF32 156, BF16/FP16 312 TFLOP/s"
_NVIDIA_H100 = "NVIDIA H100 SXM datasheet (dense): FP32 67, TF32 494.7, BF16/FP16 989.4, FP8 1978.9 TFLOP/s"
_NVIDIA_H200 = "NVIDIA H200 datasheet (dense): same Hopper compute as H100 SXM, 141 GB HBM3e"
_NVIDIA_GH200 = (
    "NVIDIA GH200 Grace Hopper Superchip datasheet (dense): FP32 67, TF32 494, BF16/FP16 990, FP8 1979 TFLOP/s; "
    "https://www.nvidia.com/en-us/data-center/grace-hopper-superchip/"
)

# Precision name -> the dtype of the tensor-core rate its matmuls run at (the planner's compute rate;
# fp32 runs use plain FP32, no TF32).
PRECISION_PEAK_DTYPE = {"fp32": "fp32", "bf16": "bf16", "bf16_pure": "bf16", "fp16": "fp16", "fp8": "fp8"}
# Precision name -> the dtype whose peak MFU divides by. fp8 runs divide by the bf16 peak, as
# torchtitan and most published tables do (attention, norms and the output layer stay bf16);
# the record also carries `mfu_fp8_peak`, against the fp8 peak.
MFU_PEAK_DTYPE = {**PRECISION_PEAK_DTYPE, "fp8": "bf16"}

DEVICES: dict[str, DeviceFacts] = {
    "a100-40gb": DeviceFacts(
        "a100-40gb",
        ("A100-SXM4-40GB", "A100 40GB", "A100-PCIE-40GB"),
        40,
        {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312},
        _NVIDIA_A100,
    ),
    "a100-80gb": DeviceFacts(
        "a100-80gb",
        ("A100-SXM4-80GB", "A100 80GB", "A100"),
        80,
        {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312},
        _NVIDIA_A100,
    ),
    "h100-sxm": DeviceFacts(
        "h100-sxm",
        ("H100 80GB HBM3", "H100 SXM"),
        80,
        {"fp32": 67, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
        _NVIDIA_H100,
    ),
    "h200": DeviceFacts(
        "h200", ("H200",), 141, {"fp32": 67, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}, _NVIDIA_H200
    ),
    # The PCIe card has the SXM card's tensor-core peaks (its lower power limit shows as lower MFU).
    "a100-80gb-pcie": DeviceFacts(
        "a100-80gb-pcie",
        ("A100 80GB PCIe", "A100-PCIE-80GB"),
        80,
        {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312},
        _NVIDIA_A100 + "; the same peaks for the 80GB PCIe card",
    ),
    # Grace Hopper: the H100 SXM compute; 96 GB HBM3 ("GH200 480GB": 480 GB of Grace LPDDR5X with it)
    # or 144 GB HBM3e.
    "gh200-96gb": DeviceFacts(
        "gh200-96gb",
        ("GH200 480GB", "GH200 120GB"),
        96,
        {"fp32": 67, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
        _NVIDIA_GH200,
    ),
    "gh200-144gb": DeviceFacts(
        "gh200-144gb",
        ("GH200 144G HBM3e",),
        144,
        {"fp32": 67, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
        _NVIDIA_GH200,
    ),
}


def _cluster(name: str, device: str, intra: float, inter: float, efa: int, source: str, **kw: object) -> ClusterFacts:
    dev = DEVICES[device]
    return ClusterFacts(
        name=name,
        device=device,
        gpus_per_node=int(kw.pop("gpus_per_node", 8)),
        device_memory_gib=dev.memory_gib,
        peak_tflops=dict(dev.peak_tflops),
        intra_node_gbps=intra,
        inter_node_gbps=inter,
        efa_devices=efa,
        source=source,
        **kw,
    )


# NVLink: A100 NVLink3 600 GB/s bidirectional = 300 GB/s = 2400 Gbit/s each way per GPU;
# H100/H200 NVLink4 900 GB/s bidirectional = 450 GB/s = 3600 Gbit/s each way per GPU.
CLUSTERS: dict[str, ClusterFacts] = {
    "p4d.24xlarge": _cluster(
        "p4d.24xlarge",
        "a100-40gb",
        2400,
        400,
        4,
        "https://aws.amazon.com/ec2/instance-types/p4/ (8x A100 40GB, 400 Gbps EFA)",
    ),
    "p4de.24xlarge": _cluster(
        "p4de.24xlarge",
        "a100-80gb",
        2400,
        400,
        4,
        "https://aws.amazon.com/ec2/instance-types/p4/ (8x A100 80GB, 400 Gbps EFA)",
    ),
    "p5.48xlarge": _cluster(
        "p5.48xlarge",
        "h100-sxm",
        3600,
        3200,
        32,
        "https://aws.amazon.com/ec2/instance-types/p5/ (8x H100 80GB, 3200 Gbps EFAv2, 32 EFA)",
    ),
    "p5e.48xlarge": _cluster(
        "p5e.48xlarge",
        "h200",
        3600,
        3200,
        32,
        "https://aws.amazon.com/ec2/instance-types/p5/ (8x H200 141GB, 3200 Gbps EFA)",
    ),
    "p5en.48xlarge": _cluster(
        "p5en.48xlarge",
        "h200",
        3600,
        3200,
        16,
        "https://aws.amazon.com/ec2/instance-types/p5/ (8x H200, 3200 Gbps EFAv3, 16 EFA)",
    ),
    # Generic nodes: DGX-style, one 200G (A100, HDR) or 400G (H100/H200, NDR) NIC per GPU.
    "a100-8x": _cluster("a100-8x", "a100-80gb", 2400, 1600, 0, "NVIDIA DGX A100 (8x HDR 200 Gb/s)"),
    "h100-8x": _cluster("h100-8x", "h100-sxm", 3600, 3200, 0, "NVIDIA DGX H100 (8x NDR 400 Gb/s)"),
    "h200-8x": _cluster("h200-8x", "h200", 3600, 3200, 0, "NVIDIA DGX H200 (8x NDR 400 Gb/s)"),
    # This machine: no published peak (MFU is null on CPU); `fsdp-bench calibrate` measures the rest.
    "local-cpu": ClusterFacts(
        name="local-cpu",
        device="cpu",
        gpus_per_node=1,
        device_memory_gib=16,
        peak_tflops={},
        intra_node_gbps=8.0,
        inter_node_gbps=8.0,
        link_latency_s=50e-6,
        device_type="cpu",
        source="defaults for a laptop/CI runner; run `fsdp-bench calibrate` to measure",
    ),
}


def get_cluster(name: str) -> ClusterFacts:
    """Look up a cluster preset, with an error listing the known ones."""
    try:
        return CLUSTERS[name]
    except KeyError:
        raise ValueError(f"unknown cluster '{name}'; allowed: {', '.join(CLUSTERS)}") from None


def get_device(name: str) -> DeviceFacts:
    """Look up a device by table key, with an error listing the known ones."""
    try:
        return DEVICES[name]
    except KeyError:
        raise ValueError(f"unknown device '{name}'; allowed: {', '.join(DEVICES)}") from None


def match_device(device_name: str) -> DeviceFacts | None:
    """The table entry for a runtime device name (torch.cuda.get_device_name()), or None."""
    name = device_name.strip().removeprefix("NVIDIA ").strip()
    for facts in DEVICES.values():
        if name in facts.match:
            return facts
    return None


def peak_table() -> list[dict[str, object]]:
    """The device table as plain data, shipped to ranks inside their spec (they never import bench)."""
    return [
        {"device": d.name, "match": list(d.match), "peak_tflops": dict(d.peak_tflops), "source": d.source}
        for d in DEVICES.values()
    ]
