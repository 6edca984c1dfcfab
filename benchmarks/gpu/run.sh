#!/usr/bin/env bash
# Paper-scale checks for a GPU machine, end to end in a few minutes. Writes under ${OUT:-runs/gpu}.
#   bash benchmarks/gpu/run.sh
set -euo pipefail
out=${OUT:-runs/gpu}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" | tee "$out/env.txt"
# Figure 2 at the paper's size (d = 784: 28×28 digits and the 784-dim Gaussian)
reconguard run fig2-linear --preset paper --device cuda --out "$out/fig2-paper" --quiet | tee "$out/fig2.txt"
# E[G] on the GPU: batched VJP vs the per-sample jacobian loop (k = 256)
python benchmarks/fisher.py --split middle --device cuda | tee "$out/fisher.txt"
