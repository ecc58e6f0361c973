#!/usr/bin/env bash
# Pack the CuTe DSL and TileLang packages for the GPU machine (no network there; one device call carries at most
# 64 MiB with the checkout): install their wheels for its Python 3.12 into a folder, compress that folder with xz
# (the installed tree compresses far better than the wheels' zip: 188 MB of wheels become 109 MB) and split it into
# parts that each fit one call. Run on a machine with network; `gpu_check.sh dsl` joins and unpacks the parts.
#
#   bash scripts/pack_dsl_site.sh            # -> .dsl-wheels/a/dslsite.tar.xz.part-aa, .dsl-wheels/b/...part-ab
#
# Then carry `.dsl-wheels/a` on one device call and `.dsl-wheels/b` on the next, on the same warm machine (carried
# ignored folders stay there while it is held), the second with `bash scripts/gpu_check.sh dsl profile`.
# Packing takes about 4 minutes on 2 cores (xz -9e).
set -euo pipefail
cd "$(dirname "$0")/.." || exit 2
PART_BYTES=${KB_DSL_PART_BYTES:-54600000}   # 64 MiB less the checkout (about 8 MB) and some room
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
           --platform manylinux_2_17_x86_64)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 "${platforms[@]}" -d "$work/wheels" \
  nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1 nvidia-cutlass-dsl-libs-core==4.8.1 \
  nvidia-cutlass-dsl-libs-cu12==4.8.1 cuda-bindings==13.5.0 cuda-pathfinder==1.9.1 tilelang==0.1.15 \
  apache-tvm-ffi==0.1.12 torch-c-dlpack-ext==0.1.5 z3-solver==4.15.4.0 ml-dtypes==0.6.0 cloudpickle==3.1.3 psutil==7.2.2
python3 -m pip install -q --no-deps --no-compile --only-binary=:all: --python-version 3.12 "${platforms[@]}" \
  --target "$work/site" "$work"/wheels/*.whl
rm -f "$work/site/bin/z3"   # z3-solver's command-line binary (22 MB); TileLang uses the Python module's library
tar -C "$work/site" -cf - . | xz -9e -T0 > "$work/dslsite.tar.xz"
rm -rf .dsl-wheels && mkdir -p .dsl-wheels
split -b "$PART_BYTES" "$work/dslsite.tar.xz" "$work/dslsite.tar.xz.part-"
for part in "$work"/dslsite.tar.xz.part-*; do   # part-aa -> .dsl-wheels/a, part-ab -> .dsl-wheels/b, ...
  folder=.dsl-wheels/${part: -1}
  mkdir -p "$folder" && mv "$part" "$folder/"
done
ls -l .dsl-wheels/*/
