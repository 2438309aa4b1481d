#!/usr/bin/env bash
# Runs the integration files whose outcomes depend on when the server files its own bookkeeping (per-connection
# readings, settled connections, closing connections, the oracle's log) several times in a row while busy loops keep
# the CPUs loaded, and stops at the first failure. A count that passes only on a quiet machine is a bug (issue 12.8):
# no test here retries, so any failure under load is a timing-dependent outcome to fix.
#
#   scripts/verdicts-under-load.sh                 # 10 runs, 2 busy loops
#   RUNS=3 LOAD=4 scripts/verdicts-under-load.sh   # fewer runs, more load
#   SQLTALLY_BACKENDS=mariadb,postgres scripts/verdicts-under-load.sh
#
# Environment: RUNS (10), LOAD (busy loops beside the tests, 2; `stress-ng --cpu LOAD` when installed),
# SQLTALLY_BACKENDS (default sqlite,mariadb,postgres,mysql), SQLTALLY_REQUIRE (default: the same list, so a backend
# that cannot start fails the run instead of skipping quietly), OUT (where each run's Jest JSON and log go).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS="${RUNS:-10}"
LOAD="${LOAD:-2}"
export SQLTALLY_BACKENDS="${SQLTALLY_BACKENDS:-sqlite,mariadb,postgres,mysql}"
export SQLTALLY_REQUIRE="${SQLTALLY_REQUIRE:-$SQLTALLY_BACKENDS}"
OUT="${OUT:-$(mktemp -d /tmp/sqltally-under-load-XXXXXX)}"
mkdir -p "$OUT"

CANDIDATES=(
  integration/probes.test.ts
  integration/capture.test.ts
  integration/own-code.test.ts
  integration/verdict.test.ts
  integration/oracle.test.ts
)
FILES=()
for f in "${CANDIDATES[@]}"; do
  if [ -f "$f" ]; then FILES+=("$f"); else echo "not found, left out: $f"; fi
done
[ "${#FILES[@]}" -gt 0 ] || { echo "none of the timing-sensitive integration files exists" >&2; exit 2; }

# The load: each busy loop is a process of ours, stopped by its own pid on exit.
LOAD_PIDS=()
stop_load() {
  for pid in "${LOAD_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${LOAD_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  LOAD_PIDS=()
}
trap stop_load EXIT INT TERM
if [ "$LOAD" -gt 0 ]; then
  if command -v stress-ng >/dev/null 2>&1; then
    stress-ng --cpu "$LOAD" --quiet &
    LOAD_PIDS+=("$!")
    load_what="stress-ng --cpu $LOAD"
  else
    for _ in $(seq 1 "$LOAD"); do
      bash -c 'while :; do :; done' &
      LOAD_PIDS+=("$!")
    done
    load_what="$LOAD busy loop(s)"
  fi
else
  load_what="none"
fi

echo "files: ${FILES[*]}"
echo "backends: $SQLTALLY_BACKENDS (required: $SQLTALLY_REQUIRE); load: $load_what; runs: $RUNS; output: $OUT"

# Reads one run's Jest JSON: "<tests> <failed> <skipped>" and the failing tests' names, one per line after.
summarize_run() {
  node -e '
    const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const failing = [];
    for (const file of r.testResults) {
      for (const t of file.assertionResults) if (t.status === "failed") failing.push(`${file.name.replace(process.cwd() + "/", "")}: ${t.fullName}`);
      if (file.status === "failed" && file.assertionResults.every((t) => t.status !== "failed")) failing.push(`${file.name}: ${(file.message || "failed to run").split("\n")[0]}`);
    }
    console.log(`${r.numTotalTests} ${r.numFailedTests + r.numRuntimeErrorTestSuites} ${r.numPendingTests}`);
    for (const f of failing) console.log(f);
  ' "$1"
}

runs_done=0
tests_total=0
failures=0
skipped_total=0
started=$(date +%s)
for run in $(seq 1 "$RUNS"); do
  json="$OUT/run-$run.json"
  log="$OUT/run-$run.log"
  status=0
  npx jest "${FILES[@]}" --selectProjects integration --json --outputFile="$json" >"$log" 2>&1 || status=$?
  runs_done=$run
  if [ ! -s "$json" ]; then
    echo "run $run: Jest wrote no results (exit $status); see $log"
    tail -n 30 "$log"
    failures=$((failures + 1))
    break
  fi
  mapfile -t lines < <(summarize_run "$json")
  read -r tests failed skipped <<<"${lines[0]}"
  tests_total=$((tests_total + tests))
  skipped_total=$((skipped_total + skipped))
  echo "run $run: $tests tests, $failed failed, $skipped skipped (exit $status, $(( $(date +%s) - started )) s so far)"
  if [ "$failed" -gt 0 ] || [ "$status" -ne 0 ]; then
    failures=$((failures + (failed > 0 ? failed : 1)))
    for l in "${lines[@]:1}"; do echo "  failed: $l"; done
    [ "$failed" -gt 0 ] || { echo "  Jest exited $status with no failed test; see $log"; tail -n 30 "$log"; }
    break
  fi
done
stop_load

echo
echo "summary: $runs_done of $RUNS run(s), $tests_total tests, $failures failure(s), $skipped_total skipped, $(( $(date +%s) - started )) s under load ($load_what)"
[ "$failures" -eq 0 ]
