"""`hpo report STUDY_DIR`: one HTML page with the plots a search is judged by.

Written to `<study>/report/report.html`, with its PNGs beside it, in this order:
- with several objectives: the Pareto front and the dominated hypervolume against epochs
  spent (hpo.cli.report_pareto);
- best-so-far objective against the epochs spent, and against time (simulated time in a simulated search);
- the Hyperband diagram: which configuration went how far, bracket by bracket;
- parameter importance: a random forest fitted on the unit-cube configs, scored by
  permutation importance (impurity importance favours many-valued parameters), with a
  warning when it rests on few configurations, on a seeded sample of
  IMPORTANCE_MAX_CONFIGURATIONS when there are more;
- parallel coordinates of every configuration at the furthest budget it reached, each
  axis labelled with the parameter's values, coloured by the objective;
- the table of the best configurations, ranked as `hpo best` ranks.

It reads the study only; matplotlib and scikit-learn, no TensorFlow.
"""

from __future__ import annotations

import html
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hpo.cli.tables import state_counts
from hpo.search.multiobjective.hypervolume import NORMALISED_REFERENCE
from hpo.search.multiobjective.objectives import Goals
from hpo.space import ChoiceParam, FloatParam, IntParam, Param, SearchSpace
from hpo.study import Study, TrialRow, ranking
from hpo.study.pareto import stored_goals
from hpo.study.ranking import top_configurations, violation
from hpo.trial import TrialState, config_text

log = logging.getLogger("hpo.cli.report")

INACTIVE_UNIT = -0.25     # where an inactive conditional parameter sits on a [0, 1] axis
IMPORTANCE_MIN_CONFIGURATIONS = 8     # fewer: no importance at all
IMPORTANCE_FEW_CONFIGURATIONS = 30    # fewer: importance with a warning
IMPORTANCE_MAX_CONFIGURATIONS = 2000  # more: fitted on a sample of this many
BRACKETS_MAX_HEIGHT = 20              # inches: binds from 225 configurations; at 110 dpi a pixel a line at 2,000


