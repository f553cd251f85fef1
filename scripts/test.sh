#!/usr/bin/env bash
# The test command of the README: every test of the workspace.
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
exec cargo test --workspace -j "${CARGO_BUILD_JOBS:-2}" "$@"
