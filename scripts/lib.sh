# Shared helpers of scripts/run and scripts/test: the project venv and the AWS emulator.
# Sourced, not run. Everything is installed into the repository (.venv*, .local), nothing global.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STATE="$ROOT/.local"
CARGO_LAMBDA_VERSION="1.9.2"
# The template's linters live in a venv of their own, so their pins never move the emulator's.
INFRA_VENV="$ROOT/.venv-infra"
CFN_LINT_VERSION="1.58.0"
CHECKOV_VERSION="3.3.30"

# Each line tells the seconds since the first script of this command started (the stage timings).
export SUNDIAL_LOG_T0="${SUNDIAL_LOG_T0:-$(date +%s)}"
log() { printf '\033[1;34m==>\033[0m [%4ss] %s\n' "$(( $(date +%s) - SUNDIAL_LOG_T0 ))" "$*" >&2; }

# Creates the venv $1 when missing and installs the pinned packages $3… (`name==version`, extras
# allowed) when any is missing or at another version; $2 names the venv in the log.
ensure_venv() {
  local venv="$1" label="$2"
  shift 2
  if [ ! -x "$venv/bin/python" ]; then
    log "creating $label (${venv#"$ROOT/"})"
    python3 -m venv "$venv"
  fi
  if ! "$venv/bin/python" -c '
import sys
from importlib.metadata import version
for pin in sys.argv[1:]:
    name, wanted = pin.split("==")
    if version(name.split("[")[0]) != wanted:
        sys.exit(1)
' "$@" 2>/dev/null; then
    log "installing $* into ${venv#"$ROOT/"}"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$@"
  fi
}

# Installs the AWS emulator (ministack, in .venv-ministack) when missing.
ensure_emulator() {
  ensure_ministack
}

# Installs cargo-lambda (from PyPI, with zig) into the project venv when missing: the tests run a
# Lambda target under `cargo lambda watch`.
ensure_cargo_lambda() {
  ensure_venv "$VENV" "the project venv" "cargo-lambda==$CARGO_LAMBDA_VERSION"
}

# Installs the Standard Webhooks reference verifier into the project venv when missing: a test
# checks Sundial's signatures with it (tests/fixtures/verify_webhook.py).
STANDARDWEBHOOKS_VERSION="1.1.0"
ensure_webhook_verifier() {
  ensure_venv "$VENV" "the project venv" "cargo-lambda==$CARGO_LAMBDA_VERSION" "standardwebhooks==$STANDARDWEBHOOKS_VERSION"
}

# Installs schemathesis (the API contract fuzzer, scripts/check-contract) into .venv-schemathesis.
SCHEMATHESIS_VENV="$ROOT/.venv-schemathesis"
SCHEMATHESIS_VERSION="4.32.5"
ensure_schemathesis() {
  ensure_venv "$SCHEMATHESIS_VENV" "the contract fuzzer's venv" "schemathesis==$SCHEMATHESIS_VERSION"
}

# Installs cfn-lint and checkov into .venv-infra when missing.
ensure_infra_linters() {
  ensure_venv "$INFRA_VENV" "the template linters' venv" "cfn-lint==$CFN_LINT_VERSION" "checkov==$CHECKOV_VERSION"
}

# Installs Debian's chromium (apt-get) and playwright-core (npm, pinned by
# tests/browser/package-lock.json) when missing: scripts/browser-test drives the dashboard with them.
ensure_browser() {
  if ! command -v chromium >/dev/null; then
    log "installing chromium (apt-get)"
    local sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo -n)
    "${sudo[@]}" apt-get update -qq || return 1
    "${sudo[@]}" apt-get install -y -qq chromium >/dev/null || return 1
  fi
  if [ ! -d "$ROOT/tests/browser/node_modules/playwright-core" ]; then
    log "installing playwright-core (npm ci)"
    (cd "$ROOT/tests/browser" && npm ci --no-audit --no-fund --silent)
  fi
}

