"""The CLI's tables of trials: `hpo status`, the summary after `hpo search`, `status --trial N`.

Tables fit the terminal: numbers never wrap or lose digits; the config column wraps, and
where fewer than `MIN_CONFIG_WIDTH` columns (or its longest config's, if fewer) are left for
it, even without the optional columns (status's bracket and rung), it moves to
`status --trial N`.
Rankings are `hpo.study.ranking`'s.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Sequence

from hpo.search.multiobjective.objectives import Goals
from hpo.study import TrialRow
from hpo.study.pareto import pareto_set, trial_goals
from hpo.study.ranking import top_configurations
from hpo.study.tensorboard_logs import run_name
from hpo.trial import TrialState, config_text

MIN_CONFIG_WIDTH = 30      # narrower than this, a wrapped config is a column of fragments


def state_counts(trials: list) -> str:
    """`9,990 complete, 10 failed`, in the states' own order."""
    counts = Counter(t.state for t in trials)
    return ", ".join(f"{counts[state]:,} {state.value}" for state in TrialState if counts[state])


def _value(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _dash(value: Any) -> str:
    return "-" if value is None else str(value)


def _table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[str]], width: int,
           config_header: str, optional: Sequence[int] = ()):
    """A rich Table of `columns` (all kept whole) plus a wrapping config column when it gets
    at least MIN_CONFIG_WIDTH characters of `width`; returns (table, whether config is shown).
    Where the config column would not fit, the `optional` columns (their indices) are left
    out to make room for it, and so where the columns alone are wider than `width`; where they
    still are, the table keeps its own width and the terminal wraps its lines (rich would
    otherwise cut words and digits)."""
    from rich import box
    from rich.cells import cell_len
    from rich.console import Console
    from rich.measure import Measurement
    from rich.table import Table

    def build(with_config: bool, body: Sequence[Sequence[str]]) -> Table:
        table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left", show_edge=False, pad_edge=False)
        for i, name in enumerate(columns):
            table.add_column(name, no_wrap=True, justify="left" if i < 2 else "right")
        if with_config:
            table.add_column(config_header, overflow="fold", ratio=1)
        for row in body:
            table.add_row(*row[:len(columns)], *(row[len(columns):] if with_config else ()))
        return table

    measure = Console(width=10_000, markup=False, emoji=False)     # as `stdout` reads the cells

    def needed_width() -> int:
        # Every column but the config keeps its cells whole, so the table is as wide as one
        # row of each column's widest cell: measuring that row, not every row, keeps `status
        # --all` on 10,000 trials from measuring them all twice before printing them.
        def line_width(text: str) -> int:
            return max(map(cell_len, text.splitlines() or [""]))
        widest = [max((row[i] for row in rows), key=line_width, default="") for i in range(len(columns))]
        return Measurement.get(measure, measure.options, build(False, [widest])).maximum

    needed = needed_width()
    # A config column narrower than MIN_CONFIG_WIDTH is a column of fragments, unless no config is wider.
    longest = max((len(text) for row in rows for text in row[len(columns):]), default=0)
    wanted = max(min(MIN_CONFIG_WIDTH, longest), len(config_header))
    if optional and width - needed - 3 < wanted:     # 3: the gap and the config column's padding
        kept = [i for i in range(len(columns)) if i not in optional]
        kept += range(len(columns), max(map(len, rows), default=0))     # the config / error text
        columns = [columns[i] for i in kept if i < len(columns)]
        rows = [[row[i] for i in kept] for row in rows]
        needed = needed_width()
    if width - needed - 3 < wanted:
        plain = build(False, rows)
        if needed > width:
            plain.width = needed
        return plain, False
    return build(True, rows), True


def top_table(trials: Iterable[TrialRow], objective: str, goals: Goals, width: int, limit: int = 5):
    """The summary after a search: the best configurations, each once."""
    top = top_configurations(trials, goals, limit)
    if not top:
        return None
    # With constraints the order is feasible first: the column says which are, or an
    # infeasible trial above a better value would read as a wrong order.
    feasible = ([_yes_no(trial_goals(t, goals)[1])] for t in top) if goals.constraints else ([] for _ in top)
    rows = [(str(t.trial_id), f"{t.budget:g}", _value(t.value), *extra, config_text(t.config))
            for t, extra in zip(top, feasible)]
    feasible_first = ", feasible first" if goals.constraints else ""
    columns = ("trial", "budget", objective) + (("feasible",) if goals.constraints else ())
    table, _ = _table(f"top configurations by {objective} ({goals.objectives[0].direction}){feasible_first}, "
                      f"at their deepest budget", columns, rows, width, "config")
    return table


def _yes_no(feasible: bool | None) -> str:
    return "-" if feasible is None else "yes" if feasible else "no"


