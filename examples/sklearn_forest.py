"""A scikit-learn estimator tuned by BOHB, with the number of trees as the budget.

    python examples/sklearn_forest.py [--max-trials 60] [--study-dir runs/forest]

`hpo.optimize` calls `objective(config, budget)`: here the budget is `n_estimators`, so
forests of 9 trees screen configurations and only the promising ones grow to 243.
Pass `--study-dir` to keep the study (`hpo status DIR`, and rerunning resumes it).
"""

import argparse

from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import cross_val_score

import hpo

SPACE = {
    "max_depth": {"type": "int", "low": 2, "high": 32, "log": True},
    "max_features": {"type": "float", "low": 0.05, "high": 1.0, "log": True},
    "min_samples_leaf": {"type": "int", "low": 1, "high": 16, "log": True},
    "criterion": {"type": "choice", "values": ["gini", "entropy"]},
}


def main(max_trials: int = 60, study_dir: str | None = None, cv: int = 3):
    x, y = load_digits(return_X_y=True)

    def accuracy(config, budget):
        forest = RandomForestClassifier(n_estimators=int(budget), random_state=0, n_jobs=1, **config)
        return cross_val_score(forest, x, y, cv=cv).mean()

    result = hpo.optimize(accuracy, SPACE, "bohb", min_budget=9, max_budget=243, eta=3, max_trials=max_trials,
                          direction="maximize", study_dir=study_dir)
    print(f"best cross-validated accuracy {result.best_value:.4f} with {result.best_budget:g} trees: "
          f"{result.best_config}")
    print(f"{len(result.trials)} trials; stopped: {result.stopped_because}")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-trials", type=int, default=60)
    parser.add_argument("--study-dir")
    args = parser.parse_args()
    main(args.max_trials, args.study_dir)
