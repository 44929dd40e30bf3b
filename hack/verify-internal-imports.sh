#!/usr/bin/env bash
# Fails when a package of the module outside internal/, cmd/, hack/ and e2e
# depends, directly or through others, on a package under the module's
# internal/: those hold the test fleet and tools, and the operator's own
# packages must build without them. Only non-test dependencies count (go list
# -deps without -test): tests may start a fleet.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

module=$($GO list -m)
status=0
for pkg in $($GO list ./... | grep -Ev "^${module}/(internal|cmd|hack|e2e)(/|$)"); do
	internal=$($GO list -deps "$pkg" | grep -E "^${module}/internal(/|$)" || true)
	if [[ -n $internal ]]; then
		echo "$pkg depends on $(echo $internal | tr ' ' ',')"
		status=1
	fi
done
if [[ $status != 0 ]]; then
	echo "top-level packages must not depend on ${module}/internal/..." >&2
fi
exit $status
