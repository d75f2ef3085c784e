"""How far a budget's ranking of configurations agrees with the ranking a larger budget gives.

Multi-fidelity search trusts that what wins at a small budget also wins at a large one. Where
it does not (a learning rate that wins after one epoch and loses after thirty, a branch of the
space that looks best early), every rung below the reversal misleads both the promotions and
the model. This module measures it from the results alone.

For a pair of budgets (lower, upper), every configuration evaluated at `upper` gets a predicted
rank at `lower`: its own rank there where it ran there (a promoted config), else the
inverse-distance-weighted mean rank of its K nearest neighbours among the configs evaluated at
`lower`. The agreement is Spearman's correlation between those predicted ranks and the losses
at `upper`. Using every config at `upper` (not only the promoted ones, which are the top of
`lower` and so agree with one another by selection) is what lets a fresh config from another
branch or another learning-rate region show that the lower budget's order is wrong.

Distances are taken in the unit cube. A choice counts 1 where the values differ; an inactive
(conditional) entry counts 0 against another inactive one and 1 against an active one.
"""

from __future__ import annotations

import numpy as np

K_NEIGHBOURS = 3
# The most recent configs used per budget: keeps ask() at a few ms with 1,000 results.
MAX_LOWER = 256
MAX_UPPER = 64


def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks from 0, ties sharing their mean rank (as scipy's rankdata, minus one, but cheaper)."""
    values, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    starts = np.cumsum(counts) - counts
    return (starts + (counts - 1) / 2.0)[inverse]


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho (average ranks for ties); 0 where either side is constant."""
    rx, ry = average_ranks(x), average_ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denominator = float(np.sqrt((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / denominator) if denominator > 0 else 0.0


def dim_conditional(j: int, conditional) -> bool:
    return bool(conditional[j]) if conditional is not None else False


def features(vectors: np.ndarray, dims, conditional=None) -> np.ndarray:
    """Rows whose squared Euclidean distances are the distances described above: a number
    as itself, a choice one-hot over its levels (scaled so two levels differ by 1), and per
    conditional dimension (`conditional[j]` true) an indicator of inactivity (an inactive
    entry's own columns are 0; against an active one it differs by at least 1). The width
    depends on the space only, so the rows of every budget line up."""
    columns = []
    for j, dim in enumerate(dims):
        column = vectors[:, j]
        inactive = np.isnan(column)
        if dim.kind == "u":
            onehot = np.zeros((len(column), len(dim.levels)))
            active = ~inactive
            if active.any():
                onehot[np.flatnonzero(active), dim.snap(column[active])] = np.sqrt(0.5)
            columns.append(onehot)
        else:
            columns.append(np.where(inactive, 0.0, column)[:, None])
        if dim_conditional(j, conditional):
            columns.append(inactive[:, None].astype(float))
    return np.hstack(columns) if columns else np.zeros((len(vectors), 0))


def predicted_ranks(lower_features: np.ndarray, lower_losses: np.ndarray, upper_features: np.ndarray) -> np.ndarray:
    """For each upper row, its rank (0 best, 1 worst) at the lower budget, own or neighbours'."""
    ranks = average_ranks(lower_losses) / max(1, len(lower_losses) - 1)
    squared = ((upper_features ** 2).sum(axis=1)[:, None] + (lower_features ** 2).sum(axis=1)[None, :]
               - 2.0 * upper_features @ lower_features.T)
    d = np.sqrt(np.maximum(squared, 0.0))
    k = min(K_NEIGHBOURS, len(lower_losses))
    nearest = np.argpartition(d, k - 1, axis=1)[:, :k]
    near_d = np.take_along_axis(d, nearest, axis=1)
    # A config that ran at the lower budget (distance 0, up to rounding) takes its own rank:
    # the weight 1/1e-6 swamps its neighbours'.
    weights = 1.0 / np.maximum(near_d, 1e-6)
    return (weights * ranks[nearest]).sum(axis=1) / weights.sum(axis=1)


def agreement(lower: tuple[np.ndarray, np.ndarray], upper: tuple[np.ndarray, np.ndarray]) -> float:
    """Spearman's rho between the lower budget's (predicted) ranks and the upper budget's
    losses, over the configs at the upper budget. `lower` and `upper` are (features, losses)
    (`features`), the most recent MAX_LOWER and MAX_UPPER used."""
    lower_features, lower_losses = lower[0][-MAX_LOWER:], lower[1][-MAX_LOWER:]
    upper_features, upper_losses = upper[0][-MAX_UPPER:], upper[1][-MAX_UPPER:]
    return spearman(predicted_ranks(lower_features, lower_losses, upper_features), upper_losses)
