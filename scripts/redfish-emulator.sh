#!/usr/bin/env bash
# Installs the Redfish emulator that the `redfish` node back end is tested
# against: sushy-tools 2.2.0 from PyPI (OpenStack's sushy-emulator), into a
# private virtualenv, and prints the path of its `sushy-emulator` binary.
#
#   export SUSHY_EMULATOR="$(scripts/redfish-emulator.sh)"
#
# The virtualenv lives in $RACKFLOW_SUSHY_VENV (default
# ~/.cache/rackflow/sushy-tools-2.2.0); a second run reuses it. Everything
# but the final path goes to stderr, so the command substitution above gets
# the path only. The tests (crates/rms/tests/redfish_*.rs) find the emulator
# through $SUSHY_EMULATOR, and run our firmware extension of it
# (crates/testkit/sushy_fw.py) with the python beside it.
set -euo pipefail

SUSHY_VERSION="2.2.0"
VENV="${RACKFLOW_SUSHY_VENV:-$HOME/.cache/rackflow/sushy-tools-$SUSHY_VERSION}"
PYTHON="${PYTHON:-python3}"

log() { echo "redfish-emulator: $*" >&2; }

installed() {
  [ -x "$VENV/bin/sushy-emulator" ] &&
    "$VENV/bin/python" - "$SUSHY_VERSION" <<'PY' >/dev/null 2>&1
import sys
from importlib.metadata import version
import bcrypt  # basic-auth tests write a bcrypt htpasswd file with it
sys.exit(0 if version("sushy-tools") == sys.argv[1] else 1)
PY
}

if ! installed; then
  if ! command -v "$PYTHON" >/dev/null 2>&1; then
    log "$PYTHON not found: installing python3 and python3-venv"
    apt-get update -qq >&2 && apt-get install -y -qq python3 python3-venv >&2
    PYTHON=python3
  fi
  log "installing sushy-tools==$SUSHY_VERSION into $VENV"
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  if ! "$PYTHON" -m venv "$VENV" >&2; then
    # Debian's python3 needs python3-venv for ensurepip.
    log "python -m venv failed: installing python3-venv and retrying"
    rm -rf "$VENV"
    apt-get update -qq >&2 && apt-get install -y -qq python3-venv >&2
    "$PYTHON" -m venv "$VENV" >&2
  fi
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    "sushy-tools==$SUSHY_VERSION" bcrypt >&2
  installed || { log "FATAL: sushy-tools $SUSHY_VERSION did not install into $VENV"; exit 1; }
fi
log "sushy-tools $SUSHY_VERSION ready in $VENV"
echo "$VENV/bin/sushy-emulator"
