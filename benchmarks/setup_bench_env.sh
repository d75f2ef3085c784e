#!/usr/bin/env bash
# The searcher benchmark's own environment. DEHB pins numpy<2, which TensorFlow's ml-dtypes
# and mlxtend cannot live with, so the peers get a venv of their own; hpo's searchers need
# only numpy, scipy and PyYAML, so hpo goes in without its (TensorFlow) dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-bench
.venv-bench/bin/pip install -q --upgrade pip
.venv-bench/bin/pip install -q --no-deps -e .
.venv-bench/bin/pip install -q "numpy<2" scipy PyYAML matplotlib optuna hpbandster dehb
echo "ready: .venv-bench/bin/python benchmarks/searchers.py --quick"
