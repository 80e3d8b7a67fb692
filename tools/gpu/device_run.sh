#!/usr/bin/env bash
# The prepared GPU run of the cuda backend, about 6 minutes: install the carried wheels,
# build the extensions for this machine's Python, then every device check in order
# (tools/gpu/device_checks.py), results as JSON in OUT.
#
# Here, first:   bash tools/gpu/fetch_wheels.sh      (wheels + conformance suites -> gpu_wheels/)
# On the GPU:    bash tools/gpu/device_run.sh [OUT]  (from the repository root; OUT defaults
#                                                     to $OUT, else /tmp/openhlo-gpu)
# With the device tool: run(command="bash tools/gpu/device_run.sh", carry=["gpu_wheels"],
#                           timeout_s=480)
set -u
cd "$(dirname "$0")/../.."
OUT_DIR=${1:-${OUT:-/tmp/openhlo-gpu}}
mkdir -p "$OUT_DIR"
PYTHON=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
SITE=/tmp/openhlo-site
if ls gpu_wheels/*.whl >/dev/null 2>&1; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" gpu_wheels/*.whl > "$OUT_DIR/build.log" 2>&1 || echo "wheel install failed (see build.log)"
  export PYTHONPATH="$SITE:$PWD"
else
  export PYTHONPATH="$PWD"
fi
start=$(date +%s)
# All cores: the cpu backend's 31 files take about 15 s each on one core.
NPY_NUM_BUILD_JOBS=$(nproc) timeout 150 "$PYTHON" setup.py build_ext --inplace >> "$OUT_DIR/build.log" 2>&1
build_rc=$?
echo "build: rc=$build_rc in $(( $(date +%s) - start )) s (log: build.log)"
# The checks run even after a failed build: each step records its own failure.
timeout 330 "$PYTHON" -m tools.gpu.device_checks --out "$OUT_DIR" --budget 300
checks_rc=$?
echo "{\"build_rc\": $build_rc, \"checks_rc\": $checks_rc, \"seconds\": $(( $(date +%s) - start ))}" > "$OUT_DIR/run.json"
exit $checks_rc
