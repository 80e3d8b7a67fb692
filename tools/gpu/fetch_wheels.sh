#!/usr/bin/env bash
# Fill gpu_wheels/ (ignored by git) with what the GPU machine lacks, for the device tool's
# `carry`: wheels for its Python 3.12 (it has no network) and the StableHLO conformance
# suites, which live beside the checkout (../shared) and so do not travel with it.
#
# The machine has pybind11, setuptools, numpy, ml_dtypes, pytest, jax, torch and an NVRTC
# wheel; setup.py also needs scipy-openblas32 (the cpu backend's BLAS). NVRTC 13.0 (the
# pin that matches driver 580) is about 90 MB, over the 64 MiB a run can carry: it is
# fetched only with --nvrtc, for a machine whose own NVRTC is of another version.
set -eu
cd "$(dirname "$0")/../.."
DEST=gpu_wheels
mkdir -p "$DEST"
PIP="${PYTHON:-python3} -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d $DEST"
$PIP scipy-openblas32
if [ "${1:-}" = "--nvrtc" ]; then
  $PIP "nvidia-cuda-nvrtc==13.0.*"
fi
SUITES=${CONFORMANCE:-../shared/conformance/stablehlo}
if [ -d "$SUITES/testdata" ]; then
  mkdir -p "$DEST/conformance/stablehlo"
  cp -r "$SUITES/testdata" "$SUITES/interpret" "$DEST/conformance/stablehlo/"
else
  echo "warning: no conformance suites at $SUITES (set CONFORMANCE=DIR)" >&2
fi
du -sh "$DEST"
