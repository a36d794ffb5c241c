#!/usr/bin/env bash
# kvcalc on one CUDA GPU, in one command (about 8 minutes on an H200):
#   1. the kernel tests on CUDA (compiled kernels, native fp8 casts),
#   2. benchmarks/bench_kernels.py (kernel bandwidth against a device copy),
#   3. scripts/probe_log2.py: which V3.2 scale-exponent model (exact, or fp32 log2) vLLM's arithmetic matches
#      on this GPU (reports/log2-probe.json),
#   4. kvcalc verify, full prefill through the Triton kernels: V3.2 bf16 and fp8 at 160k,
#      V4-Pro and V4-Flash fp8 at 1M,
# writing every figure under reports/ (reports/verify/*.json, reports/verify/README.md, reports/kernel_bench.*).
# Needs torch with CUDA and triton in the current Python (pip install -e '.[verify,test]' with a CUDA torch).
# Exit status: 0 when every step passed, 1 otherwise (each step still runs), 2 when there is no GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
mkdir -p reports/verify

if ! $PY -c "import torch, triton, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "gpu-check: needs a CUDA GPU with torch (CUDA build) and triton; on a CPU run the test suite instead" >&2
  exit 2
fi
$PY -m pip install -q --no-deps -e . >/dev/null 2>&1 || true   # the kvcalc / kvcalc_kernels entry points
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
  $PY -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
} > reports/verify/gpu.txt

status=0
step() {  # step NAME TIMEOUT_S COMMAND...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  echo "== $name"
  timeout "$limit" "$@"
  local rc=$?
  echo "   rc=$rc, $((SECONDS - t0)) s"
  [ "$rc" -eq 0 ] || status=1
}

step "kernel tests on CUDA" 150 env KVCALC_KERNEL_TEST_DEVICE=cuda $PY -m pytest tests/kernels -q -x -p no:cacheprovider
step "kernel benchmark" 90 $PY benchmarks/bench_kernels.py --tokens 262144 --rep 20
step "fp32 log2 probe" 60 $PY scripts/probe_log2.py --out reports/log2-probe.json
for run in "deepseek-v3.2 bf16 160k" "deepseek-v3.2 fp8 160k" "deepseek-v4-flash fp8 1M" "deepseek-v4-pro fp8 1M"; do
  set -- $run
  step "verify $1 $2 at $3" 150 $PY -m kvcalc verify "$1" -p "$2" -c "$3" --device cuda --fill full \
    --report "reports/verify/$1-$2-$3-cuda.json"
done
$PY scripts/verify_table.py reports/verify > reports/verify/README.md || status=1
cat reports/verify/README.md
exit $status
