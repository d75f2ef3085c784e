#!/usr/bin/env bash
# The searcher benchmark's own environments. DEHB pins numpy<2, which TensorFlow's ml-dtypes
# and mlxtend cannot live with, so the peers get a venv of their own; hpo's searchers need
# only numpy, scipy and PyYAML, so hpo goes in without its (TensorFlow) dependencies.
# SMAC3 wants numpy>=2 and a newer ConfigSpace than HpBandSter lives with: a second venv;
# Syne Tune (numpy>=2, pandas) a third. benchmarks/many_workers_syne.py runs Syne Tune's
# simulator over the same LCBench surrogate and MFHartmann, so that venv gets them too: YAHPO's
# packages resolve with numpy 2, and huggingface_hub is what syne_tune.blackbox_repository (its
# simulator backend for a Blackbox) imports. mf-prior-bench 1.10 pins numpy<2, which Syne Tune
# cannot live with: it goes in without its dependencies, as the benchmarks call only its Hartmann
# generator, which gives the same values on numpy 2 (to within 1e-15). Syne Tune 0.14 on dropped
# its pause-and-resume schedulers (promotion-type Hyperband, MOBSTER, Hyper-Tune, DyHPO), which
# many_workers_syne.py runs from 0.13 in a fifth venv (numpy 1.26, autograd for its GPs).
# The published benchmarks (benchmarks/published.py): YAHPO Gym's LCBench and rbv2_xgboost
# surrogates (yahpo-gym 1.0.1 with ConfigSpace 1.x, patched at import, and onnxruntime) and
# mf-prior-bench's MFHartmann go into the first two venvs: both resolve there with numpy
# 1.26 (SMAC 2.4 accepts it). The surrogate's data is read offline from
# ../shared/benchmarks/yahpo_data. NePS's PriorBand (published.py only) gets a fourth, on
# request (WITH_NEPS=1): neural-pipeline-search 0.13.0, the newest that takes numpy<2
# (mf-prior-bench 1.10 pins it; 0.14+ want numpy>=2), and torch's CPU build, not PyPI's
# default torch with its CUDA wheels. torch==2.13.0+cpu is not on PyPI: pip needs
# PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu, or a find-links folder holding
# the wheel. The venv is about 1.7 GB.
PUBLISHED=(onnxruntime "yahpo-gym==1.0.1" "ConfigSpace>=1,<2" mf-prior-bench)
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-bench
.venv-bench/bin/pip install -q --upgrade pip
.venv-bench/bin/pip install -q --no-deps -e .
.venv-bench/bin/pip install -q "numpy<2" scipy PyYAML matplotlib optuna hpbandster dehb "${PUBLISHED[@]}"
if [ "${WITH_SMAC:-1}" = 1 ]; then
  python3 -m venv .venv-bench-smac
  .venv-bench-smac/bin/pip install -q --upgrade pip
  .venv-bench-smac/bin/pip install -q --no-deps -e .
  .venv-bench-smac/bin/pip install -q smac PyYAML matplotlib "${PUBLISHED[@]}"
fi
if [ "${WITH_SYNE:-1}" = 1 ]; then
  python3 -m venv .venv-bench-syne
  .venv-bench-syne/bin/pip install -q --upgrade pip
  .venv-bench-syne/bin/pip install -q --no-deps -e .
  .venv-bench-syne/bin/pip install -q syne-tune scipy statsmodels PyYAML matplotlib huggingface_hub onnxruntime \
    "yahpo-gym==1.0.1" "ConfigSpace>=1,<2"
  .venv-bench-syne/bin/pip install -q --no-deps mf-prior-bench
fi
if [ "${WITH_SYNE:-1}" = 1 ]; then
  python3 -m venv .venv-bench-syne13
  .venv-bench-syne13/bin/pip install -q --upgrade pip
  .venv-bench-syne13/bin/pip install -q --no-deps -e .
  .venv-bench-syne13/bin/pip install -q "syne-tune==0.13.0" autograd scipy statsmodels scikit-learn huggingface_hub \
    PyYAML matplotlib "${PUBLISHED[@]}"
fi
if [ "${WITH_NEPS:-0}" = 1 ]; then
  python3 -m venv .venv-bench-neps
  .venv-bench-neps/bin/pip install -q --upgrade pip
  .venv-bench-neps/bin/pip install -q --no-deps -e .
  .venv-bench-neps/bin/pip install -q "torch==2.13.0+cpu" "torchvision==0.28.0" "neural-pipeline-search==0.13.0" \
    PyYAML matplotlib "${PUBLISHED[@]}"
fi
echo "ready: nice -n 10 .venv-bench/bin/python benchmarks/searchers.py --quick --cache /tmp/peer-cache"
echo "       nice -n 10 .venv-bench-smac/bin/python benchmarks/searchers.py --quick --cache /tmp/peer-cache --only 'smac3 hyperband+rf'"
echo "       nice -n 10 .venv-bench-syne/bin/python benchmarks/searchers.py --quick --cache /tmp/peer-cache --only 'syne tune bohb'"
echo "       nice -n 19 .venv-bench/bin/python benchmarks/published.py --quick --cache /tmp/published-cache"
echo "       nice -n 19 .venv-bench-syne/bin/python benchmarks/many_workers_syne.py --quick --cache /tmp/many-workers"
if [ "${WITH_NEPS:-0}" = 1 ]; then
  echo "       nice -n 19 .venv-bench-neps/bin/python benchmarks/published.py --quick --cache /tmp/published-cache --only 'neps priorband'"
fi
