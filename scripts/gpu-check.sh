#!/usr/bin/env bash
# kvcalc on one CUDA GPU, in one command (under 8 minutes on an H200; the steps and their timeouts are declared
# once in scripts/gpu_check.py): the kernel tests on CUDA, the kernel benchmark, the fp32 log2 probe, vLLM-pool
# verifies (V3.2 at 160k, V4-Flash and V4-Pro at 1M), exact-layout verifies, and the headline (V3.2-style bf16
# vs V4-Pro at 1M by allocation), every figure written under reports/ (reports/verify/*.json and README.md).
#
#   bash scripts/gpu-check.sh            # on a CUDA machine (torch with CUDA and triton in this Python)
#   bash scripts/gpu-check.sh --dry-run  # anywhere: every step, its command line checked, the device memory it
#                                        # needs and the figures it should print; nothing runs (CI runs this)
# Exit status: 0 when every step passed, 1 otherwise (each step still runs), 2 when there is no GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(command -v python3 || command -v python)}  # PYTHON=/path/to/venv/bin/python picks another
if [ "${1:-}" != "--dry-run" ] && $PY -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  $PY -m pip install -q --no-deps -e . >/dev/null 2>&1 || true   # the kvcalc / kvcalc_kernels entry points
  mkdir -p reports/verify
  { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
    $PY -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)" 2>/dev/null
  } > reports/verify/gpu.txt
fi
exec $PY scripts/gpu_check.py "$@"
