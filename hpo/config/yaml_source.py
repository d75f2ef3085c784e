"""Experiment files: YAML read with YAML 1.2 floats and the line of every key, refused when it
holds duplicate keys, recursive aliases or alias bombs; `--set` overrides applied; the result
validated into an `Experiment` whose errors name the file and line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from hpo import references
from hpo.config.schema import Experiment
from hpo.config.validation import experiment_from_dict
from hpo.errors import ConfigError, UserInputError, did_you_mean, one_of

# An experiment is a few dozen values; aliases that expand past this are an alias bomb.
MAX_YAML_VALUES = 100_000
# PyYAML's scanner spends time quadratic in the depth of flow collections ([ ] and { }):
# 3,000 levels took it 4.5 s before its parser's recursion gave up. Counting brackets first
# refuses such a text at once; no experiment comes near this depth.
MAX_FLOW_DEPTH = 200
_SIGNIFICANT = re.compile(r"[\[\]{}#'\"\n]")
_QUOTED = {"'": re.compile(r"'(?:[^']|'')*'"), '"': re.compile(r'"(?:[^"\\]|\\.)*"', re.S)}


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 floats: PyYAML (YAML 1.1) reads `1e-3` as a string."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                |[-+]?\.(?:inf|Inf|INF)
                |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))


def parse_yaml(text: str) -> Any:
    """One YAML value (a `--set` value, a space read by a library caller), with the same
    checks as an experiment file: no duplicate keys, no recursive or exploding aliases."""
    return _construct(_compose(text))[0]


def _compose(text: str) -> tuple[_Loader, Any]:
    deep = _line_nested_too_deeply(text)
    if deep is not None:
        raise ConfigError(f"the YAML is nested too deeply: more than {MAX_FLOW_DEPTH} levels of [ ] or {{ }} "
                          f"at line {deep}")
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
    except RecursionError:
        loader.dispose()
        raise ConfigError("the YAML is nested too deeply") from None
    return loader, node


def _line_nested_too_deeply(text: str) -> int | None:
    """The line where [ ] and { } first nest past MAX_FLOW_DEPTH, or None. Brackets in quoted
    scalars and comments do not count; one inside a plain scalar (`a[1]`) does, which can only
    add the few a file holds. An unterminated quote ends the count (PyYAML reports it)."""
    depth, line, position = 0, 1, 0
    while True:
        found = _SIGNIFICANT.search(text, position)
        if found is None:
            return None
        at, char = found.start(), found.group()
        before = text[at - 1] if at else "\n"
        position = at + 1
        if char == "\n":
            line += 1
        elif char == "#" and before in " \t\n":
            end = text.find("\n", at)
            if end < 0:
                return None
            position = end
        elif char in "'\"" and before in " \t\n[{,:-":
            quoted = _QUOTED[char].match(text, at)
            if quoted is None:
                return None
            line += quoted.group().count("\n")
            position = quoted.end()
        elif char in "[{":
            depth += 1
            if depth > MAX_FLOW_DEPTH:
                return line
        elif char in "]}":
            depth = max(0, depth - 1)


def _construct(composed: tuple[_Loader, Any]) -> tuple[Any, dict[str, int]]:
    """Check the composed document, then build Python values; returns them and the line of
    every key path."""
    loader, node = composed
    try:
        if node is None:
            return None, {}
        lines: dict[str, int] = {}
        _check_node(node, "", {}, set(), lines)
        return loader.construct_document(node), lines
    except RecursionError:
        raise ConfigError("the YAML is nested too deeply") from None
    finally:
        loader.dispose()


def _check_node(node: Any, path: str, sizes: dict[int, int], visiting: set[int], lines: dict[str, int]) -> int:
    """Refuse duplicate keys, recursive aliases and alias bombs; count the values `node`
    expands to (each shared node counted once per use, computed once)."""
    ident = id(node)
    if ident in sizes:
        return sizes[ident]
    if ident in visiting:
        raise ConfigError(f"a recursive alias (an anchor used inside itself) at line {node.start_mark.line + 1}; "
                          f"expected plain values", key=path or None)
    visiting.add(ident)
    size = 1
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            size += _check_node(child, path, sizes, visiting, lines)
            _check_size(size, node)
    elif isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                size += _check_node(value_node, path, sizes, visiting, lines)
                continue
            name = str(key_node.value)
            child = f"{path}.{name}" if path else name
            line = key_node.start_mark.line + 1
            if isinstance(key_node, yaml.ScalarNode):
                if name in seen:
                    raise ConfigError(f"duplicate key '{name}' at lines {seen[name]} and {line}; YAML would keep "
                                      f"only the last one silently, so remove one", key=child, line=line)
                seen[name] = line
            lines.setdefault(child, line)
            size += 1 + _check_node(value_node, child, sizes, visiting, lines)
            _check_size(size, node)
    visiting.discard(ident)
    sizes[ident] = size
    return size


def _check_size(size: int, node: Any) -> None:
    if size > MAX_YAML_VALUES:
        raise ConfigError(f"the YAML expands to more than {MAX_YAML_VALUES:,} values through aliases "
                          f"(from line {node.start_mark.line + 1}); expected an experiment without alias bombs")


def read_text(path: Path) -> str:
    """The file as UTF-8 text; anything else is exit 2 with the offset of the first bad byte."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise UserInputError(f"{path}, line {line}: not UTF-8 text: byte offset {exc.start} is "
                             f"0x{data[exc.start]:02x}; save the file as UTF-8") from None
    return text.removeprefix("\ufeff")



