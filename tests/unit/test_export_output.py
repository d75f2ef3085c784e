"""`hpo export -o FILE` and `hpo best --export FILE` write outside the study they read, whole or
not at all: an output path that is, or resolves to, anything in the study folder is refused
(exit 2) and so is one that cannot be written, and either way the study keeps every byte."""

import hashlib
import os
from pathlib import Path

import pytest

from hpo.study import DB_NAME, Study
from tests.unit.test_integrity_db import EXPERIMENT, make_study, run

STUDY_FILES = [DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm", f"{DB_NAME}.bak", "hpo.log", "study.lock",
               "trials.csv", "report/report.html", "checkpoints/trial_0002.npz"]


def every_byte(folder: Path) -> dict[str, str]:
    """Each file under `folder` (its subfolders too) by its bytes' digest."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def study(tmp_path: Path) -> Path:
    """A study at rest with the files a search and a resume leave beside the database."""
    folder = make_study(tmp_path / "s")
    (folder / "hpo.log").write_text("the driver's log\n")
    (folder / "study.lock").write_text("")
    (folder / f"{DB_NAME}.bak").write_bytes((folder / DB_NAME).read_bytes())
    return folder


def _refused(capsys, folder: Path, *args) -> str:
    before, beside = every_byte(folder), sorted(p.name for p in folder.parent.iterdir())
    code, output = run(capsys, *args)
    assert code == 2, output
    assert "Traceback" not in output and "error:" in output
    assert every_byte(folder) == before
    assert sorted(p.name for p in folder.parent.iterdir()) == beside, "a file was left beside the study"
    return output


@pytest.mark.parametrize("name", STUDY_FILES)
@pytest.mark.parametrize("form", ["json", "csv"])
def test_export_into_the_study_folder_is_refused_and_changes_no_byte(study, capsys, name, form):
    output = _refused(capsys, study, "export", study, "--format", form, "-o", study / name)
    assert str(study / name) in output and "inside the study folder" in output


def test_export_through_a_symlink_to_the_database_is_refused(study, capsys, tmp_path):
    link = tmp_path / "trials.json"
    link.symlink_to(study / DB_NAME)
    output = _refused(capsys, study, "export", study, "--format", "json", "-o", link)
    assert "inside the study folder" in output and str(study / DB_NAME) in output
    assert link.is_symlink()


def test_export_through_a_symlinked_folder_or_dot_dot_is_refused(study, capsys, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "alias").symlink_to(study, target_is_directory=True)
    for path in (tmp_path / "alias" / DB_NAME, tmp_path / "alias" / "new.csv",
                 tmp_path / "elsewhere" / ".." / study.name / "hpo.log"):
        assert "inside the study folder" in _refused(capsys, study, "export", study, "-o", path)


def test_export_into_a_missing_folder_is_exit_2_naming_the_path(study, capsys, tmp_path):
    path = tmp_path / "nonexist" / "x.csv"
    output = _refused(capsys, study, "export", study, "--format", "csv", "-o", path)
    assert str(path) in output and "does not exist" in output
    assert not (tmp_path / "nonexist").exists()


def test_export_under_a_file_or_onto_a_folder_is_exit_2(study, capsys, tmp_path):
    (tmp_path / "a-file").write_text("")
    (tmp_path / "a-folder").mkdir()
    assert "a-file is a file, not a folder" in _refused(capsys, study, "export", study, "-o",
                                                        tmp_path / "a-file" / "x.csv")
    assert "is a folder" in _refused(capsys, study, "export", study, "-o", tmp_path / "a-folder")


def test_export_into_an_unwritable_folder_is_exit_2(study, capsys, tmp_path, monkeypatch):
    locked = tmp_path / "read-only"
    locked.mkdir(mode=0o555)
    if os.geteuid() == 0:       # root writes into any folder: the permission is what os.access reports
        real_access = os.access
        monkeypatch.setattr(os, "access", lambda path, mode, **kw: False
                            if Path(path).resolve() == locked.resolve() and mode & os.W_OK
                            else real_access(path, mode, **kw))
    assert "not writable" in _refused(capsys, study, "export", study, "-o", locked / "x.csv")


def test_a_failed_write_leaves_the_old_file_whole_and_no_temporary_file(study, capsys, tmp_path, monkeypatch):
    import hpo.cli.output_file

    target = tmp_path / "out" / "trials.csv"
    target.parent.mkdir()
    target.write_text("the previous export\n")

    def disk_full(source, destination):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(hpo.cli.output_file.os, "replace", disk_full)
    output = _refused(capsys, study, "export", study, "-o", target)
    assert str(target) in output and "No space left on device" in output
    assert target.read_text() == "the previous export\n"
    assert [p.name for p in target.parent.iterdir()] == ["trials.csv"]


def test_an_export_outside_the_study_replaces_the_file_whole(study, capsys, tmp_path):
    target = tmp_path / "out" / "trials.json"
    target.parent.mkdir()
    target.write_text("x" * 100_000)
    before = every_byte(study)
    code, output = run(capsys, "export", study, "--format", "json", "-o", target)
    assert code == 0, output
    assert target.read_text().startswith("[") and len(target.read_text()) < 100_000
    assert [p.name for p in target.parent.iterdir()] == ["trials.json"]
    assert every_byte(study) == before


def test_a_replaced_export_keeps_its_permissions(study, capsys, tmp_path):
    target = tmp_path / "private.json"
    target.write_text("old")
    target.chmod(0o600)
    assert run(capsys, "export", study, "--format", "json", "-o", target)[0] == 0
    assert target.read_text().startswith("[") and (target.stat().st_mode & 0o777) == 0o600


def test_an_export_to_a_pipe_or_a_device_is_written_as_it_is(study, capsys, tmp_path):
    import threading
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    code, output = run(capsys, "export", study, "--format", "json", "-o", fifo)
    reader.join(timeout=30)
    assert code == 0, output
    assert received and received[0].startswith("[") and '"trial_id"' in received[0]
    assert run(capsys, "export", study, "--format", "csv", "-o", os.devnull)[0] == 0
    code, output = run(capsys, "export", study, "--format", "json", "-o", "-")      # '-': standard output
    assert code == 0 and output.startswith("[") and not Path("-").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe", "s"]


def test_export_through_a_symlink_outside_the_study_writes_its_target(study, capsys, tmp_path):
    real = tmp_path / "real.csv"
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    code, output = run(capsys, "export", study, "-o", link)
    assert code == 0, output
    assert link.is_symlink() and real.read_text().startswith("trial_id,")


@pytest.fixture
def exportable(study: Path) -> Path:
    """The study with a built-in loader and builder and its best trial's checkpoint on disk:
    `best --export` gets as far as the output path without importing TensorFlow."""
    opened = Study.open(study)
    opened.replace_experiment({**EXPERIMENT, "data": {"dataset": "digits"}, "model": {"builder": "mlp"}})
    opened.close()
    opened = Study.open(study, read_only=True)
    for trial in opened.trials():
        opened.checkpoint(trial.trial_id).parent.mkdir(exist_ok=True)
        opened.checkpoint(trial.trial_id).write_bytes(b"a checkpoint")
    opened.close()
    return study


@pytest.mark.parametrize("name", [DB_NAME, "hpo.log", "model.keras", "checkpoints/trial_0002.keras"])
def test_best_export_into_the_study_folder_is_refused_before_tensorflow(exportable, capsys, name):
    target = exportable / name
    if target.suffix != ".keras":       # a .keras name that is the study's file, by a symlink
        link = exportable.parent / "best.keras"
        link.symlink_to(target)
        target = link
    output = _refused(capsys, exportable, "best", exportable, "--trial", "2", "--export", target)
    assert "inside the study folder" in output


@pytest.mark.slow       # a study of 400 trials, so that a status table outgrows the pipe
def test_a_reader_that_stops_early_ends_a_read_only_command_quietly(tmp_path):
    """`hpo status ... | head -1`: the reader closes the pipe; the command ends with 141, as a
    shell reports SIGPIPE, with no message and no traceback file (exit 1 means an error)."""
    import fcntl
    import os
    import subprocess
    import sys
    import tempfile

    import hpo
    from tests.support.cli import ROOT, cli_env

    study = tmp_path / "study"
    hpo.optimize(lambda config, budget: config["x"], {"x": {"type": "float", "low": 0.0, "high": 1.0}}, "random",
                 min_budget=1, max_budget=1, max_trials=400, study_dir=study)
    tracebacks = set(Path(tempfile.gettempdir()).glob("hpo-error-*"))
    # A pipe of one page, read one byte at a time up to the first line: the table cannot fit
    # in it, so the command is still writing when the reader goes (with the default 64 KiB
    # pipe and a buffered read it could finish first, and end 0).
    read_end, write_end = os.pipe()
    fcntl.fcntl(read_end, 1031, 4096)          # F_SETPIPE_SZ
    # 50 columns: the configs move out, and the line saying so is a write after the table's.
    reader = subprocess.Popen([sys.executable, "-m", "hpo", "status", str(study), "--all"], cwd=ROOT, env=cli_env(50),
                              stdout=write_end, stderr=subprocess.PIPE)
    os.close(write_end)
    with open(read_end, "rb", buffering=0) as pipe:
        assert pipe.readline()
    assert reader.wait(timeout=60) == 141
    assert reader.stderr.read() == b""
    assert set(Path(tempfile.gettempdir()).glob("hpo-error-*")) == tracebacks


@pytest.mark.parametrize("name, given, starts", [("trials.json", None, "["), ("TRIALS.JSON", None, "["),
                                                 ("trials.csv", None, "trial_id,"), ("trials.txt", None, "trial_id,"),
                                                 ("trials.json", "csv", "trial_id,"), ("trials.csv", "json", "[")])
def test_the_output_files_suffix_names_the_format_unless_it_is_given(study, capsys, tmp_path, name, given, starts):
    target = tmp_path / name
    code, output = run(capsys, "export", study, *(["--format", given] if given else []), "-o", target)
    assert code == 0, output
    assert target.read_text().startswith(starts)