def write_report(study_dir: str | Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")

    study = Study.open(study_dir, read_only=True)
    try:
        experiment = study.experiment()
        trials = study.trials()
    finally:
        study.close()
    out = Path(study_dir) / "report"
    out.mkdir(exist_ok=True)
    space = SearchSpace.from_dict(experiment["space"])
    objective, direction = experiment["search"]["objective"], experiment["search"]["direction"]
    goals = stored_goals(experiment)
    done = [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None]
    sections: list[Section] = []
    importance = None
    if done:
        # Top to bottom: how the search went, how far each configuration got, what mattered,
        # where the good configurations lie; the table of trials closes the page.
        began = min(t.started_at or t.created_at for t in trials)       # failed and interrupted ones too
        sections.append(Section("Best so far", _save(best_so_far_figure(done, objective, goals, began),
                                                     out / "best_so_far.png"), BEST_SO_FAR_NOTE))
        sections.append(Section("Hyperband: how far each configuration went",
                                _save(brackets_figure(trials), out / "brackets.png")))
        configurations = len(_furthest(done))
        importance = parameter_importance(done, space, direction)
        if importance is None:
            sections.append(Section("Parameter importance", None,
                                    f"Not computed: it needs at least {IMPORTANCE_MIN_CONFIGURATIONS} "
                                    f"configurations with a result, and this study has {configurations}."))
        else:
            note = None
            if configurations < IMPORTANCE_FEW_CONFIGURATIONS:
                note = importance_warning(configurations)
                log.warning("report: %s", note)
            sections.append(Section("Parameter importance",
                                    _save(importance_figure(importance, configurations), out / "importance.png"),
                                    note))
        sections.append(Section("Configurations at their furthest budget",
                                _save(parallel_coordinates_figure(done, space, objective),
                                      out / "parallel_coordinates.png")))
    sections = _pareto_sections(experiment, trials, out) + sections
    page = out / "report.html"
    page.write_text(_page(experiment, trials, objective, goals, sections, importance))
    return page


@dataclass(frozen=True)
class Section:
    title: str
    image: str | None            # a PNG beside the page
    note: str | None = None      # a warning or an explanation shown above the image


def _pareto_sections(experiment, trials: list[TrialRow], out: Path) -> list["Section"]:
    """A study with several objectives opens with its Pareto front and its hypervolume."""
    from hpo.cli.report_pareto import front_figure, hypervolume_figure
    from hpo.study.pareto import is_ranked, pareto_set

    if not is_ranked(experiment):
        return []
    goals = stored_goals(experiment)
    front = pareto_set(trials, goals)
    if not goals.multi or not front:
        return []
    if not any(m.feasible for m in front):
        # No trial meets the constraints: the front shown is the least violating, and a
        # hypervolume (of feasible trials) has nothing to measure.
        return [Section("Pareto front", _save(front_figure(trials, goals), out / "pareto_front.png"),
                        "No trial meets the constraints: the members shown (red, labelled with their trial ids, 20 "
                        "spread over a larger front) "
                        "are the least violating at the largest budget reached, as hpo best lists them; there "
                        "is no dominated hypervolume until a trial is feasible.")]
    return [Section("Pareto front", _save(front_figure(trials, goals), out / "pareto_front.png"),
                    "Front members (red, labelled with their trial ids, 20 spread over a larger front) are the "
                    "feasible trials no other "
                    "dominates, at the largest budget reached: as hpo best lists them."),
            Section("Dominated hypervolume", _save(hypervolume_figure(trials, goals), out / "hypervolume.png"),
                    f"Of the front at the largest budget reached so far, against the epochs spent; each objective "
                    f"scaled between its best and worst feasible value in the study, reference point "
                    f"{NORMALISED_REFERENCE} in each.")]


def importance_warning(configurations: int) -> str:
    return (f"Importance is fitted on only {configurations} configurations: treat the ranking as a rough "
            f"guide (below {IMPORTANCE_FEW_CONFIGURATIONS}, a random forest's permutation importance "
            f"changes a lot with the trials that happen to be in the study).")


def _save(fig, path: Path) -> str:
    import warnings

    import matplotlib.pyplot as plt
    with warnings.catch_warnings():
        # A config value in a script the font lacks (CJK, emoji) draws as a box: one warning per
        # character on the console says no more than the picture does.
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
        fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


# --- the plots ------------------------------------------------------------------------------

# The curve follows the ranking's rule, which a reader would not guess from a curve alone.
BEST_SO_FAR_NOTE = ("The best so far is the trial hpo best would have named then: the best at the largest budget "
                    "any trial had reached. The curve can therefore get worse when the first trial reaches a "
                    "larger budget, as a value at a larger budget is the one to trust.")


def best_so_far_figure(done: list[TrialRow], objective: str, goals: Goals, began: float | None = None):
    """The best value so far, by epochs spent and by time since `began` (the search's first
    trial started, whatever became of it; default: the first of `done`): the value of the trial `hpo best`
    would have named then (hpo.study.ranking: the largest budget reached first, then the
    objective), so the curve ends at `hpo best`'s value; with constraints, while that trial
    is feasible (an infeasible one ranks after every feasible one)."""
    import matplotlib.pyplot as plt

    ordered = sorted(done, key=lambda t: t.finished_at or 0)
    epochs, seconds, best = [], [], []
    spent, start = 0.0, began if began is not None else min(t.started_at or t.created_at for t in ordered)
    leader = None
    for t in ordered:
        spent += t.epochs_trained
        epochs.append(spent)
        seconds.append((t.finished_at or start) - start)
        leader = ranking.best([t] if leader is None else [leader, t], goals)
        best.append(leader.value if leader is not None and violation(leader, goals) == 0 else math.nan)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    # Thousands of trials would bury the curve: the dots shrink and fade as they grow in number,
    # and the curve is drawn over them.
    size, alpha = _dot_style(len(ordered))
    for ax, x, label in ((axes[0], epochs, "epochs trained (all trials)"),
                         (axes[1], seconds, "time since the search began (s)")):
        ax.step(x, best, where="post", color="C3", lw=2, zorder=3, label="best so far")
        points = ax.scatter(x, [t.value for t in ordered], c=[t.budget for t in ordered], cmap="viridis",
                            norm=_budget_norm(ordered), s=size, alpha=alpha, zorder=2, label="a trial")
        ax.set_xlabel(label)
        ax.set_ylabel(objective)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="best", fontsize=8)
    bar = fig.colorbar(points, ax=axes, label="trial's budget", pad=0.02)
    _plain_ticks(bar.ax.yaxis, sorted({t.budget for t in ordered}))
    return fig