# The states whose error says why the trial is where it is: ended, or waiting to be retried.
_STOPPED_BY_ERROR = (TrialState.FAILED, TrialState.INTERRUPTED, TrialState.PENDING)


def status_table(trials: Sequence[TrialRow], title: str, goals: Goals, width: int):
    """Every trial of `trials`, one row each; returns (table, whether the config column fits).
    With several objectives or a constraint, a column per objective (six digits, as the
    Pareto table's) and whether the trial was feasible."""
    goal_columns = ([f"{o.name} ({o.direction[:3]})" for o in goals.objectives] if goals.multi
                    else [goals.objectives[0].name]) + (["feasible"] if goals.constraints else [])
    rows = []
    for t in trials:
        # An error's first line; its traceback is in `status --trial N`. A running trial's error
        # is its previous attempt's, which no longer says what it is doing.
        detail = t.error.splitlines()[0] if t.error and t.state in _STOPPED_BY_ERROR else config_text(t.config)
        state = t.state.value if t.attempts <= 1 else f"{t.state.value} ({t.attempts}x)"
        if goals.ranked:
            values, feasible = trial_goals(t, goals)
            # A value the study stored as None (non-finite) or never got reads "-".
            if goals.multi:
                shown = ["-" if values.get(n) is None else f"{values[n]:.6g}" for n in goals.names]
            else:
                shown = [_value(t.value)]
            if goals.constraints:
                shown.append(_yes_no(feasible))
        else:
            shown = [_value(t.value)]
        rows.append((str(t.trial_id), state, f"{t.budget:g}", _dash(t.bracket), _dash(t.rung), *shown, detail or ""))
    return _table(title, ("trial", "state", "budget", "bracket", "rung", *goal_columns), rows, width,
                  "config / error", optional=(3, 4))


def trial_lines(trial: TrialRow, objective: str, of_function: bool = False) -> list[str]:
    """`hpo status DIR --trial N`: one trial in full, one fact a line. `of_function`: a study
    of `hpo.optimize`, whose budget is the function's, not epochs, and which logs no
    TensorBoard runs."""
    spent = (f"{trial.epochs_trained:g} of it charged here" if of_function
             else f"{trial.epochs_trained:g} epochs trained here")
    run = "" if of_function else f" (its TensorBoard run {run_name(trial.lineage)})"
    lines = [f"trial {trial.trial_id}: {trial.state.value}, {objective}={_value(trial.value)} "
             f"at budget {trial.budget:g} ({spent})",
             f"  configuration: lineage {trial.lineage}{run}"
             + (f", continues trial {trial.continues}" if trial.continues is not None else ""),
             f"  bracket {_dash(trial.bracket)}, rung {_dash(trial.rung)}, attempts {trial.attempts}"]
    if trial.duration is not None:
        lines.append(f"  duration {trial.duration:.1f}s")
    lines.append("  config:")
    lines += [f"    {k}: {v}" for k, v in trial.config.items()]
    if trial.metrics:
        lines.append("  metrics at its last epoch:")
        lines += [f"    {k}: {v:.6g}" if isinstance(v, float) else f"    {k}: {v}" for k, v in trial.metrics.items()]
    if trial.error:
        lines.append("  error of its previous attempt:" if trial.state in (TrialState.RUNNING, TrialState.PENDING)
                     else "  error:")
        lines += [f"    {line}" for line in trial.error.splitlines()]
    return lines


def _digits_apart(values: Sequence[float], least: int = 6, most: int = 15) -> int:
    """Significant digits that show `values` apart (at least `least`, as many as needed up
    to `most`): a front's members differ in some objective, and 1000.006 and 1000.014 both
    read 1000.01 at six, so that one member would look dominated."""
    distinct = len(set(values))
    for digits in range(least, most + 1):
        if len({f"{v:.{digits}g}" for v in values}) == distinct:
            return digits
    return most


def pareto_table(trials: Sequence[TrialRow], goals: Goals, title: str, width: int):
    """One row per front member: trial, budget, its objectives, feasibility, then its config
    (the config column wraps, or moves out where the terminal is too narrow)."""
    columns = ["trial", "budget", *(f"{o.name} ({o.direction[:3]})" for o in goals.objectives)]
    if goals.constraints:
        columns.append("feasible")
    rows = []
    front = pareto_set(trials, goals)
    digits = {n: _digits_apart([m.objectives[n] for m in front]) for n in goals.names}
    for m in front:
        row = [str(m.trial_id), f"{m.budget:g}", *(f"{m.objectives[n]:.{digits[n]}g}" for n in goals.names)]
        if goals.constraints:
            row.append("yes" if m.feasible else "no")
        rows.append([*row, config_text(m.config)])
    return _table(title, columns, rows, width, "config")