def load_experiment(path: str | Path, overrides: Sequence[str] = ()) -> Experiment:
    """Read, check and validate an experiment file. Its folder goes on sys.path after the
    working folder, so that its `module:function` hooks import as `python -m hpo` finds them."""
    path = Path(path)
    if not path.exists():
        raise UserInputError(f"{path}: experiment file not found (expected a YAML file such as "
                             f"experiments/smoke.yaml)")
    if path.is_dir():
        raise UserInputError(f"{path}: is a folder; expected an experiment YAML file")
    try:
        text = read_text(path)
    except OSError as exc:
        raise UserInputError(f"{path}: cannot read the experiment file ({exc.strerror})") from None
    try:
        raw, lines = _construct(_compose(text))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise UserInputError(f"{path}{where}: YAML syntax error: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise UserInputError(f"{path}: not a readable YAML file: {exc}") from None
    except ConfigError as err:
        raise err.located(source=str(path)) from None
    references.add_search_path(path.resolve().parent)
    raw = {} if raw is None else raw
    raw = apply_overrides(raw, overrides)      # a malformed --set names itself, at no line of the file
    try:
        return experiment_from_dict(raw, source=str(path))
    except ConfigError as err:
        given = _override_of(err.key, overrides)
        if given is not None:       # the value came from --set, not from the file's line
            raise type(err)(err.message, key=err.key, source=f"{path} (--set {given})") from None
        raise err.located(source=str(path), line=_line_for(err.key, lines)) from None


def from_override(err: ConfigError, path: str | Path, overrides: Sequence[str]) -> ConfigError:
    """A later check's error (the pre-flight's) at a key a `--set` gave: named as that
    `--set`, not as the file, as the experiment's own checks name it."""
    given = _override_of(err.key, overrides)
    return err if given is None else type(err)(err.message, key=err.key, source=f"{path} (--set {given})")


def _override_of(key: str | None, overrides: Sequence[str]) -> str | None:
    """The last `--set KEY=VALUE` that set `key` (or a mapping holding it, or a key inside it)."""
    if not key:
        return None
    for item in reversed(overrides):
        given = item.partition("=")[0].strip()
        if key == given or key.startswith(given + ".") or given.startswith(key + "."):
            return item
    return None


def apply_overrides(raw: Any, overrides: Sequence[str]) -> dict[str, Any]:
    """Apply `--set key.path=value` strings; the value is parsed as YAML (so 5, 1e-3, [a, b])."""
    if not isinstance(raw, dict):
        return raw
    raw = _deep_copy(raw)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"expected key.path=value, got {item!r}", source="--set")
        key, _, text = item.partition("=")
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            raise ConfigError(f"empty key in {item!r}", source="--set")
        try:
            value = parse_yaml(text)
        except yaml.YAMLError:
            value = text
        except ConfigError as err:
            raise ConfigError(f"{err.message} (in the value of {item!r})", source="--set", key=key) from None
        space = raw.get("space")
        if len(parts) > 2 and parts[0] == "space" and isinstance(space, dict) and parts[1] not in space:
            # Setting one field would create a parameter with only that field, and the error
            # would then be about its missing 'type'; a whole new one is `--set space.NAME={...}`.
            raise ConfigError(f"the space has no parameter '{parts[1]}'{did_you_mean(parts[1], space)}; "
                              f"it has {one_of(space)}", source="--set", key=key)
        node = raw
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"cannot set inside '{'.'.join(parts[:i + 1])}', which is {child!r}",
                                  source="--set", key=key)
            node = child
        node[parts[-1]] = value
    return raw


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def _line_for(key: str | None, lines: Mapping[str, int]) -> int | None:
    while key:
        if key in lines:
            return lines[key]
        key = key.rpartition(".")[0]
    return None