def _dot_style(points: int) -> tuple[float, float]:
    """(marker size, alpha) of a scatter of `points` dots: 14 and 0.7 up to 500, then smaller
    and fainter with the square root of the count, down to 2 and 0.25."""
    shrink = math.sqrt(min(1.0, 500 / max(points, 1)))
    return max(2.0, 14 * shrink), max(0.25, 0.7 * shrink)


def _budget_norm(trials: list[TrialRow]):
    from matplotlib.colors import LogNorm, Normalize
    low, high = min(t.budget for t in trials), max(t.budget for t in trials)
    return LogNorm(low, high) if low > 0 and high > low else Normalize(low, high if high > low else low + 1)


def _plain_ticks(axis, values: list[float]) -> None:
    """Ticks at `values`, written as plain numbers (a log axis otherwise reads `2x10^0`)."""
    from matplotlib.ticker import FixedLocator, NullLocator
    axis.set_major_locator(FixedLocator(values))
    axis.set_major_formatter(lambda value, _: f"{value:g}")
    axis.set_minor_locator(NullLocator())


def _furthest(done: list[TrialRow]) -> list[TrialRow]:
    """One row per configuration lineage: the trial at its largest budget."""
    best: dict[int, TrialRow] = {}
    for t in done:
        if t.lineage not in best or t.budget > best[t.lineage].budget:
            best[t.lineage] = t
    return list(best.values())


def _unit_matrix(rows: list[TrialRow], space: SearchSpace) -> np.ndarray:
    matrix = np.array([space.to_unit(t.config) for t in rows], dtype=float)
    return np.where(np.isnan(matrix), INACTIVE_UNIT, matrix)


def axis_ticks(param: Param) -> list[tuple[float, str]]:
    """(position on the [0, 1] axis, label) for a parallel-coordinates axis: every category
    of a choice, every integer of a short range, else the two ends and the middle."""
    if isinstance(param, ChoiceParam):
        ticks = [(param.to_unit(v), str(v)) for v in param.values]
    elif isinstance(param, IntParam) and param.high - param.low <= 6:
        ticks = [(param.to_unit(v), str(v)) for v in range(param.low, param.high + 1)]
    elif isinstance(param, (IntParam, FloatParam)):
        ticks = [(u, f"{param.from_unit(u):.3g}") for u in (0.0, 0.5, 1.0)]
    else:  # pragma: no cover - every Param kind is listed above
        raise TypeError(param)
    if param.when:
        ticks.append((INACTIVE_UNIT, "inactive"))
    return ticks


