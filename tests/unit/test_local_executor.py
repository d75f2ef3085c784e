"""How many local workers, and which GPU each sees (the pool itself: tests/e2e/test_local_executor.py)."""

import multiprocessing.forkserver

from hpo.executors.local import default_workers, trains_with_tensorflow, visible_gpu_for, worker_start_context


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


def test_workers_fork_from_a_tensorflow_server_only_on_linux_without_gpus(monkeypatch):
    """A GPU worker must set its CUDA_VISIBLE_DEVICES before anything imports TensorFlow, so
    with a GPU, or off Linux, workers are spawned; on a CPU-only Linux machine they fork from
    a server that imported TensorFlow once (unless they train without it)."""
    preloads = []
    monkeypatch.setattr(multiprocessing.forkserver, "set_forkserver_preload", preloads.append)
    assert worker_start_context(1, preload_tensorflow=True, platform="linux").get_start_method() == "spawn"
    assert worker_start_context(0, preload_tensorflow=True, platform="darwin").get_start_method() == "spawn"
    assert worker_start_context(0, preload_tensorflow=False, platform="linux").get_start_method() == "forkserver"
    assert preloads == []
    assert worker_start_context(0, preload_tensorflow=True, platform="linux").get_start_method() == "forkserver"
    assert preloads == [["hpo.executors.worker_preload"]]
    # The Dask backend's workers fork from the same server, which imports distributed first.
    assert worker_start_context(0, preload_tensorflow=True, platform="linux",
                                also_preload=("distributed",)).get_start_method() == "forkserver"
    assert preloads[-1] == ["distributed", "hpo.executors.worker_preload"]


def test_only_makers_that_say_so_fork_from_the_tensorflow_server():
    """The default trainer trains Keras models; a maker that says nothing trains without them."""
    assert trains_with_tensorflow(None)
    assert not trains_with_tensorflow(lambda experiment, slot, known: object())


def test_dask_workers_fork_only_from_a_forkserver_their_cluster_starts(monkeypatch):
    """A LocalCluster's workers fork from the driver's forkserver when the cluster starts it
    (CPU-only Linux); with a GPU, or a forkserver already running (whose environment and hash
    seed are those of its start), they are spawned."""
    from hpo.executors import dask_cluster

    preloads = []
    monkeypatch.setattr(multiprocessing.forkserver, "set_forkserver_preload", preloads.append)
    assert dask_cluster._worker_start_method(None, gpus=1, forkserver_running=False) == "spawn"
    assert dask_cluster._worker_start_method(None, gpus=0, forkserver_running=True) == "spawn"
    assert preloads == []
    if "forkserver" in multiprocessing.get_all_start_methods():
        assert dask_cluster._worker_start_method(None, gpus=0, forkserver_running=False) == "forkserver"
        assert preloads[-1] == ["distributed", "hpo.executors.worker_preload"]
