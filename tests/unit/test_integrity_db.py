"""A damaged study database is refused, never trusted or replaced; commands that only read
open it read-only; a resume backs it up first; a dead driver's trials read as interrupted."""

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from hpo.cli import main
from hpo.study import DB_NAME, Study
from hpo.trial import Job, TrialResult, TrialState

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = {"name": "t", "search": {"objective": "val_accuracy", "direction": "maximize", "algorithm": "random"},
              "space": {"units": {"type": "int", "low": 0, "high": 300},
                        "note": {"type": "choice", "values": ["x" * 200]}}}
READERS = [["status"], ["export"], ["export", "--format", "json"], ["best"], ["report"]]


def make_study(folder: Path, trials: int = 3, running: int = 0) -> Path:
    study = Study.create(folder, EXPERIMENT)
    for trial_id in range(trials + running):
        job = Job(trial_id, {"units": trial_id, "note": "x" * 200}, 1.0)
        study.record_ask(job)
        study.mark_running(trial_id)
        if trial_id < trials:
            study.record_epoch(trial_id, 0, {"val_accuracy": 0.5})
            study.record_result(job, TrialResult(value=0.1 * trial_id, metrics={"val_accuracy": 0.5}), 1.0)
    study.close()
    return folder


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out + err


def corrupt_a_page(path: Path) -> None:
    """Overwrite the middle of a b-tree page that holds trial rows (not the header page)."""
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) >= 4 * page
    data[3 * page + 8: 3 * page + 400] = b"\xa5" * 392
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("command", READERS + [["tensorboard"]], ids=lambda c: " ".join(c))
def test_read_only_commands_never_create_a_study(tmp_path, capsys, command):
    folder = tmp_path / "nothing-here"
    folder.mkdir()
    code, output = run(capsys, command[0], folder, *command[1:])
    assert code == 2 and "no study here" in output and "Traceback" not in output
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("command", READERS, ids=lambda c: " ".join(c))
def test_reading_a_study_at_rest_leaves_its_folder_byte_for_byte(tmp_path, capsys, command):
    """No driver runs and the log was checkpointed: a reader adds no file (not even SQLite's
    -wal and -shm) and changes none."""
    folder = make_study(tmp_path / "s")
    before = digests(folder)
    code, output = run(capsys, command[0], folder, *command[1:])
    assert code == 0, output
    assert digests(folder) == before


def test_a_driver_starting_while_a_reader_opens_the_study_at_rest_is_no_damage(tmp_path, monkeypatch):
    """The reader looked at the lock (free) and opened the file as immutable; a driver then
    wrote and checkpointed pages under it. The reader's check may then fail: it is taken
    again on an ordinary read-only connection, and the study reads as it now is."""
    import hpo.study

    folder = make_study(tmp_path / "s")
    connect = hpo.study.store._connect

    def driver_starts_after(path, mode="rwc", *, immutable=False):
        reader = connect(path, mode, immutable=immutable)
        if immutable:
            reader.execute("PRAGMA cache_size=2")     # pages read after this point come from the file
            writer = connect(path, "rw")
            writer.executemany("INSERT INTO meta VALUES (?, ?)", [(f"k{i}", "v" * 300) for i in range(3000)])
            writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            writer.close()
        return reader

    monkeypatch.setattr(hpo.study.store, "_connect", driver_starts_after)
    study = Study.open(folder, read_only=True)
    try:
        assert len(study.trials()) == 3 and study.experiment() == EXPERIMENT
        assert study._db.execute("SELECT COUNT(*) FROM meta WHERE key LIKE 'k%'").fetchone() == (3000,)
    finally:
        study.close()


@pytest.mark.parametrize("command", READERS, ids=lambda c: " ".join(c))
def test_an_empty_database_is_a_damaged_study_and_stays_empty(tmp_path, capsys, command):
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / DB_NAME).write_bytes(b"")
    code, output = run(capsys, command[0], folder, *command[1:])
    assert code == 2 and "Traceback" not in output
    assert str(folder / DB_NAME) in output and "empty" in output and "--fresh" in output
    assert (folder / DB_NAME).read_bytes() == b""


