"""Dask's own floor on this machine, with no hpo and no decision in the loop: what a free
worker waits between tasks when the client resubmits the instant a task ends.

    nice -n 19 python benchmarks/dask_floor.py --workers 16 --ms 40 --tasks 400 --dep --target

A LocalCluster of `--workers` worker processes, one thread each, its scheduler in this
process (as hpo's driver runs it). (a) The round trip of an empty task, one at a time, on idle
workers. (b) `--workers` tasks of `--ms` milliseconds kept in flight with `as_completed`, each
resubmitted as soon as one ends: per worker, the gap from one task's end to its next start.
`--dep` gives every task one scattered argument (as hpo's shares read the trainer maker);
`--target` sends the next task to the worker that just freed (as hpo's Dask executor does).
`benchmarks/many_processes.py --backend dask` measures the same wait with hpo's driver.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time

from distributed import Client, LocalCluster, as_completed, get_worker


def noop():
    return None


def sleeper(ms: float, dep=None):
    began = time.time()
    time.sleep(ms / 1000)
    return os.getpid(), began, time.time(), get_worker().address


def spread(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return (f"median {1000 * statistics.median(ordered):.1f} ms, p95 {1000 * p95:.1f} ms, "
            f"max {1000 * ordered[-1]:.1f} ms (n={len(ordered)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--ms", type=float, default=40, help="each task's length")
    parser.add_argument("--tasks", type=int, default=800)
    parser.add_argument("--target", action="store_true", help="resubmit to the worker that just finished")
    parser.add_argument("--dep", action="store_true", help="each task takes a scattered (broadcast) argument")
    args = parser.parse_args()
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        client.wait_for_workers(args.workers)
        for _ in range(20):
            client.submit(noop, pure=False).result()
        round_trips = []
        for _ in range(200):
            start = time.perf_counter()
            client.submit(noop, pure=False).result()
            round_trips.append(time.perf_counter() - start)
        print(f"(a) empty task round trip, one at a time, {args.workers} idle workers: {spread(round_trips)}")
        dep = client.scatter([list(range(1000))], broadcast=True, hash=False)[0] if args.dep else None
        running = as_completed([client.submit(sleeper, args.ms, dep, pure=False) for _ in range(args.workers)])
        sent, runs = args.workers, []
        for future in running:
            runs.append(future.result())
            future.release()
            where = dict(workers=[runs[-1][3]], allow_other_workers=True) if args.target else {}
            if sent < args.tasks:
                running.add(client.submit(sleeper, args.ms, dep, pure=False, **where))
                sent += 1
    by_worker: dict[int, list[tuple[float, float]]] = {}
    for pid, began, ended, _ in runs:
        by_worker.setdefault(pid, []).append((began, ended))
    print("tasks per worker:", sorted(len(v) for v in by_worker.values()))
    gaps = [max(0.0, later[0] - earlier[1]) for spans in by_worker.values()
            for earlier, later in zip(sorted(spans), sorted(spans)[1:])]
    how = (" with a scattered argument" if args.dep else "") + \
        (", sent to the worker just freed" if args.target else "")
    print(f"(b{how}) {args.workers} tasks of {args.ms:g} ms in flight, resubmitted at once on completion: "
          f"a worker's gap between tasks {spread(gaps)}")


if __name__ == "__main__":
    main()
