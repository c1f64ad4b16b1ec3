#!/bin/sh
# The kube layer's tests against the lowest kopf and kubernetes-asyncio that pyproject.toml
# allows, installed into a scratch directory put first on the path (the environment itself is
# left alone). Run from the repository root: sh tests/lower_bounds.sh
set -eu
lower=$(mktemp -d)
trap 'rm -rf "$lower"' EXIT
python -m pip install --quiet --no-deps --target "$lower" "kopf==1.45.0" "kubernetes-asyncio==32.3.2"
PYTHONPATH="$lower:$(pwd)/operator" python -m pytest -q -p no:cacheprovider \
    tests/kube tests/e2e tests/emulator tests/sandbox tests/manifests/test_rbac.py tests/cli/test_cli.py \
    tests/observability