# Runs a command in the background, its output kept in $STATE/logs/$1.log, until `await_job $1`
# waits for it, prints its output and fails if it failed.
declare -A JOBS=()
start_job() {
  local name="$1"
  shift
  mkdir -p "$STATE/logs"
  ( "$@" ) >"$STATE/logs/$name.log" 2>&1 &
  JOBS[$name]=$!
}

await_job() {
  local name="$1" status=0
  wait "${JOBS[$name]}" || status=$?
  unset "JOBS[$name]"
  cat "$STATE/logs/$name.log" >&2
  if [ "$status" != 0 ]; then
    echo "$name failed (exit $status); its output is above and in .local/logs/$name.log" >&2
    exit "$status"
  fi
}

# Runs "$@" at the lowest CPU priority, so that it only uses time the rest leaves idle.
at_idle_priority() {
  renice -n 19 -p "$BASHPID" >/dev/null
  "$@"
}

# Stops every background job still running (and what it started), for an EXIT trap; a job that
# has ended is left alone (its pid may be another process's by now). What a stopped job printed
# so far stays in its log.
stop_jobs() {
  local name pid running
  running=" $(jobs -pr | tr '\n' ' ') "
  for name in "${!JOBS[@]}"; do
    pid="${JOBS[$name]}"
    [[ "$running" == *" $pid "* ]] || continue
    echo "stopping $name (its output so far: .local/logs/$name.log)" >&2
    kill -- $(_descendants "$pid") "$pid" 2>/dev/null || true
  done
}

# Ensures a Rust toolchain and (optionally) cargo-nextest.
ensure_rust() {
  command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
}

# Installs cargo-deny (built from crates.io with its own lock file) into .local/tools when missing:
# the tests check the dependency tree against deny.toml. It builds in a target directory of its own
# (removed afterwards), so the workspace's target/ is left alone. Run it as "$CARGO_DENY" deny ….
CARGO_DENY_VERSION="0.20.2"
CARGO_DENY="$STATE/tools/bin/cargo-deny"
ensure_cargo_deny() {
  ensure_rust
  if [ "$("$CARGO_DENY" --version 2>/dev/null | awk '{print $2}')" != "$CARGO_DENY_VERSION" ]; then
    log "installing cargo-deny $CARGO_DENY_VERSION into .local/tools (a few minutes' build)"
    CARGO_TARGET_DIR="$STATE/tools/build" cargo install --quiet --locked --force \
      --root "$STATE/tools" --version "=$CARGO_DENY_VERSION" cargo-deny
    rm -rf "$STATE/tools/build"
  fi
}

# Points the AWS SDK at the emulator on $1 (port), with dummy credentials.
aws_env() {
  export AWS_ENDPOINT_URL="http://127.0.0.1:$1"
  export AWS_REGION="${AWS_REGION:-us-east-1}"
  export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-testing}"
  export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-testing}"
  # Never reach for the instance-metadata service.
  export AWS_EC2_METADATA_DISABLED=true
}

# Starts the AWS emulator (ministack, IAM not enforced) on 127.0.0.1:$1, logging to
# $STATE/emulator-$1.log; waits until it answers. Sets EMULATOR_PID.
start_emulator() {
  local port="$1"
  log "starting the AWS emulator (ministack) on 127.0.0.1:$port"
  launch_ministack "$port" false "$STATE/emulator-$port" "$STATE/emulator-$port.log"
  EMULATOR_PID=$MINISTACK_PID
}

stop_emulator() {
  stop_ministack "${EMULATOR_PID:-}"
}

# ---------------------------------------------------------------------------------------------
# ministack, the AWS emulator of both the in-process runtime (scripts/run, the integration tests;
# IAM not enforced) and the deployed stack (scripts/deploy-local: infra/template.yaml deployed with
# CloudFormation, IAM enforced, the four functions running as provided.al2023 Lambdas).
# ministack lives in a venv of its own, so its pins never move the other tools'.
MINISTACK_VENV="$ROOT/.venv-ministack"
MINISTACK_VERSION="1.5.33"
MINISTACK_BOTO3_VERSION="1.43.106"
DEPLOYED="$ROOT/.deployed"

