"""`hpo report STUDY_DIR`: one HTML page with the plots a search is judged by.

Written to `<study>/report/report.html`, with its PNGs beside it:
- best-so-far objective against the epochs spent, and against wall time;
- parallel coordinates of every configuration at the furthest budget it reached;
- parameter importance: a random forest fitted on the unit-cube configs, scored by
  permutation importance (impurity importance favours many-valued parameters);
- the Hyperband diagram: which configuration went how far, bracket by bracket.

It reads the study only; matplotlib and scikit-learn, no TensorFlow.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import numpy as np

from hpo.space import SearchSpace
from hpo.study import Study, TrialRow
from hpo.trial import TrialState

INACTIVE_UNIT = -0.25     # where an inactive conditional parameter sits on a [0, 1] axis


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
    done = [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None]
    sections = []
    if done:
        sections.append(("Best so far", _best_so_far(done, objective, direction, out / "best_so_far.png")))
        sections.append(("Configurations at their furthest budget",
                         _parallel_coordinates(done, space, objective, out / "parallel_coordinates.png")))
        importance = _importance(done, space, direction)
        if importance is not None:
            sections.append(("Parameter importance", _importance_plot(importance, out / "importance.png")))
        sections.append(("Hyperband: how far each configuration went",
                         _brackets(trials, objective, out / "brackets.png")))
    page = out / "report.html"
    page.write_text(_page(experiment, trials, done, objective, direction, sections, importance if done else None))
    return page


# --- the plots ------------------------------------------------------------------------------

def _best_so_far(done: list[TrialRow], objective: str, direction: str, path: Path) -> str:
    import matplotlib.pyplot as plt

    ordered = sorted(done, key=lambda t: t.finished_at or 0)
    better = max if direction == "maximize" else min
    epochs, seconds, best = [], [], []
    spent, start = 0.0, min(t.started_at or t.created_at for t in ordered)
    for t in ordered:
        spent += t.epochs_trained
        epochs.append(spent)
        seconds.append((t.finished_at or start) - start)
        best.append(t.value if not best else better(best[-1], t.value))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, x, label in ((axes[0], epochs, "epochs trained (all trials)"), (axes[1], seconds, "wall time (s)")):
        ax.step(x, best, where="post", color="C0", label="best so far")
        ax.scatter(x, [t.value for t in ordered], c=[math.log(t.budget) for t in ordered], cmap="viridis",
                   s=14, alpha=0.7, label="trials (colour: budget)")
        ax.set_xlabel(label)
        ax.set_ylabel(objective)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


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


def _parallel_coordinates(done: list[TrialRow], space: SearchSpace, objective: str, path: Path) -> str:
    import matplotlib.pyplot as plt

    rows = _furthest(done)
    matrix = _unit_matrix(rows, space)
    values = np.array([t.value for t in rows])
    span = values.max() - values.min() or 1.0
    scaled_objective = (values - values.min()) / span
    data = np.column_stack([matrix, scaled_objective])
    names = space.names + [objective]
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(names)), 4.5))
    colours = plt.cm.viridis((values - values.min()) / span)
    for row, colour, t in sorted(zip(data, colours, rows), key=lambda item: item[2].budget):
        ax.plot(range(len(names)), row, color=colour, alpha=0.35 + 0.5 * (t.budget == rows[0].budget), lw=1)
    ax.set_xticks(range(len(names)), names, rotation=20)
    ax.set_yticks([INACTIVE_UNIT, 0, 1], ["inactive", "low", "high"])
    ax.set_title(f"{len(rows)} configurations; colour: {objective} ({values.min():.4g} to {values.max():.4g})",
                 fontsize=9)
    ax.grid(axis="x", alpha=0.4)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def _importance(done: list[TrialRow], space: SearchSpace, direction: str) -> dict[str, float] | None:
    """Permutation importance of each parameter for the objective, on the configurations'
    furthest results with the budget as an extra feature; None with too few trials."""
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.inspection import permutation_importance

    rows = _furthest(done)
    if len(rows) < 8 or len(space) == 0:
        return None
    x = np.column_stack([_unit_matrix(rows, space), np.log([t.budget for t in rows])])
    y = np.array([t.value for t in rows]) * (-1 if direction == "maximize" else 1)
    forest = RandomForestRegressor(n_estimators=200, min_samples_leaf=2, random_state=0).fit(x, y)
    scores = permutation_importance(forest, x, y, n_repeats=10, random_state=0).importances_mean
    params = np.clip(scores[: len(space)], 0, None)
    total = params.sum() or 1.0
    return dict(sorted(zip(space.names, params / total), key=lambda kv: -kv[1]))


def _importance_plot(importance: dict[str, float], path: Path) -> str:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 0.4 * len(importance) + 1))
    names = list(importance)[::-1]
    ax.barh(names, [importance[n] for n in names], color="C1")
    ax.set_xlabel("share of permutation importance")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def _brackets(trials: list[TrialRow], objective: str, path: Path) -> str:
    import matplotlib.pyplot as plt

    lineages: dict[int, list[TrialRow]] = {}
    for t in trials:
        lineages.setdefault(t.lineage, []).append(t)
    order = sorted(lineages, key=lambda n: (-(lineages[n][0].bracket or 0), n))
    fig, ax = plt.subplots(figsize=(8, max(3, 0.08 * len(order) + 2)))
    for y, lineage in enumerate(order):
        steps = sorted(lineages[lineage], key=lambda t: t.budget)
        bracket = steps[0].bracket or 0
        budgets = [0.0] + [t.budget for t in steps]
        ax.plot(budgets[1:], [y] * len(steps), color=f"C{bracket % 10}", lw=1.5, marker="o", ms=2.5)
        for t in steps:
            if t.state == TrialState.FAILED:
                ax.plot(t.budget, y, "x", color="red", ms=5)
    ax.set_xscale("log")
    ax.set_xlabel("budget reached (log scale)")
    ax.set_ylabel("configuration (grouped by bracket)")
    ax.set_yticks([])
    ax.set_title("one line per configuration; colour: bracket; red x: failed", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


# --- the page -------------------------------------------------------------------------------

def _page(experiment, trials, done, objective, direction, sections, importance) -> str:
    esc = html.escape
    counts: dict[str, int] = {}
    for t in trials:
        counts[t.state.value] = counts.get(t.state.value, 0) + 1
    sign = -1 if direction == "maximize" else 1
    top = sorted(_furthest(done), key=lambda t: (-t.budget, sign * t.value))[:10] if done else []
    rows = "".join(f"<tr><td>{t.trial_id}</td><td>{t.budget:g}</td><td>{t.value:.4f}</td>"
                   f"<td>{esc(_config_text(t.config))}</td></tr>" for t in top)
    parts = [f"<h1>{esc(experiment['name'])}: {esc(experiment['search']['algorithm'])}</h1>",
             f"<p>objective <b>{esc(objective)}</b> ({direction}); trials: "
             + ", ".join(f"{n} {esc(s)}" for s, n in sorted(counts.items())) + "</p>"]
    if top:
        parts.append(f"<h2>Top configurations</h2><table><tr><th>trial</th><th>budget</th>"
                     f"<th>{esc(objective)}</th><th>config</th></tr>{rows}</table>")
    else:
        parts.append("<p>No trial has completed yet.</p>")
    for title, image in sections:
        parts.append(f"<h2>{esc(title)}</h2><img src='{esc(image)}' alt='{esc(title)}'>")
    if importance:
        parts.append("<table><tr><th>parameter</th><th>importance</th></tr>" + "".join(
            f"<tr><td>{esc(k)}</td><td>{v:.3f}</td></tr>" for k, v in importance.items()) + "</table>")
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto}img{max-width:100%}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(experiment['name'])} report</title>"
            f"<style>{style}</style></head><body>{''.join(parts)}</body></html>\n")


def _config_text(config) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in config.items())
