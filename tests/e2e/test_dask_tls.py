"""hpo's Dask client honours Dask's security configuration: a study runs through a scheduler
and a worker that speak only TLS, with certificates from `Security.temporary()`.

The scheduler and the worker write their logs to files: a pipe that nobody reads fills up and
blocks the process writing to it, scheduler included. A failure shows the tails of all three
logs, and a driver that is stuck (it says so: `hpo.executors.dask_watch`) fails the test then."""

import json
import os
import subprocess
import sys
import time

from hpo.study import Study
from tests.support.cli import ROOT, SMOKE, cli_env

# The smoke's first bracket trains 4 configurations at budget 1 and its fifth trial is the first
# promotion: the least search with a continuation from a checkpoint and 4 TensorBoard runs.
SMOKE_TRIALS = 5


def _write_certificates(folder):
    from distributed.security import Security

    security = Security.temporary()         # one self-signed CA-and-leaf certificate and its key
    cert, key = folder / "cert.pem", folder / "key.pem"
    cert.write_text(security.tls_ca_file)
    key.write_text(security.tls_scheduler_key)
    return cert, key


def _tail(path, chars=3000) -> str:
    return f"--- {path.name} ---\n" + (path.read_text(errors="replace")[-chars:] if path.exists() else "(none)")


def _wait_for_file(path, process, log, timeout=120.0):
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text().strip():
        assert process.poll() is None, _tail(log)
        assert time.monotonic() < deadline, f"{path} never appeared\n{_tail(log)}"
        time.sleep(0.2)


def _run_driver(args, env, logs, procs, timeout=300.0) -> str:
    """The driver's output once it exits 0; fails at once when it exits otherwise, when the
    scheduler or the worker exits, or when the driver says the scheduler stopped answering."""
    out = logs["driver"]
    with open(out, "w") as sink:
        driver = subprocess.Popen([sys.executable, "-m", "hpo", *args], cwd=ROOT, env=env, text=True,
                                  stdout=sink, stderr=subprocess.STDOUT)
    deadline, why = time.monotonic() + timeout, "exited"
    try:
        while driver.poll() is None:
            if "has not answered" in out.read_text(errors="replace"):
                why = "said the scheduler stopped answering"
            elif any(p.poll() is not None for p in procs):
                why = "lost its scheduler or worker: it exited"
            elif time.monotonic() > deadline:
                why = f"still ran after {timeout:.0f} s"
            else:
                time.sleep(0.5)
                continue
            break
    finally:
        if driver.poll() is None:
            driver.kill()
        driver.wait()
    report = "\n".join(_tail(logs[name]) for name in ("driver", "scheduler", "worker"))
    assert driver.returncode == 0, f"the driver {why} (exit code {driver.returncode})\n{report}"
    return out.read_text(errors="replace")


def _wait_for_worker(address, cert, key, timeout=180):
    """The worker has joined the scheduler: on a loaded machine its TLS handshake and start-up
    can take a while, and a driver that joins first would wait on a cluster with no worker."""
    from distributed import Client
    from distributed.security import Security

    security = Security(tls_ca_file=str(cert), tls_client_cert=str(cert), tls_client_key=str(key),
                        require_encryption=True)
    with Client(address, security=security, timeout="60s") as client:
        client.wait_for_workers(1, timeout=timeout)


def _assert_fit_engine_smoke_run(study_dir):
    """Every trial complete; epochs streamed back one by one; the promotion continued from its
    checkpoint and TensorBoard runs landed in the study folder; the engine line in its log."""
    study = Study.open(study_dir, read_only=True)
    trials = study.trials()
    assert len(trials) == SMOKE_TRIALS and all(t.state.value == "complete" for t in trials), trials
    assert any(t.continues is not None for t in trials), "no promotion ran"
    for t in trials:
        epochs = [m for _, _, m in study.epochs(t.trial_id)]
        assert len(epochs) == t.epochs_trained
        assert {"loss", "accuracy", "val_loss", "val_accuracy"} <= set(epochs[-1])
        assert t.value == epochs[-1]["val_accuracy"]
        assert study.checkpoint(t.trial_id).exists()
    assert len(list((study_dir / "tensorboard").glob("trial_*"))) >= 4
    assert "trains with the fit engine: training.engine is fit" in (study_dir / "hpo.log").read_text()


def test_a_study_runs_through_a_tls_only_scheduler_and_worker(tmp_path):
    """Also the fit engine on Dask: the worker trains every trial with Keras's `model.fit`,
    its promotions continue from the checkpoints, and the engine line reaches the driver's log."""
    cert, key = _write_certificates(tmp_path)
    tls = ["--tls-ca-file", str(cert), "--tls-cert", str(cert), "--tls-key", str(key)]
    env = {**cli_env(), "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True"}
    scheduler_file = tmp_path / "scheduler.json"
    procs = []
    logs = {name: tmp_path / f"{name}.log" for name in ("driver", "scheduler", "worker")}
    try:
        with open(logs["scheduler"], "w") as sink:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_scheduler", "--protocol", "tls", "--host", "127.0.0.1",
                 "--port", "0", "--no-dashboard", "--scheduler-file", str(scheduler_file), *tls],
                env=env, stdout=sink, stderr=subprocess.STDOUT, text=True))
        _wait_for_file(scheduler_file, procs[0], logs["scheduler"])
        address = json.loads(scheduler_file.read_text())["address"]
        assert address.startswith("tls://127.0.0.1:")
        with open(logs["worker"], "w") as sink:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", address, "--host", "127.0.0.1",
                 "--nthreads", "1", "--no-dashboard", *tls],
                cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True))
        _wait_for_worker(address, cert, key)
        # The driver gets the client side of TLS from Dask's configuration only.
        driver_env = {**env, "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(cert),
                      "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": str(cert),
                      "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": str(key)}
        study_dir = tmp_path / "study"
        # The smoke's Hyperband search, trained by Keras's `model.fit` on the Dask worker.
        _run_driver(["search", SMOKE, "--study-dir", str(study_dir), "--set", f"search.max_trials={SMOKE_TRIALS}",
                     "--set", "execution.backend=dask", "--set", f"execution.scheduler={address}",
                     "--set", "training.engine=fit"], driver_env, logs, procs)
        _assert_fit_engine_smoke_run(study_dir)
        # The driver's waits for events are no errors in the scheduler's log (each used to be a
        # traceback there, twice a second: enough to fill an unread pipe and block the scheduler).
        assert "queue_get" not in logs["scheduler"].read_text(), _tail(logs["scheduler"])
        # Without the client certificate the same driver cannot join: the cluster is not open.
        plain = subprocess.run(
            [sys.executable, "-c", "import sys; from distributed import Client; "
             "Client(sys.argv[1], timeout='5s')", address.replace("tls://", "tcp://")],
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
        assert plain.returncode != 0
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
