"""One line naming the CPU a benchmark ran on, for its header.

The same script has given K=8 fused speedups of 1.74 on an AVX2-only AMD EPYC and 1.80 on
an Intel part with AVX-512 and AMX, with trials 2x faster on the second: a figure means
little without the machine it came from, and `os.cpu_count()` alone does not say it (nor
does it see `taskset`).
"""

from __future__ import annotations

import platform
from pathlib import Path

from hpo.training.devices import usable_cores

# The vector extensions that decide XLA:CPU's matmul speed, widest first.
_VECTOR_FLAGS = (("amx_bf16", "AMX"), ("avx512f", "AVX-512"), ("avx2", "AVX2"))


def l2_size(cache_folder: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> str | None:
    """Core 0's L2 size as sysfs writes it ('512K'), or None. Whether one trial's weights and
    optimizer slots fit in it decides how much fusion saves on a core."""
    for index in sorted(cache_folder.glob("index*")):
        try:
            if (index / "level").read_text().strip() == "2":
                return (index / "size").read_text().strip()
        except OSError:
            return None
    return None


def cpu_description(cpuinfo: str | None = None, cores: int | None = None, l2: str | None = None) -> str:
    """'2 CPU cores (AMD EPYC; AVX2; L2 512K per core)', from /proc/cpuinfo and sysfs where
    there are."""
    cores = usable_cores() if cores is None else cores
    if cpuinfo is None:
        path = Path("/proc/cpuinfo")
        cpuinfo = path.read_text() if path.exists() else ""
    fields = {}
    for line in cpuinfo.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() not in fields:
            fields[name.strip()] = value.strip()
    model = fields.get("model name") or platform.processor() or platform.machine() or "unknown CPU"
    flags = set(fields.get("flags", "").split())
    vector = [label for flag, label in _VECTOR_FLAGS if flag in flags]
    l2 = l2_size() if l2 is None else l2
    details = "; ".join([model] + ([" + ".join(vector)] if vector else []) + ([f"L2 {l2} per core"] if l2 else []))
    return f"{cores} CPU {'core' if cores == 1 else 'cores'} ({details})"


if __name__ == "__main__":
    print(cpu_description())
