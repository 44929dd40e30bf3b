#!/usr/bin/env bash
# Lists the scenarios: the tests that need real time (a token's expiry with
# the API server's leeway, replicas as processes, failover, latency compared
# on a quiet machine), which live in test files with the build constraint
# `scenarios` and run in make test-scenarios, not in make test. One line per
# package: its directory and its scenario tests, comma-separated.
set -euo pipefail
cd "$(dirname "$0")/.."
tagged() { grep -l '^//go:build .*\bscenarios\b' "$@" 2>/dev/null || true; }
for dir in $(git ls-files '*_test.go' | xargs -n1 dirname | sort -u); do
  files=$(tagged "$dir"/*_test.go)
  [ -n "$files" ] || continue
  # shellcheck disable=SC2086 # one word per file
  tests=$(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T).*/\1/p' $files | paste -sd, -)
  [ -n "$tests" ] || continue
  echo "./$dir $tests"
done
