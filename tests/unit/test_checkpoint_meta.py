"""A progress checkpoint that cannot be read is not continued from, and the reason is said:
checkpoints are written atomically, so an unreadable one was damaged from outside."""

import json

import numpy as np

import hpo.training.checkpoint as checkpoint


def test_a_damaged_checkpoint_is_passed_over_saying_why_and_a_missing_one_silently(tmp_path, monkeypatch):
    said = []
    monkeypatch.setattr(checkpoint.log, "warning", lambda message, *args: said.append(message % args))
    good = tmp_path / "trial_0000.npz"
    np.savez(good, meta=np.frombuffer(json.dumps({"epoch": 7}).encode(), dtype=np.uint8))
    assert checkpoint.checkpoint_epoch(good) == 7 and said == []
    damaged = tmp_path / "trial_0001.npz"
    damaged.write_bytes(good.read_bytes()[:40])
    assert checkpoint.checkpoint_meta(damaged) is None
    assert len(said) == 1 and str(damaged) in said[0] and "not continuing from it" in said[0]
    assert checkpoint.checkpoint_meta(tmp_path / "trial_0002.npz") is None and len(said) == 1
