"""docs/ARCHITECTURE.md's key table is the contract users read: it must match the code."""

import dataclasses
import re
from pathlib import Path

import pytest

from hpo import config

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = {"data": config.DataConfig, "model": config.ModelConfig, "search": config.SearchConfig,
            "training": config.TrainingConfig, "execution": config.ExecutionConfig, "output": config.OutputConfig}


def key_table() -> dict[str, tuple[str, str]]:
    """`section.field` -> (default cell, meaning cell), from the Experiment keys table."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    table = text[text.index("### Experiment keys"):]
    rows = {}
    for line in table.splitlines():
        match = re.match(r"^\| `([a-z_]+\.[a-z_<>]+)` \| ([^|]*) \| (.*) \|$", line)
        if match:
            rows[match.group(1)] = (match.group(2).strip(), match.group(3).strip())
    return rows


def documented_default(cell: str):
    cell = cell.split(" (")[0].strip().strip("`")
    if cell == "none":
        return None
    if cell == "{}":
        return {}
    if cell in ("true", "false"):
        return cell == "true"
    if cell.startswith("[") and cell.endswith("]"):
        return tuple(item.strip() for item in cell[1:-1].split(",") if item.strip())
    try:
        return float(cell)
    except ValueError:
        return cell


def test_every_key_is_documented_with_the_dataclass_default():
    rows = key_table()
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            key = f"{section}.{f.name}"
            assert key in rows, f"{key} is missing from docs/ARCHITECTURE.md's key table"
            cell, _ = rows[key]
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                assert cell == "required", key
                continue
            if cell.startswith("inferred") or "(`inline`)" in cell:
                continue       # resolved from other keys when the experiment is read
            default = f.default_factory() if f.default is dataclasses.MISSING else f.default
            numeric = isinstance(default, (int, float)) and not isinstance(default, bool)
            expected = float(default) if numeric else default
            assert documented_default(cell) == expected, key


@pytest.mark.parametrize("key, registry", [
    ("search.algorithm", lambda: __import__("hpo.search", fromlist=["SEARCHERS"]).SEARCHERS),
    ("model.builder", lambda: __import__("hpo.models", fromlist=["BUILDERS"]).BUILDERS),
    ("data.dataset", lambda: __import__("hpo.data", fromlist=["LOADERS"]).LOADERS),
    ("training.compile", lambda: __import__("hpo.registry", fromlist=["x"]).COMPILE_MODES),
    ("training.engine", lambda: __import__("hpo.registry", fromlist=["x"]).ENGINES),
    ("training.optimizer", lambda: __import__("hpo.registry", fromlist=["x"]).OPTIMIZERS),
    ("execution.backend", lambda: __import__("hpo.registry", fromlist=["x"]).BACKENDS),
    ("search.objectives", lambda: __import__("hpo.registry", fromlist=["x"]).MODEL_MEASURES),
])
def test_the_documented_choices_are_the_registries(key, registry):
    _, meaning = key_table()[key]
    for name in registry():
        assert f"`{name}`" in meaning, (key, name)


def test_each_backend_defaults_to_the_algorithm_the_docs_name():
    from hpo.registry import BACKENDS
    _, meaning = key_table()["search.algorithm"]
    default_cell = key_table()["search.algorithm"][0]
    for backend, algorithm in BACKENDS.items():
        assert f"`{algorithm}`" in default_cell and backend in default_cell, (backend, algorithm, default_cell)


def test_the_documented_optimizer_keys_are_the_registrys():
    """The paragraph on the keys the built-in trainer reads names every optimizer and every
    key an optimizer consumes, and no other optimizer key."""
    from hpo.registry import OPTIMIZER_PARAMS, OPTIMIZERS

    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    paragraph = text[text.index("Config keys the built-in trainer and builders read"):].split("\n\n")[0]
    named = re.search(r"`optimizer` \(([^)]*)\)", paragraph)
    assert named and [n.strip() for n in named.group(1).split(",")] == list(OPTIMIZERS), paragraph
    keys = set(re.findall(r"`([a-z_0-9]+)`", paragraph))
    assert OPTIMIZER_PARAMS <= keys, sorted(OPTIMIZER_PARAMS - keys)
    trainer_keys = set(re.findall(r"`([a-z_0-9]+)`", paragraph[paragraph.index("`optimizer`"):]))
    assert trainer_keys == OPTIMIZER_PARAMS | {"batch_size"}, sorted(trainer_keys ^ (OPTIMIZER_PARAMS | {"batch_size"}))
