# Shared helpers of scripts/run and scripts/test: the project venv and the AWS emulator.
# Sourced, not run. Everything is installed into the repository (.venv, .local), nothing global.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STATE="$ROOT/.local"
MOTO_VERSION="5.2.5"
CARGO_LAMBDA_VERSION="1.9.2"
# The template's linters live in a venv of their own, so their pins never move moto's.
INFRA_VENV="$ROOT/.venv-infra"
CFN_LINT_VERSION="1.58.0"
CHECKOV_VERSION="3.3.30"

log() { printf '\033[1;34m==>\033[0m %s\n' "$*" >&2; }

# Installs moto (the AWS-API emulator) into the project venv when missing.
ensure_emulator() {
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating the project venv (.venv)"
    python3 -m venv "$VENV"
  fi
  if ! "$VENV/bin/python" -c "import moto, flask" 2>/dev/null \
     || [ "$("$VENV/bin/python" -c 'import moto; print(moto.__version__)')" != "$MOTO_VERSION" ]; then
    log "installing moto[server]==$MOTO_VERSION into .venv"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "moto[server]==$MOTO_VERSION"
  fi
}

# Installs cargo-lambda (from PyPI, with zig) into the project venv when missing: the tests run a
# Lambda target under `cargo lambda watch`.
ensure_cargo_lambda() {
  if [ "$("$VENV/bin/cargo-lambda" lambda --version 2>/dev/null | awk '{print $2}')" != "$CARGO_LAMBDA_VERSION" ]; then
    log "installing cargo-lambda==$CARGO_LAMBDA_VERSION into .venv"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "cargo-lambda==$CARGO_LAMBDA_VERSION"
  fi
}

# Installs cfn-lint and checkov into .venv-infra when missing.
ensure_infra_linters() {
  if [ ! -x "$INFRA_VENV/bin/python" ]; then
    log "creating the template linters' venv (.venv-infra)"
    python3 -m venv "$INFRA_VENV"
  fi
  if [ "$("$INFRA_VENV/bin/cfn-lint" --version 2>/dev/null | awk '{print $2}')" != "$CFN_LINT_VERSION" ] \
     || [ "$("$INFRA_VENV/bin/checkov" --version 2>/dev/null)" != "$CHECKOV_VERSION" ]; then
    log "installing cfn-lint==$CFN_LINT_VERSION and checkov==$CHECKOV_VERSION into .venv-infra"
    "$INFRA_VENV/bin/pip" install --quiet --disable-pip-version-check \
      "cfn-lint==$CFN_LINT_VERSION" "checkov==$CHECKOV_VERSION"
  fi
}

# Ensures a Rust toolchain and (optionally) cargo-nextest.
ensure_rust() {
  command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
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

# Starts moto on 127.0.0.1:$1, logging to $STATE/emulator-$1.log; waits until it answers.
# Sets EMULATOR_PID.
start_emulator() {
  local port="$1"
  mkdir -p "$STATE"
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "port $port is already in use: stop what listens there or set SUNDIAL_EMULATOR_PORT" >&2
    exit 1
  fi
  log "starting the AWS emulator (moto) on 127.0.0.1:$port"
  # moto's server, with DynamoDB writes made atomic as in AWS (see scripts/emulator.py).
  "$VENV/bin/python" "$ROOT/scripts/emulator.py" -H 127.0.0.1 -p "$port" >"$STATE/emulator-$port.log" 2>&1 &
  EMULATOR_PID=$!
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      return 0
    fi
    if ! kill -0 "$EMULATOR_PID" 2>/dev/null; then
      echo "the emulator exited; its log:" >&2
      cat "$STATE/emulator-$port.log" >&2
      exit 1
    fi
    sleep 0.2
  done
  echo "the emulator did not start within 20 s; see $STATE/emulator-$port.log" >&2
  exit 1
}

stop_emulator() {
  if [ -n "${EMULATOR_PID:-}" ] && kill -0 "$EMULATOR_PID" 2>/dev/null; then
    kill "$EMULATOR_PID" 2>/dev/null || true
    wait "$EMULATOR_PID" 2>/dev/null || true
  fi
}