@pytest.mark.parametrize("command", READERS, ids=lambda c: " ".join(c))
def test_a_corrupt_page_is_refused_by_every_command_and_the_file_is_unchanged(tmp_path, capsys, command):
    folder = make_study(tmp_path / "s", trials=200)
    corrupt_a_page(folder / DB_NAME)
    before = (folder / DB_NAME).read_bytes()
    code, output = run(capsys, command[0], folder, *command[1:])
    assert code == 2 and "Traceback" not in output, output
    assert "damaged" in output and "integrity check failed" in output
    assert (folder / DB_NAME).read_bytes() == before


def _killed_driver_leaves_a_wal(folder: Path) -> None:
    """Write trials and die without closing (kill -9): the WAL keeps committed frames."""
    code = ("import os, sys; from hpo.study import Study; from hpo.trial import Job, TrialResult; "
            "s = Study.open(sys.argv[1]); "
            "[s.record_ask(Job(i, {'units': i}, 1.0)) for i in range(100, 140)]; os._exit(0)")
    subprocess.run([sys.executable, "-c", code, str(folder)], check=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_truncated_wal_is_refused_and_left_as_it_is(tmp_path, capsys):
    folder = make_study(tmp_path / "s")
    _killed_driver_leaves_a_wal(folder)
    wal = folder / (DB_NAME + "-wal")
    assert wal.stat().st_size > 4096
    with open(wal, "r+b") as handle:
        handle.truncate(wal.stat().st_size - 1000)
    before = {name: digest for name, digest in digests(folder).items() if name != DB_NAME + "-shm"}
    code, output = run(capsys, "status", folder)
    assert code == 2 and "cut short" in output and "Traceback" not in output
    after = {name: digest for name, digest in digests(folder).items() if name != DB_NAME + "-shm"}
    assert after == before


def test_a_killed_drivers_whole_wal_is_read_and_its_running_trials_show_as_interrupted(tmp_path, capsys):
    folder = make_study(tmp_path / "s", trials=2, running=1)
    _killed_driver_leaves_a_wal(folder)
    db_before = (folder / DB_NAME).read_bytes()
    code, output = run(capsys, "export", folder, "--format", "json")
    rows = json.loads(output)
    assert code == 0
    assert len(rows) == 3 + 40                         # the WAL's committed asks are there
    assert rows[2]["state"] == "interrupted"           # derived: no process holds the lock
    assert (folder / DB_NAME).read_bytes() == db_before
    stored = sqlite3.connect(folder / DB_NAME).execute("SELECT state FROM trials WHERE trial_id=2").fetchone()
    assert stored == ("running",), "the state is derived when reading, never written"


def test_a_live_drivers_running_trials_stay_running(tmp_path):
    folder = make_study(tmp_path / "s", trials=1, running=1)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from hpo.study.lock import acquire; acquire(sys.argv[1]); "
         "print('held', flush=True); time.sleep(60)", str(folder)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "held"
        assert Study.open(folder, read_only=True).trial(1).state == TrialState.RUNNING
    finally:
        holder.kill()
        holder.wait()
    assert Study.open(folder, read_only=True).trial(1).state == TrialState.INTERRUPTED
    assert Study.open(folder).trial(1).state == TrialState.RUNNING   # the driver sees what is stored


def test_reading_a_healthy_study_changes_no_byte_of_its_database(tmp_path, capsys):
    folder = make_study(tmp_path / "s")
    before = (folder / DB_NAME).read_bytes()
    for command in READERS:
        assert run(capsys, command[0], folder, *command[1:])[0] == 0
    assert (folder / DB_NAME).read_bytes() == before


def test_a_read_only_study_refuses_writes(tmp_path):
    study = Study.open(make_study(tmp_path / "s"), read_only=True)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        study.record_ask(Job(99, {}, 1.0))


def test_a_newer_schema_is_refused_with_exit_2(tmp_path, capsys):
    folder = make_study(tmp_path / "s")
    db = sqlite3.connect(folder / DB_NAME)
    db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    db.commit()
    db.close()
    code, output = run(capsys, "status", folder)
    assert code == 2 and "schema version 99" in output


def test_resume_backs_up_the_study_first_and_the_backup_restores_it(tmp_path):
    from hpo.config import experiment_from_dict
    from hpo.study.resume import prepare_study

    exp = experiment_from_dict({"name": "b", "data": {"dataset": "synthetic"},
                                "space": {"x": {"type": "float", "low": 0, "high": 1}},
                                "search": {"objective": "objective", "max_trials": 3},
                                "output": {"dir": str(tmp_path / "s")}})
    study = prepare_study(exp, exp.study_dir)
    study.record_ask(Job(0, {"x": 0.5}, 1.0))
    study.close()
    assert not (tmp_path / "s" / "study.sqlite.bak").exists()     # a new study has nothing to back up
    study = prepare_study(exp, exp.study_dir)
    study.record_ask(Job(1, {"x": 0.25}, 1.0))                      # written after the backup
    study.close()
    backup = tmp_path / "s" / "study.sqlite.bak"
    restored = Study.open(_restore(backup, tmp_path / "restored"), read_only=True)
    assert [t.trial_id for t in restored.trials()] == [0]


def _restore(backup: Path, folder: Path) -> Path:
    """The documented restore: copy the backup over study.sqlite (no -wal or -shm beside it)."""
    folder.mkdir()
    (folder / DB_NAME).write_bytes(backup.read_bytes())
    return folder


def test_an_exit_1_of_a_command_that_reads_a_study_leaves_its_traceback_outside_it(tmp_path, capsys, monkeypatch):
    folder = make_study(tmp_path / "s")
    before = digests(folder)

    def broken(self, *args):
        raise RuntimeError("a bug in reading trials")

    monkeypatch.setattr(Study, "trials", broken)
    code, output = run(capsys, "status", folder)
    assert code == 1 and digests(folder) == before
    named = [word for word in output.split() if word.endswith(".log")]
    assert named and not Path(named[0]).resolve().is_relative_to(folder.resolve())
    log = Path(named[0]).read_text()
    assert "Traceback" in log and "RuntimeError: a bug in reading trials" in log and "hpo status" in log
    Path(named[0]).unlink()


def test_an_exit_1_of_search_leaves_its_traceback_in_the_studys_log(tmp_path, capsys, monkeypatch):
    import argparse

    import hpo.cli as cli
    folder = make_study(tmp_path / "s")
    try:
        raise RuntimeError("a bug mid-search")
    except RuntimeError:
        where = cli._write_traceback(argparse.Namespace(command="search", resolved_study_dir=folder))
    assert where == folder / "hpo.log"
    log = where.read_text()
    assert "RuntimeError: a bug mid-search" in log and "hpo search" in log


def test_an_exit_1_without_a_study_names_the_file_holding_the_traceback(tmp_path, capsys, monkeypatch):
    import hpo.config

    def broken(*args, **kwargs):
        raise RuntimeError("a bug before any study")

    monkeypatch.setattr(hpo.config, "load_experiment", broken)
    code, output = run(capsys, "search", tmp_path / "exp.yaml")
    assert code == 1
    named = [word for word in output.split() if word.endswith(".log")]
    assert named and "RuntimeError: a bug before any study" in Path(named[0]).read_text()
    Path(named[0]).unlink()


RECEIVED_HOOKS = """\
from pathlib import Path
Path(__file__).with_name("imported.marker").write_text("the study's code ran")


def load(**_):
    raise RuntimeError("never called in this test")
"""


def _received_study(tmp_path: Path, monkeypatch) -> Path:
    """A study folder from someone else, naming a loader that is importable here."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "their_task.py").write_text(RECEIVED_HOOKS)
    experiment = {**EXPERIMENT, "data": {"dataset": "their_task:load"}, "model": {"builder": "mlp"}}
    study = Study.create(tmp_path / "received", experiment)
    job = Job(0, {"units": 3, "note": "x" * 200}, 1.0)
    study.record_ask(job)
    study.record_result(job, TrialResult(value=0.5, metrics={"val_accuracy": 0.5}), 1.0)
    study.close()
    return tmp_path / "received"


def test_a_received_study_imports_no_code_without_consent(tmp_path, capsys, monkeypatch):
    folder = _received_study(tmp_path, monkeypatch)
    code, output = run(capsys, "best", folder, "--export", tmp_path / "best.keras")
    assert code == 2 and "Traceback" not in output
    assert "data.dataset 'their_task:load'" in output and "--trust-code" in output and "--experiment" in output
    assert not (tmp_path / "imported.marker").exists()
    assert "their_task" not in sys.modules
    # An experiment file that names other code is no consent either.
    (tmp_path / "other.yaml").write_text("name: o\ndata: {dataset: digits}\nspace: {units: {type: int, low: 1, "
                                         "high: 4}}\n")
    code, output = run(capsys, "best", folder, "--export", tmp_path / "best.keras", "--experiment",
                       tmp_path / "other.yaml")
    assert code == 2 and "does not name the code the study names" in output
    assert not (tmp_path / "imported.marker").exists()


def test_trust_code_lets_a_received_study_past_the_gate(tmp_path, capsys, monkeypatch):
    folder = _received_study(tmp_path, monkeypatch)
    code, output = run(capsys, "best", folder, "--export", tmp_path / "best.keras", "--trust-code")
    # Past the consent gate; this study has no checkpoint, so the export stops there.
    assert code == 2 and "checkpoint is missing" in output


def test_built_in_loaders_and_builders_need_no_consent(tmp_path, capsys):
    folder = make_study(tmp_path / "s")   # no data or model section: nothing named at all
    study = Study.open(folder)
    study.replace_experiment({**EXPERIMENT, "data": {"dataset": "digits"}, "model": {"builder": "cnn"}})
    study.close()
    code, output = run(capsys, "best", folder, "--export", tmp_path / "best.keras")
    assert code == 2 and "checkpoint is missing" in output
    # An experiment file named is read all the same: a missing one is said, not passed over.
    code, output = run(capsys, "best", folder, "--export", tmp_path / "best.keras", "--experiment",
                       tmp_path / "nowhere.yaml")
    assert code == 2 and "nowhere.yaml" in output and "not found" in output


def test_fresh_starts_again_beside_a_damaged_study_without_opening_it(tmp_path):
    from hpo.config import experiment_from_dict
    from hpo.study.resume import prepare_study

    folder = tmp_path / "s"
    folder.mkdir()
    (folder / DB_NAME).write_bytes(b"")
    exp = experiment_from_dict({"name": "b", "data": {"dataset": "synthetic"},
                                "space": {"x": {"type": "float", "low": 0, "high": 1}},
                                "search": {"objective": "objective"}, "output": {"dir": str(folder)}})
    with pytest.raises(Exception, match="empty"):
        prepare_study(exp, folder)
    assert (folder / DB_NAME).read_bytes() == b""
    prepare_study(exp, folder, fresh=True).close()
    moved = [p for p in tmp_path.iterdir() if p.name.startswith("s.old-")]
    assert len(moved) == 1 and (moved[0] / DB_NAME).read_bytes() == b""
    assert Study.open(folder, read_only=True).experiment()["name"] == "b"


def test_a_resume_refused_for_a_changed_experiment_changes_no_file(tmp_path):
    from hpo.config import experiment_from_dict
    from hpo.errors import UserInputError
    from hpo.study.resume import prepare_study

    def experiment(high):
        return experiment_from_dict({"name": "b", "data": {"dataset": "synthetic"},
                                     "space": {"x": {"type": "float", "low": 0, "high": high}},
                                     "search": {"objective": "objective"}, "output": {"dir": str(tmp_path / "s")}})

    prepare_study(experiment(1), tmp_path / "s").close()
    _killed_driver_leaves_a_wal(tmp_path / "s")            # committed frames not yet in study.sqlite
    before = {k: v for k, v in digests(tmp_path / "s").items() if not k.endswith("-shm")}
    with pytest.raises(UserInputError, match="space.x.high: 1.0 -> 2.0"):
        prepare_study(experiment(2), tmp_path / "s")
    assert {k: v for k, v in digests(tmp_path / "s").items() if not k.endswith("-shm")} == before


def test_a_resume_refused_for_a_changed_experiment_adds_no_file_to_a_study_at_rest(tmp_path):
    """The refusing driver holds the lock itself, yet reads the stored experiment without
    SQLite's -wal and -shm: a study closed cleanly keeps exactly the files it had."""
    from hpo.config import experiment_from_dict
    from hpo.errors import UserInputError
    from hpo.study.resume import prepare_study

    def experiment(algorithm):
        return experiment_from_dict({"name": "b", "data": {"dataset": "synthetic"},
                                     "space": {"x": {"type": "float", "low": 0, "high": 1}},
                                     "search": {"objective": "objective", "algorithm": algorithm},
                                     "output": {"dir": str(tmp_path / "s")}})

    prepare_study(experiment("random"), tmp_path / "s").close()
    before = digests(tmp_path / "s")
    assert DB_NAME + "-wal" not in before and DB_NAME + "-shm" not in before
    with pytest.raises(UserInputError, match="search.algorithm: 'random' -> 'bohb'"):
        prepare_study(experiment("bohb"), tmp_path / "s")
    assert digests(tmp_path / "s") == before


def test_a_resume_that_goes_ahead_after_the_check_still_writes_the_study(tmp_path):
    """Reading the stored experiment as immutable does not keep the resumed driver from writing."""
    from hpo.config import experiment_from_dict
    from hpo.study.resume import prepare_study

    experiment = experiment_from_dict({"name": "b", "data": {"dataset": "synthetic"},
                                       "space": {"x": {"type": "float", "low": 0, "high": 1}},
                                       "search": {"objective": "objective"}, "output": {"dir": str(tmp_path / "s")}})
    prepare_study(experiment, tmp_path / "s").close()
    study = prepare_study(experiment, tmp_path / "s")
    try:
        study.record_ask(Job(0, {"x": 0.5}, 1.0))
    finally:
        study.close()
    assert [t.trial_id for t in Study.open(tmp_path / "s", read_only=True).trials()] == [0]


@pytest.mark.parametrize("rows", [[], ["--top", "3"], ["--all"]])
def test_status_of_a_study_with_no_trials_says_so_and_changes_nothing(tmp_path, capsys, rows):
    folder = make_study(tmp_path / "s", trials=0)
    before = digests(folder)
    code, output = run(capsys, "status", folder, *rows)
    assert code == 0 and "no trials yet" in output
    assert "too wide" not in output and "--trial N" not in output
    assert digests(folder) == before


def test_split_fingerprints_compare_only_in_the_same_form():
    from hpo.data.dataset import same_split
    assert same_split("splits-v1:ab", "splits-v1:ab") is True
    assert same_split("splits-v1:ab", "splits-v1:cd") is False
    assert same_split("0123abcd", "splits-v1:ab") is None and same_split("splits-v2:ab", "splits-v1:ab") is None


def test_status_top_of_a_study_where_no_trial_completed_says_none_ranks(tmp_path, capsys):
    folder = make_study(tmp_path / "s", trials=0, running=2)
    code, output = run(capsys, "status", folder, "--top", "3")
    assert code == 0 and "no trial has completed yet, so none ranks" in output and "the 0 best" not in output



def test_a_damaged_study_tells_hpo_optimize_how_to_start_anew(tmp_path):
    import hpo

    folder = tmp_path / "s"
    folder.mkdir()
    (folder / DB_NAME).write_bytes(b"")
    with pytest.raises(hpo.errors.UserInputError) as caught:
        hpo.optimize(lambda config, budget: config["x"], {"x": {"type": "float", "low": 0, "high": 1}}, "random",
                     min_budget=1, max_budget=1, max_trials=1, study_dir=folder)
    assert "empty" in str(caught.value) and "fresh=True in hpo.optimize()" in str(caught.value)
    assert (folder / DB_NAME).read_bytes() == b""


def test_an_option_tensorboard_refuses_is_bad_input(tmp_path, capfd):
    from hpo.cli import main

    folder = make_study(tmp_path / "s")
    (folder / "tensorboard").mkdir()
    code = main(["tensorboard", str(folder), "--port", "0", "--no-such-option"])     # TensorBoard itself refuses it
    assert code == 2, capfd.readouterr()
    assert "--no-such-option" in capfd.readouterr().err
