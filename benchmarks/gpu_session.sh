#!/usr/bin/env bash
# Every GPU check of the course in one command, for a machine with a CUDA GPU and PyTorch,
# Triton, numpy and pytest already installed (nothing is installed here: such a machine may have
# no network). Run from the repository's root:
#
#   benchmarks/gpu_session.sh [tests] [flash] [gpt] [gpt-eager]     (default: tests flash gpt)
#
#   tests      the CUDA tests: every test of tests/course_lib with "cuda" in its name or
#              parameters (Triton against SDPA, the torch paths, autocast, attention dropout,
#              layer norm's mixed dtypes, torch.compile); 1-3 minutes, most of it Triton's
#              autotuning and compiling
#   flash      benchmarks/flash_gpu.py against SDPA's flash backend, bfloat16 and float16, d_k 64
#              and 128, T = 1024, 2048 and 4096, with the Triton tutorial's kernel beside them
#              (float16, d_k 64) when .gpu/triton_tutorial/fused_attention.py is there
#   gpt        benchmarks/gpt_shakespeare_gpu.py: the course's GPT against nanoGPT's own model,
#              nanoGPT's train_shakespeare_char recipe, both compiled as nanoGPT's train.py does,
#              stopped at step GPT_STEPS (default 2500: both were at their best by 1,750), then a
#              profile of 10 steps of each
#   gpt-eager  the same with neither model compiled (the figures of earlier sessions)
#
# nanoGPT's model.py, the Triton tutorial and the Shakespeare text come from .gpu/ (ignored by
# git; carry it to the machine): .gpu/nanogpt/model.py (github.com/karpathy/nanoGPT),
# .gpu/triton_tutorial/fused_attention.py (python/tutorials/06-fused-attention.py of
# github.com/triton-lang/triton) and .gpu/tinyshakespeare.txt (../shared/data/). Each part's output goes to the terminal and to $OUT/<part>.log (OUT, else
# .gpu/out); a part that fails is reported and the next one still runs; the exit status is 1
# if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-.gpu/out}"
mkdir -p "$out"
export PYTHONPATH="$PWD:$PWD/benchmarks${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python="${PYTHON:-python3}"
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(tests flash gpt)
failed=()

run() {  # run PART COMMAND...: the command's output to the terminal and $out/PART.log
  local part=$1
  shift
  echo "=== $part: $* ($(date -u +%H:%M:%S))"
  local start=$SECONDS
  "$@" 2>&1 | tee "$out/$part.log"
  local status=${PIPESTATUS[0]}
  echo "=== $part: exit $status after $((SECONDS - start)) s"
  [ "$status" -eq 0 ] || failed+=("$part")
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$python" -c "import sys, torch, numpy; import triton; print('python', sys.version.split()[0],
'| torch', torch.__version__, '| triton', triton.__version__, '| numpy', numpy.__version__,
'| GPU', torch.cuda.get_device_name() if torch.cuda.is_available() else None)" || exit 1

# GPT_ARGS: more arguments for gpt_shakespeare_gpu.py (GPT_ARGS=--quick: a smoke test on a CPU)
nanogpt=(--nanogpt .gpu/nanogpt --data .gpu/tinyshakespeare.txt --max-steps "${GPT_STEPS:-2500}"
         --profile 10 ${GPT_ARGS:-})
for part in "${parts[@]}"; do
  case "$part" in
    tests) run tests "$python" -m pytest -q -p no:cacheprovider -rs -k cuda tests/course_lib/test_attention.py \
             tests/course_lib/test_flash.py tests/course_lib/test_flash_triton.py \
             tests/course_lib/test_gpt.py tests/course_lib/test_layernorm.py \
             tests/course_lib/test_transformer.py ;;
    flash) tutorial=.gpu/triton_tutorial/fused_attention.py
           run flash "$python" benchmarks/flash_gpu.py --dtypes bfloat16 float16 --d-k 64 128 \
             --lengths 1024 2048 4096 --sdpa-backend flash --textbook-max-t 0 \
             $([ -f $tutorial ] && echo --tutorial $tutorial) ;;
    gpt) run gpt "$python" benchmarks/gpt_shakespeare_gpu.py "${nanogpt[@]}" ;;
    gpt-eager) run gpt-eager "$python" benchmarks/gpt_shakespeare_gpu.py --no-compile "${nanogpt[@]}" ;;
    *) echo "unknown part: $part (tests, flash, gpt, gpt-eager)" >&2; exit 2 ;;
  esac
done
[ ${#failed[@]} -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
