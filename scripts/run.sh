#!/usr/bin/env bash
# `make run`: the API and dashboard, Dagster (webserver + daemon, sensor and schedule on) and demo traffic.
set -euo pipefail
# Started with SIGINT ignored (a background job of a non-interactive shell, some CI runners),
# bash cannot trap it, and every part would inherit the ignore: Dagster, which gives SIGTERM
# SIGINT's handling, then ignores both. Start again with SIGINT at its default.
if [ "$(trap -p INT)" = "trap -- '' SIGINT" ]; then
  exec env --default-signal=INT "$BASH" "$0" "$@"
fi
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

# Each part runs as its own process group, as a terminal runs a job: Ctrl-C (SIGINT to the
# foreground group) reaches this script alone, and `stop` ends each part the way it ends
# cleanly. SIGINT is back at its default in the part (bash makes background commands ignore it).
job() {  # job LOG COMMAND...: start COMMAND in the background; its pid is $!, its group's id too
  local log=$1
  shift
  $BIN/python -S -c 'import os, signal, sys
os.setpgid(0, 0)
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "$@" >"$DATA/logs/$log" 2>&1 &
}
api_pid="" webserver_pid="" daemon_pid="" demo_pid=""
signal_group() {  # signal_group SIGNAL PID...: the group, or the pid before it made its group
  local sig=$1 pid
  shift
  for pid in "$@"; do kill -"$sig" -- "-$pid" 2>/dev/null || kill -"$sig" "$pid" 2>/dev/null || true; done
}
any_alive() {  # any_alive PID...: is a process of these groups still running (zombies are done)?
  ps -e -o pgid=,stat= | awk -v groups=" $* " \
    'index(groups, " " $1 " ") && $2 !~ /^Z/ { alive = 1 } END { exit !alive }'
}
stop() {
  trap '' INT TERM HUP  # a second signal must not cut the stop short
  trap - EXIT
  local parts=($demo_pid $api_pid $webserver_pid $daemon_pid)
  [ ${#parts[@]} -gt 0 ] || return 0
  echo "Stopping flagsight ..."
  signal_group TERM $demo_pid
  # gunicorn's master alone: SIGTERM is its graceful stop (workers seal their event logs, then
  # the sealer, in its group, seals what they handed off); signalled itself, the sealer would
  # stop before them.
  [ -z "$api_pid" ] || kill -TERM "$api_pid" 2>/dev/null || true
  # Dagster's webserver and daemon as Ctrl-C in their own terminals: SIGINT to each group, so
  # a run in progress (the daemon's code server starts it, in the daemon's group) is
  # interrupted and marked as such by Dagster, not left "started" forever.
  signal_group INT $webserver_pid $daemon_pid
  # A few seconds normally; the bound is for a loaded machine, then whatever is left is killed.
  for _ in $(seq 1 60); do
    any_alive "${parts[@]}" || return 0
    sleep 0.5
  done
  echo "Some of flagsight did not stop within 30 s; killing it." >&2
  signal_group KILL "${parts[@]}"
}
trap stop EXIT
# Ctrl-C, a supervisor's TERM or the terminal closing is how this script is meant to end: stop
# everything and exit 0, so that make does not report the interrupt as a failed recipe ("Error 130").
trap 'stop; echo "flagsight stopped."; exit 0' INT TERM HUP

job api.log $BIN/flagsight serve --port "$API_PORT"
api_pid=$!
# Dagster's storage made once, before its two processes start: on a new home both would create
# the SQLite tables at once, and the loser dies ("table alembic_version already exists", seen
# in a loaded CI run). The API starts meanwhile.
if ! $BIN/dagster instance migrate >"$DATA/logs/dagster-instance.log" 2>&1; then
  echo "Dagster's storage could not be prepared; its log ($DATA/logs/dagster-instance.log) ends with:" >&2
  tail -n 20 "$DATA/logs/dagster-instance.log" >&2
  exit 1
fi
job dagster-webserver.log $BIN/dagster-webserver -w workspace.yaml -h 127.0.0.1 -p "$DAGSTER_PORT"
webserver_pid=$!
job dagster-daemon.log $BIN/dagster-daemon run -w workspace.yaml
daemon_pid=$!

ready=0
for _ in $(seq 1 60); do
  kill -0 "$api_pid" 2>/dev/null || break  # our server died: nothing to wait for
  curl -fsS "http://127.0.0.1:$API_PORT/readyz" >/dev/null 2>&1 && { ready=1; break; }
  sleep 0.5
done
if [ $ready -eq 0 ]; then
  echo "The API did not start; its log ($DATA/logs/api.log) ends with:" >&2
  tail -n 20 "$DATA/logs/api.log" >&2
  exit 1
fi
# The demo reads its key from $DATA/demo-api-key: no key in the process list.
job demo.log $BIN/flagsight demo --url "http://127.0.0.1:$API_PORT"
demo_pid=$!

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