# Installs ministack[full] and boto3 into .venv-ministack when missing.
ensure_ministack() {
  ensure_venv "$MINISTACK_VENV" "the emulator's venv" \
    "ministack[full]==$MINISTACK_VERSION" "boto3==$MINISTACK_BOTO3_VERSION"
}

# Prints a free TCP port on 127.0.0.1 (the kernel's pick).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Starts ministack (with scripts/ministack_shim.py) on 127.0.0.1:$1 with IAM enforced, in a session
# of its own (a Ctrl-C in the terminal does not reach it; the caller stops it), logging to
# $DEPLOYED/ministack-$1.log; waits for /_ministack/health. Sets MINISTACK_PID.
start_ministack() {
  launch_ministack "$1" true "$DEPLOYED/state-$1" "$DEPLOYED/ministack-$1.log"
}

# Starts ministack (with scripts/ministack_shim.py) on 127.0.0.1:$1, AUTH=$2 (true: IAM enforced),
# keeping its state in $3 (emptied first) and logging to $4, in a session of its own (a Ctrl-C in
# the terminal does not reach it; the caller stops it with stop_ministack); waits for
# /_ministack/health. Sets MINISTACK_PID.
launch_ministack() {
  local port="$1" auth="$2" state="$3" logfile="$4"
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "port $port is already in use: stop what listens there or choose another port" >&2
    exit 1
  fi
  rm -rf "$state"
  mkdir -p "$state/tmp" "$state/s3" "$(dirname "$logfile")"
  # A clean environment: no AWS_* credentials (the root caller stays access key `test`), nothing of
  # the caller's SUNDIAL_*/RUST_LOG (the functions inherit the server's environment).
  # AWS_ENDPOINT_URL: provided.* functions get the endpoint only from the server's environment.
  # IOT_MTLS_ENABLED/SFTP_ENABLED=0: no MQTT (0.0.0.0:8883) or SFTP listeners.
  # The proxy variables point at a closed loopback port: whatever the emulator would send beyond
  # loopback (an SNS subscription confirmation to a job's https endpoint) fails at once instead
  # of leaving the machine; loopback itself is reached directly.
  env -i PATH="$PATH" HOME="${HOME:-/root}" LANG=C.UTF-8 \
    http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9 no_proxy=127.0.0.1,localhost \
    HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 NO_PROXY=127.0.0.1,localhost \
    AUTH="$auth" BIND_HOST=127.0.0.1 GATEWAY_PORT="$port" MINISTACK_REGION=us-east-1 \
    AWS_ENDPOINT_URL="http://127.0.0.1:$port" \
    IOT_MTLS_ENABLED=0 SFTP_ENABLED=0 PERSIST_STATE=0 LOG_LEVEL="${MINISTACK_LOG_LEVEL:-INFO}" \
    TMPDIR="$state/tmp" STATE_DIR="$state" S3_DATA_DIR="$state/s3" \
    setsid "$MINISTACK_VENV/bin/python" "$ROOT/scripts/ministack_shim.py" >"$logfile" 2>&1 </dev/null &
  MINISTACK_PID=$!
  for _ in $(seq 1 300); do
    if curl -sf "http://127.0.0.1:$port/_ministack/health" >/dev/null 2>&1; then
      return 0
    fi
    if ! kill -0 "$MINISTACK_PID" 2>/dev/null; then
      echo "ministack exited; its log ($logfile):" >&2
      tail -n 40 "$logfile" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "ministack did not answer within 30 s; see $logfile" >&2
  stop_ministack "$MINISTACK_PID"
  exit 1
}

# Every descendant of process $1 (pids, one a line).
_descendants() {
  local child
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
    echo "$child"
    _descendants "$child"
  done
}

# Stops the ministack of pid $1 (only if that pid is ours: its command line runs
# ministack_shim.py) and then whatever it started that is still running (function bootstraps).
stop_ministack() {
  local pid="$1" children
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  if ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "scripts/ministack_shim.py"; then
    echo "pid $pid is not a ministack of these scripts; left alone" >&2
    return 0
  fi
  children=$(_descendants "$pid")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  for child in $children; do
    kill -0 "$child" 2>/dev/null && kill -KILL "$child" 2>/dev/null
  done
  return 0
}