def parallel_coordinates_figure(done: list[TrialRow], space: SearchSpace, objective: str):
    import matplotlib.pyplot as plt
    from matplotlib.cm import ScalarMappable
    from matplotlib.collections import LineCollection
    from matplotlib.colors import Normalize

    rows = _furthest(done)
    matrix = _unit_matrix(rows, space)
    values = np.array([t.value for t in rows])
    low, high = float(values.min()), float(values.max())
    span = high - low or 1.0
    data = np.column_stack([matrix, (values - low) / span])
    names = space.names + [objective]
    fig, ax = plt.subplots(figsize=(max(7, 1.5 * len(names) + 1.5), 4.8), layout="constrained")
    norm = Normalize(low, high if high > low else low + 1)
    deepest = max(t.budget for t in rows)
    # The furthest-trained configurations last, so they are drawn on top; the others paler.
    # One collection, not a line each: a long search has thousands of configurations.
    drawn = sorted(zip(data, rows), key=lambda item: item[1].budget)
    colours = plt.cm.viridis(norm([t.value for _, t in drawn]))
    colours[:, 3] = [0.85 if t.budget == deepest else 0.35 for _, t in drawn]
    ax.add_collection(LineCollection([np.column_stack([np.arange(len(names)), row]) for row, _ in drawn],
                                     colors=colours, linewidths=[1.2 if t.budget == deepest else 0.8
                                                                 for _, t in drawn]))
    for i, param in enumerate(space):
        _axis(ax, i, axis_ticks(param))
    objective_ticks = [(u, f"{low + u * span:.4g}") for u in (0.0, 0.5, 1.0)] if high > low else [(0.0, f"{low:.4g}")]
    _axis(ax, len(names) - 1, objective_ticks)
    ax.set_xticks(range(len(names)), names, rotation=15)
    ax.set_yticks([])
    ax.set_xlim(-0.2, len(names) - 0.4)
    ax.set_ylim(INACTIVE_UNIT - 0.1 if any(p.when for p in space) else -0.06, 1.06)
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.set_title(f"{len(rows)} configurations at their furthest budget (the deepest, {deepest:g}, drawn bold)",
                 fontsize=9)
    fig.colorbar(ScalarMappable(norm=norm, cmap="viridis"), ax=ax, label=objective, pad=0.01)
    return fig


def _axis(ax, x: float, ticks: list[tuple[float, str]]) -> None:
    """A vertical axis at `x` with its own labelled ticks."""
    ax.axvline(x, color="0.3", lw=0.8, zorder=0)
    for y, label in ticks:
        ax.plot([x - 0.03, x], [y, y], color="0.3", lw=0.8)
        ax.text(x + 0.04, y, label, fontsize=7, va="center", ha="left",
                bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.7})


def parameter_importance(done: list[TrialRow], space: SearchSpace, direction: str) -> dict[str, float] | None:
    """Permutation importance of each parameter for the objective, on the configurations'
    furthest results with the budget as an extra feature; None with too few configurations."""
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.inspection import permutation_importance

    rows = _furthest(done)
    if len(rows) < IMPORTANCE_MIN_CONFIGURATIONS or len(space) == 0:
        return None
    if len(rows) > IMPORTANCE_MAX_CONFIGURATIONS:
        # A seeded sample: the forest and its permutations grow with the rows, the shares barely (on a
        # 10,000-trial study's 6,719 configurations, 2,000 of them gave each share to within 0.001).
        keep = np.random.default_rng(0).choice(len(rows), IMPORTANCE_MAX_CONFIGURATIONS, replace=False)
        rows = [rows[i] for i in sorted(keep)]
    x = np.column_stack([_unit_matrix(rows, space), np.log([t.budget for t in rows])])
    y = np.array([t.value for t in rows]) * (-1 if direction == "maximize" else 1)
    forest = RandomForestRegressor(n_estimators=200, min_samples_leaf=2, random_state=0).fit(x, y)
    scores = permutation_importance(forest, x, y, n_repeats=10, random_state=0).importances_mean
    params = np.clip(scores[: len(space)], 0, None)
    total = params.sum() or 1.0
    return dict(sorted(zip(space.names, params / total), key=lambda kv: -kv[1]))


def importance_figure(importance: dict[str, float], configurations: int):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 0.4 * len(importance) + 1.3))
    names = list(importance)[::-1]
    ax.barh(names, [importance[n] for n in names], color="C1")
    ax.set_xlabel("share of permutation importance")
    few = configurations < IMPORTANCE_FEW_CONFIGURATIONS
    fitted = (f"{IMPORTANCE_MAX_CONFIGURATIONS:,} of {configurations:,}"
              if configurations > IMPORTANCE_MAX_CONFIGURATIONS else f"{configurations}")
    ax.set_title(f"fitted on {fitted} configurations" + ("; few: a rough guide" if few else ""),
                 fontsize=9, color="C3" if few else "black")
    fig.tight_layout()
    return fig


