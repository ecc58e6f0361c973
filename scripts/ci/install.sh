#!/usr/bin/env bash
# Install the package in a workflow job.
#
#   install.sh [EXTRAS]          the CPU build of torch first (the default Linux wheel pulls gigabytes of
#                                CUDA libraries that no job here uses), then the project with EXTRAS
#                                (e.g. "modal"), resolved at install time. For jobs that hold no secrets.
#   install.sh --locked LOCK     exactly the pins of LOCK, each checked against its hashes
#                                (pip --require-hashes, nothing else resolved or fetched), then the project
#                                itself with no dependencies and no network. For the job that holds the
#                                Modal token (evaluate.yml, scripts/ci/requirements-evaluate.txt): a
#                                package swapped on the registry fails the install instead of running.
set -euo pipefail
if [ "${1:-}" = "--locked" ]; then
  lock="${2:?usage: install.sh --locked LOCKFILE}"
  python -m pip install --require-hashes --no-deps -r "$lock"
  python -m pip install --no-deps --no-build-isolation --no-index -e .
  python -m pip list --format=freeze | grep -i -E '^(pydantic|modal|kernelbench)=' || true
  exit 0
fi
extras="${1:-}"
python -m pip install --upgrade pip
python -m pip install "${KB_TORCH_SPEC:-torch}" --index-url "${KB_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
if [ -n "$extras" ]; then
  python -m pip install -e ".[${extras}]"
else
  python -m pip install -e .
fi
python -m pip list --format=freeze | grep -i -E '^(torch|triton|pydantic|modal|kernelbench)=' || true
