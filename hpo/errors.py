"""Error types that decide how the CLI exits.

`UserInputError` means the user can fix it (exit code 2, one paragraph, no traceback).
Everything else is a bug or an environment failure and keeps its traceback in hpo.log.
`ConfigError` is also a `ValueError`, and `ConfigTypeError` a `TypeError`, for library callers.
"""

from __future__ import annotations

import difflib
import re
from typing import Iterable


class UserInputError(Exception):
    """Bad input: a config file, a key, a value, a path. Exit code 2."""


class NotOffered(ImportError):
    """Keras Tuner API the face does not offer, named on `from ... import X` and on attribute
    access alike: an ImportError that is no AttributeError, which `from ... import` would
    replace with its own bare message."""


class ConfigError(UserInputError, ValueError):
    """A problem at one key of one file, with what was expected. A ValueError, so that
    library callers (`hpo.optimize`) catch it as they catch scikit-learn's and Optuna's."""

    def __init__(self, message: str, *, key: str | None = None, source: str | None = None,
                 line: int | None = None):
        self.message = message
        self.key = key
        self.source = source
        self.line = line
        super().__init__(self.__str__())

    def located(self, *, source: str | None = None, line: int | None = None,
                prefix: str | None = None) -> "ConfigError":
        """The same error with file, line or a parent key path filled in."""
        key = self.key
        if prefix:
            key = f"{prefix}.{key}" if key else prefix
        return type(self)(self.message, key=key, source=self.source or source,
                          line=self.line if self.line is not None else line)

    def __str__(self) -> str:
        where = self.source or "<config>"
        if self.line is not None:
            where += f", line {self.line}"
        if self.key:
            where += f", key '{self.key}'"
        return f"{where}: {self.message}"


class ConfigTypeError(ConfigError, TypeError):
    """A value of the wrong type (a string where a number is expected): also a TypeError."""


class TrialFailed(Exception):
    """A trial could not produce a result (NaN loss, bad config); the search goes on."""


# What TensorFlow and Keras wrap an error's own words in: the op's internal name
# ('{{function_node ...}}'), Keras's 'Exception encountered when calling Sequential.call().'
# line before the layer's message, and the terminal's bold around that message.
_WRAPPING = re.compile(r"^\{\{function_node [^}]*\}\}\s*|\x1b\[[0-9;]*m")
_KERAS_CALL_LINE = re.compile(r"^Exception encountered when calling .*\(\)\.?$")


def error_line(exc: BaseException, limit: int = 300) -> str:
    """The line of an exception that says what went wrong, for a one-line message: its first
    line, past what TensorFlow and Keras wrap it in; the exception's type where it says nothing."""
    text = getattr(exc, "message", None)
    text = text if isinstance(text, str) and text.strip() else str(exc)
    lines = [line.strip() for line in _WRAPPING.sub("", text.strip()).splitlines() if line.strip()]
    lines = [line for line in lines if not _KERAS_CALL_LINE.match(line)] or lines
    return lines[0][:limit] if lines else type(exc).__name__


def did_you_mean(word: str, options: Iterable[str]) -> str:
    """' (did you mean 'x'?)' when a close option exists, else ''."""
    match = closest(word, options)
    return f" (did you mean '{match}'?)" if match is not None else ""


def closest(word: str, options: Iterable[str]) -> str | None:
    """The option `word` most likely meant: the same letters in another order ('lgo': 'log',
    where difflib's ratio prefers 'low'), else the only option it begins ('opt': 'optimizer',
    too short a part of it for difflib), else difflib's closest; None when none is close."""
    word, options = str(word), [str(o) for o in options]
    same_letters = [o for o in options if o != word and sorted(o.lower()) == sorted(word.lower())]
    if same_letters:
        return same_letters[0]
    begun = [o for o in options if len(word) >= 2 and o.lower().startswith(word.lower()) and o != word]
    if len(begun) == 1:
        return begun[0]
    matches = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return matches[0] if matches else None


def one_of(options: Iterable[str]) -> str:
    return ", ".join(f"'{o}'" for o in options)
