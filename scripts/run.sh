#!/usr/bin/env bash
# `make run`: the API and dashboard, Dagster (webserver + daemon, sensor and schedule on) and demo traffic.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
DATA="${FLAGSIGHT_DATA_DIR:-$PWD/var}"
API_PORT="${FLAGSIGHT_PORT:-8000}"
DAGSTER_PORT="${DAGSTER_PORT:-3000}"
export FLAGSIGHT_DATA_DIR="$DATA" DAGSTER_HOME="$DATA/dagster"
mkdir -p "$DATA/logs"  # `flagsight init` makes the rest, Dagster's home and its dagster.yaml

# Another program (a second `make run`, say) on either port would answer our readiness wait
# while our own server failed to start: say so and stop before starting anything.
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for port in "$API_PORT" "$DAGSTER_PORT"; do
  if port_taken "$port"; then
    echo "Port $port on 127.0.0.1 is taken (another flagsight?): stop it, or choose other ports" \
      "with FLAGSIGHT_PORT and DAGSTER_PORT." >&2
    exit 1
  fi
done

# The demo key is kept in $DATA/demo-api-key: every run prints the same one, so a client of
# the key printed before keeps working. A data directory from before that file gets a new one.
init_output=$($BIN/flagsight init)
demo_key() { sed -n 's/^Demo API key: \(fsk_[^ ]*\).*/\1/p' <<<"$1"; }
if [ -z "$(demo_key "$init_output")" ]; then
  init_output+=$'\n'$($BIN/flagsight init --rotate-demo-key | grep '^Demo API key')
fi
echo "$init_output"
DEMO_KEY=$(demo_key "$init_output" | tail -n 1)

pids=()
dagster_pid=""
cleanup() {
  trap '' INT TERM  # a second signal must not cut the cleanup short
  trap - EXIT
  kill -TERM "${pids[@]}" 2>/dev/null || true
  # dagster dev (its own process group, with the webserver and daemon) stops on SIGINT
  [ -n "$dagster_pid" ] && kill -INT -- "-$dagster_pid" 2>/dev/null || true
  for _ in $(seq 1 40); do
    alive=0
    for pid in "${pids[@]}" $dagster_pid; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.5
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
  [ -n "$dagster_pid" ] && kill -KILL -- "-$dagster_pid" 2>/dev/null || true
}
trap cleanup EXIT
# Ctrl-C (or a supervisor's TERM) is how this script is meant to end: stop everything and
# exit 0, so that make does not report the interrupt as a failed recipe ("Error 130").
trap 'cleanup; echo "flagsight stopped."; exit 0' INT TERM

$BIN/flagsight serve --port "$API_PORT" >"$DATA/logs/api.log" 2>&1 & pids+=($!)
setsid $BIN/dagster dev -w workspace.yaml -p "$DAGSTER_PORT" >"$DATA/logs/dagster.log" 2>&1 & dagster_pid=$!

serve_pid=${pids[0]}
ready=0
for _ in $(seq 1 60); do
  kill -0 "$serve_pid" 2>/dev/null || break  # our server died: nothing to wait for
  curl -fsS "http://127.0.0.1:$API_PORT/readyz" >/dev/null 2>&1 && { ready=1; break; }
  sleep 0.5
done
if [ $ready -eq 0 ]; then
  echo "The API did not start; its log ($DATA/logs/api.log) ends with:" >&2
  tail -n 20 "$DATA/logs/api.log" >&2
  exit 1
fi
# The demo reads its key from $DATA/demo-api-key: no key in the process list.
$BIN/flagsight demo --url "http://127.0.0.1:$API_PORT" >"$DATA/logs/demo.log" 2>&1 & pids+=($!)

cat <<TXT

flagsight is running (Ctrl-C stops everything; logs in $DATA/logs):
  API          http://127.0.0.1:$API_PORT/v1/evaluate    (OpenAPI: /openapi.json, OFREP: /ofrep/v1)
  Dashboard    http://127.0.0.1:$API_PORT/dashboard      (sign in with the admin token)
  Dagster      http://127.0.0.1:$DAGSTER_PORT                  (a run within 10 s of new events, and every 5 minutes)
  Demo API key $DEMO_KEY

Try: curl -s -H "Authorization: ApiKey $DEMO_KEY" -H 'Content-Type: application/json' \\
       -d '{"flagKey":"new-checkout","userIdentifier":"user-1"}' http://127.0.0.1:$API_PORT/v1/evaluate
TXT
wait
