"""The dominated hypervolume of a set of points (every objective a loss), exact: a sweep for
two objectives, slicing along the first objective for more (Hypervolume by Slicing
Objectives, fine for the fronts of a study: tens of points). Points that do not dominate
the reference point add nothing.

`normalised_hypervolume` scales each objective to [0, 1] between fixed `low` and `high`
bounds first, so that objectives of different sizes (accuracy, parameters) weigh alike;
the reference point is then 1.1 in every objective, so a point at the worst end still counts.
"""

from __future__ import annotations

import numpy as np

from hpo.search.multiobjective.pareto import pareto_mask

NORMALISED_REFERENCE = 1.1


def hypervolume(points, reference) -> float:
    points = np.asarray(points, dtype=float).reshape(-1, len(reference))
    reference = np.asarray(reference, dtype=float)
    points = points[np.all(points < reference, axis=1)]
    if len(points) == 0:
        return 0.0
    points = points[pareto_mask(points)]
    return _volume(points, reference)


def _volume(points: np.ndarray, reference: np.ndarray) -> float:
    m = points.shape[1]
    if m == 1:
        return float(reference[0] - points[:, 0].min())
    if m == 2:
        order = np.argsort(points[:, 0], kind="stable")
        total, ceiling = 0.0, reference[1]
        for x, y in points[order]:
            if y < ceiling:
                total += (reference[0] - x) * (ceiling - y)
                ceiling = y
        return float(total)
    # Slices along the first objective: between consecutive values, the points at or before
    # the slice dominate an (m-1)-dimensional volume.
    order = np.argsort(points[:, 0], kind="stable")
    points = points[order]
    bounds = np.append(points[:, 0], reference[0])
    total = 0.0
    for i in range(len(points)):
        width = bounds[i + 1] - bounds[i]
        if width > 0:
            rest = points[:i + 1, 1:]
            total += width * _volume(rest[pareto_mask(rest)], reference[1:])
    return float(total)


def normalised_hypervolume(points, low, high) -> float:
    """Hypervolume after scaling each objective from [low, high] to [0, 1], against 1.1."""
    points = np.asarray(points, dtype=float)
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    span = np.where(high > low, high - low, 1.0)
    return hypervolume((points - low) / span, np.full(len(low), NORMALISED_REFERENCE))
