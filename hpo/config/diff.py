"""What differs between the experiment a study stored and the one given now, and which of
those differences would change what the study's finished trials mean."""

from __future__ import annotations

from typing import Any, Mapping

from hpo import metric_names

# Keys that may change when a study resumes: they are honoured, not ignored, and they do
# not change what a finished trial means.
RESUMABLE_CHANGES = ("name", "search.max_trials", "search.time_limit", "search.total_budget",
                     "search.max_consecutive_failures", "training.checkpoint_every", "training.checkpoint_seconds",
                     "training.fuse", "training.compile", "training.steps_per_call", "execution", "output")

# Keys that may change when the searcher built with the new values replays every ask the study
# recorded (`hpo.study.resume.replay` refuses it otherwise): a searcher option named to the
# value a study ran with, where the default changed between versions.
REPLAYED_CHANGES = ("search.options",)


def diff_experiments(stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Lines like `search.eta: 3 -> 4` for every key whose value differs."""
    flat_a, flat_b = _flatten(stored), _flatten(current)
    lines = []
    for key in sorted(set(flat_a) | set(flat_b)):
        a, b = flat_a.get(key, "<absent>"), flat_b.get(key, "<absent>")
        # An empty mapping flattens to itself and a full one to its keys: `{}` against
        # nothing says no more than the lines of the keys themselves.
        empty_against_nothing = (a == {} and b == "<absent>") or (a == "<absent>" and b == {})
        if a != b and not empty_against_nothing:
            lines.append(f"{key}: {a!r} -> {b!r}")
    return lines


def binding_differences(stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Differences that would change the meaning of finished trials. A key added to hpo after
    the study was made reads as its default, which is what the study's trials ran with."""
    return [line for line in diff_experiments(with_added_keys(stored), current)
            if not _under(line, RESUMABLE_CHANGES + REPLAYED_CHANGES)]


def replayed_differences(stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """The differences in keys the replay judges (`REPLAYED_CHANGES`: the searcher's options)."""
    return [line for line in diff_experiments(with_added_keys(stored), current) if _under(line, REPLAYED_CHANGES)]


def _under(line: str, prefixes: tuple[str, ...]) -> bool:
    """Whether a `diff_experiments` line is of a key at or below one of `prefixes`."""
    return any(line.startswith(prefix + ".") or line.startswith(prefix + ":") for prefix in prefixes)


# Keys a study may lack (hpo did not have them when it was made), with the value its trials ran with.
_ADDED_KEYS = {("training", "loss"): metric_names.DEFAULT_LOSS,
               ("training", "metrics"): list(metric_names.DEFAULT_METRICS),
               ("training", "engine"): "auto", ("training", "callbacks"): [], ("training", "early_stopping"): None,
               ("training", "latency_batch"): 1, ("training", "keep_best_epoch"): False,
               ("search", "objectives"): [], ("search", "constraints"): [], ("search", "total_budget"): None}


# How `hpo.optimize` studies recorded having no dataset before `data` could be left out.
_NO_DATASET = "hpo.objective.optimization:no_dataset"


def with_added_keys(stored: Mapping[str, Any]) -> Mapping[str, Any]:
    """`stored` with each key of `_ADDED_KEYS` it lacks, at the value its trials ran with."""
    if not isinstance(stored, Mapping):
        return stored
    out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in stored.items()}
    if isinstance(out.get("data"), dict) and out["data"].get("dataset") == _NO_DATASET:
        out["data"] = None
    for (section, name), value in _ADDED_KEYS.items():
        if isinstance(out.get(section), dict):
            out[section].setdefault(name, value)
    return out


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}
