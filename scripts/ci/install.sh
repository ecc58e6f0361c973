#!/usr/bin/env bash
# Install the package in a workflow job: the CPU build of torch first (the default Linux wheel
# pulls gigabytes of CUDA libraries that no job here uses), then the project with the extras named
# in $1 (e.g. "modal"). Runs only in trusted checkouts or in jobs that hold no secrets.
set -euo pipefail
extras="${1:-}"
python -m pip install --upgrade pip
python -m pip install "${KB_TORCH_SPEC:-torch}" --index-url "${KB_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
if [ -n "$extras" ]; then
  python -m pip install -e ".[${extras}]"
else
  python -m pip install -e .
fi
python -m pip list --format=freeze | grep -i -E '^(torch|triton|pydantic|modal|kernelbench)=' || true
