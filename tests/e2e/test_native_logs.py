"""TensorFlow's start-up log lines are filtered by TF_CPP_MIN_LOG_LEVEL; nothing else is lost."""

import subprocess
import textwrap

import pytest

from hpo.native_logs import kept_lines
from tests.support.cli import startup_lines, user_cli
from tests.support.tensorflow_process import TENSORFLOW_PROCESS_GROUP, fresh_python, tensorflow_then_xla

# One worker runs this module and test_xla_fusion_process.py: they share one TensorFlow process.
pytestmark = pytest.mark.xdist_group(TENSORFLOW_PROCESS_GROUP)

NOISE = [b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
         b"I0000 00:00:1795398699.2 20999 port.cc:153] oneDNN custom operations are on.\n",
         b"I0000 00:00:1795398699.3 20999 cpu_feature_guard.cc:227] This TensorFlow binary is optimized.\n",
         b"To enable the following instructions: AVX2 AVX512F, rebuild TensorFlow.\n",
         b"W0000 00:00:1795398699.4 20999 some.cc:1] a warning\n"]
ERROR = b"E0000 00:00:1795398701.5 20999 cuda_platform.cc:52] failed call to cuInit\n"


def test_records_below_the_level_are_dropped_with_their_continuation_lines():
    lines = NOISE + [ERROR, b"plain text from Python\n"]
    assert list(kept_lines(iter(lines), 2)) == [ERROR, b"plain text from Python\n"]
    assert list(kept_lines(iter(lines), 1)) == [NOISE[4], ERROR, b"plain text from Python\n"]
    assert list(kept_lines(iter(lines), 3)) == []


def test_python_warnings_and_tracebacks_right_after_a_dropped_record_are_kept():
    lines = [NOISE[1], b"/x/y.py:12: UserWarning: careful\n", b"  warnings.warn(\n", NOISE[2],
             b"Traceback (most recent call last):\n", ERROR,
             b"ERROR: TensorBoard could not bind to port 6006, it was already in use\n"]
    assert list(kept_lines(iter(lines), 3)) == [lines[1], lines[2], lines[4], lines[6]]


def _run(code: str, level: str) -> subprocess.CompletedProcess:
    return fresh_python(textwrap.dedent(code), level)


def test_the_filter_wraps_file_descriptor_2_and_restores_it_even_after_an_exception():
    done = _run("""
        import os, sys
        from hpo.native_logs import filtered_stderr
        try:
            with filtered_stderr():
                os.write(2, b"I0000 00:00:1.0 1 a.cc:1] info\\n")
                os.write(2, b"E0000 00:00:1.0 1 a.cc:2] error\\n")
                print("python line", file=sys.stderr)
                raise KeyError("boom")
        except KeyError:
            pass
        os.write(2, b"I0000 00:00:1.0 1 a.cc:3] after the block\\n")
    """, "2")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [b"E0000 00:00:1.0 1 a.cc:2] error", b"python line",
                                        b"I0000 00:00:1.0 1 a.cc:3] after the block"]


def test_importing_tensorflow_through_it_prints_no_info_records():
    # The process tests/e2e/test_xla_fusion_process.py reads too; this test reads its output up
    # to the end of the import.
    done, (out, err), _ = tensorflow_then_xla()
    assert done.returncode == 0, done.stderr
    assert out.strip() == b"3"
    assert not [line for line in err.splitlines() if line[:1] in (b"I", b"W") and line[1:5].isdigit()]
    assert b"absl::InitializeLog" not in err


def test_hpo_tensorboard_serves_without_importing_tensorflow(tmp_path):
    """`hpo tensorboard` runs TensorBoard in a process of its own that never imports
    TensorFlow: even under -v, which lets TensorFlow's own records through, none appears, and
    TensorBoard's "installation not found" notice is not printed either. (`hpo search` and
    `hpo best --export`, which do import it, are checked on tests/e2e/test_study_outputs.py's
    study; that file's dashboard tests read this same server.)"""
    from hpo.study import Study
    study = Study.create(tmp_path / "study", {"name": "empty"})
    study.tensorboard_dir.mkdir(parents=True)        # as a search's study has it, before its first trial
    study.close()
    import tensorboard
    for verbosity in ([], ["-v"]):
        done = user_cli(*verbosity, "tensorboard", str(tmp_path / "study"), "--version_tb", cwd=tmp_path)
        assert done.returncode == 0 and done.stdout.strip() == tensorboard.__version__, done.stderr[-3000:]
        assert not startup_lines(done), done.stderr[-3000:]
        assert "TensorFlow installation not found" not in done.stderr, done.stderr[-3000:]


def test_hpo_tensorboard_on_a_port_in_use_says_so_and_exits_1(tmp_path):
    """TensorBoard's own "ERROR: ..." line followed its ERROR record, and went with it."""
    import socket

    from hpo.study import Study
    study = Study.create(tmp_path / "study", {"name": "empty"})
    study.tensorboard_dir.mkdir(parents=True)
    study.close()
    with socket.socket() as taken:
        taken.bind(("localhost", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = user_cli("tensorboard", str(tmp_path / "study"), "--port", str(port), "--host", "localhost",
                        cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-3000:]
    assert f"could not bind to port {port}, it was already in use" in done.stderr
    assert "TensorBoard stopped with exit status" in done.stderr