def brackets_figure(trials: list[TrialRow]):
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    lineages: dict[int, list[TrialRow]] = {}
    for t in trials:
        lineages.setdefault(t.lineage, []).append(t)
    order = sorted(lineages, key=lambda n: (-(lineages[n][0].bracket or 0), n))
    fig, ax = plt.subplots(figsize=(8.5, min(BRACKETS_MAX_HEIGHT, max(3, 0.08 * len(order) + 2))))
    brackets: dict[int | None, str] = {}
    # Collections, not an artist per configuration: a long search has thousands.
    segments, colours, failures = [], [], []
    for y, lineage in enumerate(order):
        steps = sorted(lineages[lineage], key=lambda t: t.budget)
        bracket = steps[0].bracket
        segments.append([(t.budget, y) for t in steps])
        colours.append(brackets.setdefault(bracket, f"C{(bracket or 0) % 10}"))
        failures += [(t.budget, y) for t in steps if t.state == TrialState.FAILED]
    ax.set_xscale("log")
    ax.add_collection(LineCollection(segments, colors=colours, linewidths=1.5))
    # The steps as dots, each in its configuration's colour.
    ax.scatter(*zip(*(point for segment in segments for point in segment)),
               c=[colour for segment, colour in zip(segments, colours) for _ in segment], s=6, zorder=2)
    if failures:
        ax.scatter(*zip(*failures), marker="x", color="red", s=25, zorder=3)
    _plain_ticks(ax.xaxis, sorted({t.budget for t in trials}))
    ax.set_xlabel("budget reached (log scale)")
    ax.set_ylabel("configuration (grouped by bracket)")
    ax.set_yticks([])
    handles = [Line2D([], [], color=colour, marker="o", ms=3, lw=1.5,
                      label="no bracket" if bracket is None else f"bracket {bracket}")
               for bracket, colour in sorted(brackets.items(), key=lambda kv: -1 if kv[0] is None else kv[0])]
    if failures:
        handles.append(Line2D([], [], color="red", marker="x", lw=0, label="failed"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title="bracket",
              title_fontsize=8, frameon=False)
    ax.set_title("one line per configuration, from its first budget to the furthest it reached", fontsize=9)
    fig.tight_layout()
    return fig


# --- the page -------------------------------------------------------------------------------

def _page(experiment, trials, objective, goals: Goals, sections, importance) -> str:
    esc = html.escape
    direction = goals.objectives[0].direction
    top = top_configurations(trials, goals, 10)
    order = "feasible first, then budget" if goals.constraints else "budget first"
    parts = [f"<h1>{esc(experiment['name'])}: {esc(experiment['search']['algorithm'])}</h1>",
             f"<p>objective <b>{esc(objective)}</b> ({direction}); trials: {esc(state_counts(trials))}</p>"]
    if not top:
        parts.append("<p>No trial has completed yet.</p>")
    for section in sections:
        parts.append(f"<h2>{esc(section.title)}</h2>")
        if section.note:
            parts.append(f"<p class='note'>{esc(section.note)}</p>")
        if section.image:
            parts.append(f"<img src='{esc(section.image)}' alt='{esc(section.title)}'>")
        if section.title == "Parameter importance" and importance:
            parts.append("<table><tr><th>parameter</th><th>importance</th></tr>" + "".join(
                f"<tr><td>{esc(k)}</td><td>{v:.3f}</td></tr>" for k, v in importance.items()) + "</table>")
    if top:
        rows = "".join(f"<tr><td>{t.trial_id}</td><td>{t.budget:g}</td><td>{t.value:.4f}</td>"
                       f"<td>{esc(config_text(t.config))}</td></tr>" for t in top)
        parts.append(f"<h2>Top configurations</h2><p>Each configuration once, at the furthest budget it "
                     f"reached, ranked as <code>hpo best</code> ranks ({order}, then {esc(objective)})."
                     f"</p><table><tr><th>trial</th><th>budget</th><th>{esc(objective)}</th><th>config</th></tr>"
                     f"{rows}</table>")
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto}img{max-width:100%}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}"
             ".note{background:#fff4e5;border-left:4px solid #f0a030;padding:6px 10px}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(experiment['name'])} report</title>"
            f"<style>{style}</style></head><body>{''.join(parts)}</body></html>\n")
