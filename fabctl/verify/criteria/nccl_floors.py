"""The default floors of phase 01's NCCL check (phase_01_nccl.py): the lowest bus bandwidth all_reduce_perf may show at
its largest message (8-16 GiB) across two nodes, per GPU family and interconnect, each from a published figure and
saying which. `acceptance.nccl_min_busbw_gb_per_sec` replaces them on a site that knows better; a GPU family or
interconnect without an entry here has no default, and the check is not run (a gate that could only judge the reduction
would pass a fabric at any bandwidth).

Bus bandwidth (nccl-tests doc/PERFORMANCE.md): for all_reduce, algbw x 2(n-1)/n, the figure comparable with the
hardware's peak whatever the number of ranks n; at large messages it is bound by the slower of NVLink and the
inter-node rails, which is why an entry names both the GPU family (its NVLink generation) and the rails (one HCA per
GPU, at the link rate of `acceptance.nccl_hca_link_gbit_per_sec`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

IB_RATES = {100: "EDR", 200: "HDR", 400: "NDR", 800: "XDR"}
"""InfiniBand link rates of one 4x port, in Gb/s, and their names."""

AICR = "NVIDIA AI Cluster Runtime (github.com/NVIDIA/aicr, v0.11.1)"
AICR_GATE = (f"{AICR} recipes/overlays/h100-eks-ubuntu-training.yaml gates nccl-all-reduce-bw at >= 300 GB/s, read as "
             "the out-of-place busbw of all_reduce_perf's largest message (16 GiB) and passed at 90 % of it "
             "(validators/performance/nccl_all_reduce_bw_constraint.go: threshold * 0.9), on H100 nodes of EKS over EFA; "
             "its example run shows 488.37 GB/s (docs/user/cli-reference.md)")


@dataclass(frozen=True)
class Floor:
    """The lowest busbw, in GB/s, of all_reduce_perf's largest message on two nodes of `family` GPUs with one
    InfiniBand rail of `link_gbit_per_sec` per GPU and `rails` GPUs per node, and where the figure comes from."""

    family: str
    link_gbit_per_sec: int
    rails: int
    busbw_gb_per_sec: float
    cite: str
    """Where the figure comes from, in a few words (the messages and the report's bound)."""
    source: str
    """Where the figure comes from, with the files and figures that show it (docs/acceptance.md's table)."""


FLOORS: tuple[Floor, ...] = (
    Floor("H100", 400, 8, 270.0, "NVIDIA AI Cluster Runtime's H100 gate, 300 GB/s at 16 GiB less its 10 % tolerance",
          f"{AICR_GATE}; 270 GB/s is that gate less its tolerance. InfiniBand NDR does at least as "
          "well: nccl-tests' maintainers expect 46-48 GB/s per NDR HCA (NVIDIA/nccl-tests issue 290)"),
    Floor("H200", 400, 8, 270.0, "NVIDIA AI Cluster Runtime's H100 gate, which published H200 figures match",
          "the H100 floor (NVIDIA AI Cluster Runtime's H100 gate, 300 GB/s less its 10 % "
          "tolerance), which NVIDIA publishes no H200 gate beside: an HGX H200 has the H100's NVLink 4 and a ConnectX-7 "
          "400 Gb/s HCA per GPU, and Saturn Cloud's cluster validation guide for Crusoe "
          "(saturncloud.io/blog/crusoe-nccl-cluster-validation) expects the same 400-450 GB/s at 8 GiB and more for "
          "H100 SXM and H200 SXM over NVLink and InfiniBand NDR"),
)

_FAMILY = re.compile(r"^NVIDIA-([A-Z]+[0-9]+)")


def family(product: str) -> str:
    """The GPU family of a product label (`nvidia.com/gpu.product`): NVIDIA-H100-80GB-HBM3 -> H100; else the label."""
    found = _FAMILY.match(product)
    return found.group(1) if found else product


def interconnect(link_gbit_per_sec: int, rails: int) -> str:
    """The rails of one node as the messages name them: `8 x 400 Gb/s InfiniBand (NDR)`."""
    name = IB_RATES.get(link_gbit_per_sec)
    return f"{rails} x {link_gbit_per_sec} Gb/s InfiniBand" + (f" ({name})" if name else "")


def floor_for(product: str, link_gbit_per_sec: int, rails: int) -> Floor | None:
    """The published floor for two nodes of `product` GPUs with `rails` rails of `link_gbit_per_sec` each, or None."""
    key = (family(product), link_gbit_per_sec, rails)
    return next((f for f in FLOORS if (f.family, f.link_gbit_per_sec, f.rails) == key), None)
