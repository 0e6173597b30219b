#!/usr/bin/env bash
# Builds and tests the Python package: a venv in target/python-venv, `pip install ./python`
# (maturin builds the abi3 wheel from python/Cargo.lock), then pytest over python/tests.
# Called by .ci/run; needs PyPI and crates.io (pip, cargo).
#   bash python/ci.sh [PYTEST_ARGS...]
# Env: PYTHON (default python3), CARGO_TARGET_DIR (maturin builds there; default
# target/python-build).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
py="${PYTHON:-python3}"
venv="$root/target/python-venv"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target/python-build}"
if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
# mitogen (pinned: the version the mitogen policy was read from) for tests/test_mitogen.py's
# live tree, which must then run, not skip.
"$venv/bin/python" -m pip install -q "$here" pytest mitogen==0.3.54
export PICKLEWARDEN_REQUIRE_MITOGEN=1
# Run from python/ but import the installed package, not the source folder's copy.
cd "$here/tests"
"$venv/bin/python" -m pytest -q -p no:cacheprovider "$@" .
