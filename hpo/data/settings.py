"""The experiment's `data` section, `DataConfig`: defined here, beside the loading that reads
it, so the data layer needs nothing from the experiment's layer above it; `hpo.config`
re-exports it with the other sections."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class DataConfig:
    dataset: str
    validation_split: float = 0.1
    test_split: float = 0.1
    limit: int | None = None          # cap on training examples, for quick runs
    options: Mapping[str, Any] = field(default_factory=dict)
