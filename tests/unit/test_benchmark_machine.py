"""The CPU line benchmark headers print, read from /proc/cpuinfo texts built here."""

from benchmarks.machine import cpu_description, l2_size

# Two processors, as /proc/cpuinfo lists them: the first one's fields are the ones read.
SAPPHIRE_RAPIDS = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse2 avx2 fma avx512f avx512_bf16 amx_bf16 amx_tile
processor\t: 1
model name\t: something else
flags\t\t: fpu
"""
ZEN3 = """processor\t: 0
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx2 fma
"""


def test_names_the_model_and_the_widest_vector_extensions():
    assert cpu_description(SAPPHIRE_RAPIDS, cores=2, l2="2048K") == \
        "2 CPU cores (Intel(R) Xeon(R) Platinum 8480+; AMX + AVX-512 + AVX2; L2 2048K per core)"
    assert cpu_description(ZEN3, cores=2, l2="512K") == "2 CPU cores (AMD EPYC; AVX2; L2 512K per core)"


def test_reads_the_l2_size_from_sysfs(tmp_path):
    for index, (level, size) in enumerate([("1", "32K"), ("1", "32K"), ("2", "512K"), ("3", "32768K")]):
        (tmp_path / f"index{index}").mkdir()
        (tmp_path / f"index{index}" / "level").write_text(level + "\n")
        (tmp_path / f"index{index}" / "size").write_text(size + "\n")
    assert l2_size(tmp_path) == "512K"
    assert l2_size(tmp_path / "missing") is None


def test_without_cpuinfo_it_still_names_something():
    line = cpu_description("", cores=4, l2="")
    assert line.startswith("4 CPU cores (") and line.endswith(")") and len(line) > len("4 CPU cores ()")


def test_counts_the_cores_this_process_may_use(monkeypatch):
    """`taskset -c 0` leaves a process one core of the machine's two."""
    import os
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert cpu_description(ZEN3, l2="512K") == "1 CPU core (AMD EPYC; AVX2; L2 512K per core)"
