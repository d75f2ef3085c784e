"""How many local workers, and which GPU each sees (the pool itself: tests/e2e/test_local_executor.py)."""

from hpo.executors.local import default_workers, visible_gpu_for


def test_one_worker_per_gpu_else_per_core():
    assert default_workers(["/device:CPU:0", "/device:GPU:0", "/device:GPU:1"], cpu_count=16) == 2
    assert default_workers(["/device:CPU:0"], cpu_count=2) == 2
    assert default_workers(["/device:CPU:0"], cpu_count=64) == 8
    assert default_workers([], cpu_count=1) == 1


def test_each_worker_sees_one_gpu_through_cuda_visible_devices():
    assert [visible_gpu_for(slot, 4, None) for slot in range(5)] == ["0", "1", "2", "3", "0"]
    # A parent already limited to some GPUs hands out exactly those.
    assert [visible_gpu_for(slot, 2, "5,7") for slot in range(3)] == ["5", "7", "5"]
    assert visible_gpu_for(0, 0, None) is None and visible_gpu_for(1, 0, "") is None
