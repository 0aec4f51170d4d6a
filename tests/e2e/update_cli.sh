#!/usr/bin/env bash
# Move the end-to-end tests to another Claude Code CLI release, then run them against it.
#
#   tests/e2e/update_cli.sh            # the newest release on the npm registry
#   tests/e2e/update_cli.sh 2.1.250    # that release
#
# The pinned version lives only in tests/e2e/cli_version.txt. The tests install it once from the
# npm registry into $TOTAL_RECALL_E2E_CACHE/<version> (default ~/.cache/total-recall-e2e/<version>)
# and reuse that folder on later runs. Run this weekly: a release that changes hooks, transcripts
# or plugin loading then fails here, with the version named, before it reaches users.
# On success commit cli_version.txt; on failure it keeps the new version so the failure can be
# read again with `pytest -m e2e`; `git checkout tests/e2e/cli_version.txt` goes back.
set -euo pipefail
cd "$(dirname "$0")/../.."
file=tests/e2e/cli_version.txt
old=$(cat "$file")
new=${1:-$(npm view @anthropic-ai/claude-code version)}
echo "$new" > "$file"
echo "Claude Code CLI for the e2e tests: $old -> $new"
python=${PYTHON:-.venv/bin/python}
if "$python" -m pytest -m e2e -q; then
    echo "e2e tests pass on $new: commit $file"
else
    echo "e2e tests fail on $new (was $old); see above" >&2
    exit 1
fi
