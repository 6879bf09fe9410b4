#!/usr/bin/env python3
"""The deployed stack on ministack: packaging and deploying infra/template.yaml, reading its logs.
Run by scripts/deploy-local with .venv-ministack's Python (boto3; run with another Python, it
switches to that one); the emulator runs already.

  deployed.py deploy --endpoint URL --pid PID --emulator-log PATH [--timing NAME=SECONDS ...]
      strips a copy of each function binary (target/debug/sundial-{api,tick,worker,watchdog}),
      zips it as an executable `bootstrap`, uploads it to s3://<stack>-artifacts/ (what
      `sam package` does), writes .deployed/template.packaged.yaml with each CodeUri turned into
      its s3:// URI (nothing else of the template changes), creates or updates the stack with
      CloudFormation as the root caller (IAM enforced for everything the functions do), checks
      that the API answers, and writes .deployed/stack.json.
  deployed.py logs [--since MINUTES] [--grep TEXT] [--check]
      prints the events of the stack's function log groups (CloudWatch Logs in the emulator);
      --check prints only the lines (of those groups since the start, and of the emulator's
      log) that show access denied, a panic or a crashed invocation, and exits 1 if there is any.
  deployed.py capacity [--runs .deployed/capacity-runs.json]
      sums the capacity log (CapacityLog=1: every DynamoDB call's consumed capacity, by table and
      index, with the run or job it was spent on) into units per run of each scenario the stage
      ran, and per tick and watchdog pass; prints a Markdown table and writes
      .deployed/capacity.{md,json}. Fails if a scenario has no measured run.

Environment: SUNDIAL_DEPLOY_STACK (default sundial), SUNDIAL_DEPLOY_KEY (default
sundial-deploy-key), SUNDIAL_DEPLOY_OWNER (default dev).
"""

import argparse
import concurrent.futures
import datetime
import hashlib
import io
import json
import os
import platform
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, ".venv-ministack")

try:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError
except ImportError:
    # Run with another Python: use the venv's (scripts/deploy-local installs it).
    if os.path.exists(os.path.join(VENV, "bin", "python")) and os.path.realpath(sys.prefix) != os.path.realpath(VENV):
        os.execv(os.path.join(VENV, "bin", "python"), [os.path.join(VENV, "bin", "python"), *sys.argv])
    raise

DEPLOYED = os.path.join(ROOT, ".deployed")
STACK_JSON = os.path.join(DEPLOYED, "stack.json")
TEMPLATE = os.path.join(ROOT, "infra", "template.yaml")
REGION = "us-east-1"
# ministack's root caller is access key `test` (any other key must be one IAM or STS issued).
CREDENTIALS = {"access_key_id": "test", "secret_access_key": "test"}
FUNCTIONS = ["sundial-api", "sundial-tick", "sundial-worker", "sundial-watchdog"]
# The functions' log groups, in this order in stack.json.
LOG_GROUPS = ["ApiLogGroup", "TickLogGroup", "WorkerLogGroup", "WatchdogLogGroup"]
# What the stack never logs, whatever its jobs do: IAM refusals, panics, crashed invocations.
FAILURE = re.compile(r"AccessDenied|is not authorized to perform|panicked at|Runtime\.ExitError")


def log(message):
    print(f"\033[1;34m==>\033[0m {message}", file=sys.stderr, flush=True)


def client(service, endpoint):
    return boto3.client(
        service, endpoint_url=endpoint, region_name=REGION,
        aws_access_key_id=CREDENTIALS["access_key_id"], aws_secret_access_key=CREDENTIALS["secret_access_key"],
        config=Config(retries={"max_attempts": 2}, read_timeout=300, connect_timeout=5))


def package(binary, work):
    """A zip holding `binary` (stripped when `strip` exists) as an executable `bootstrap`."""
    source = binary
    if shutil.which("strip"):
        source = os.path.join(work, os.path.basename(binary))
        subprocess.run(["strip", "-o", source, binary], check=True)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        info = zipfile.ZipInfo("bootstrap", date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = 0o100755 << 16  # a regular file, rwxr-xr-x
        info.compress_type = zipfile.ZIP_DEFLATED
        with open(source, "rb") as f:
            zf.writestr(info, f.read(), compresslevel=1)
    return buf.getvalue()


def wait_stack(cfn, stack, timeout=600):
    start = time.time()
    while True:
        st = cfn.describe_stacks(StackName=stack)["Stacks"][0]
        if not st["StackStatus"].endswith("_IN_PROGRESS"):
            return st
        if time.time() - start > timeout:
            raise SystemExit(f"stack {stack} still {st['StackStatus']} after {timeout} s")
        time.sleep(0.3)


def stack_failures(cfn, stack):
    lines = []
    for ev in cfn.describe_stack_events(StackName=stack)["StackEvents"]:
        if "FAILED" in ev["ResourceStatus"]:
            lines.append(f"  {ev['LogicalResourceId']}: {ev['ResourceStatus']} {ev.get('ResourceStatusReason', '')}")
    return "\n".join(lines)


def http_get(url, host=None, timeout=60):
    req = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def deploy(args):
    endpoint = args.endpoint.rstrip("/")
    port = int(endpoint.rsplit(":", 1)[1])
    stack = os.environ.get("SUNDIAL_DEPLOY_STACK", "sundial")
    key = os.environ.get("SUNDIAL_DEPLOY_KEY", "sundial-deploy-key")
    owner = os.environ.get("SUNDIAL_DEPLOY_OWNER", "dev")
    bucket = f"{stack}-artifacts"
    timings = dict(t.split("=", 1) for t in args.timing)
    timings = {k: float(v) for k, v in timings.items()}
    os.makedirs(DEPLOYED, exist_ok=True)

    # Package: strip, zip and upload the four binaries; point each CodeUri at its object.
    t0 = time.time()
    s3 = client("s3", endpoint)
    try:
        s3.create_bucket(Bucket=bucket)
    except ClientError as e:
        if e.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise
    text = open(TEMPLATE).read()
    with tempfile.TemporaryDirectory(dir=DEPLOYED) as work, concurrent.futures.ThreadPoolExecutor(4) as pool:
        zips = {fn: pool.submit(package, os.path.join(ROOT, args.bin_dir, fn), work) for fn in FUNCTIONS}
        for fn, future in zips.items():
            data = future.result()
            obj = f"{fn}-{hashlib.sha256(data).hexdigest()[:16]}.zip"
            s3.put_object(Bucket=bucket, Key=obj, Body=data)
            log(f"uploaded s3://{bucket}/{obj} ({len(data) / 1048576:.1f} MB)")
            text, n = re.subn(rf"CodeUri: \.\./target/lambda/{fn}/\s*$", f"CodeUri: s3://{bucket}/{obj}", text,
                              flags=re.MULTILINE)
            if n != 1:
                raise SystemExit(f"infra/template.yaml: expected one `CodeUri: ../target/lambda/{fn}/`, found {n}")
    packaged = os.path.join(DEPLOYED, "template.packaged.yaml")
    with open(packaged, "w") as f:
        f.write(text)
    timings["package_s"] = round(time.time() - t0, 1)

    # Deploy: create the stack, or update it on an emulator that already holds it.
    t1 = time.time()
    arch = "arm64" if platform.machine() in ("aarch64", "arm64") else "x86_64"
    params = {
        "Stage": "local",
        "Architecture": arch,
        "ApiKeyHashes": f"{hashlib.sha256(key.encode()).hexdigest()}:{owner}",
        "PageTokenKey": secrets.token_hex(32),
        # Every DynamoDB call's consumed capacity in the logs: `deployed.py capacity` sums it.
        "CapacityLog": "1",
        # The stage's targets listen on loopback (the emulator's own port stays refused).
        "AllowedNetworks": "127.0.0.0/8",
        # The state machines the stage's Step Functions job may start and follow.
        "StateMachineTargetNames": "e2e-machine-*",
    }
    request = dict(
        StackName=stack, TemplateBody=text,
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in params.items()],
        Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"])
    cfn = client("cloudformation", endpoint)
    try:
        existing = cfn.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"]
    except ClientError:
        existing = None
    if existing in ("ROLLBACK_COMPLETE", "ROLLBACK_FAILED", "CREATE_FAILED", "DELETE_FAILED"):
        log(f"stack {stack} is {existing}: deleting it first")
        cfn.delete_stack(StackName=stack)
        try:
            wait_stack(cfn, stack)
        except ClientError:
            pass
        existing = None
    if existing is None:
        log(f"creating stack {stack} ({arch}, stage local, owner {owner})")
        cfn.create_stack(**request)
        done = "CREATE_COMPLETE"
    else:
        log(f"updating stack {stack} ({existing})")
        try:
            cfn.update_stack(**request)
            done = "UPDATE_COMPLETE"
        except ClientError as e:
            if "No updates are to be performed" not in str(e):
                raise
            log("no changes")
            done = existing
    st = wait_stack(cfn, stack)
    if st["StackStatus"] != done:
        raise SystemExit(f"stack {stack}: {st['StackStatus']} {st.get('StackStatusReason', '')}\n"
                         + stack_failures(cfn, stack))
    timings["deploy_s"] = round(time.time() - t1, 1)

    resources = cfn.describe_stack_resources(StackName=stack)["StackResources"]
    by_type = {}
    for r in resources:
        by_type.setdefault(r["ResourceType"], {})[r["LogicalResourceId"]] = r["PhysicalResourceId"]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in st.get("Outputs", [])}
    api_id = by_type["AWS::ApiGatewayV2::Api"]["HttpApi"]
    api_url = f"{endpoint}/_aws/execute-api/{api_id}"
    api_host = f"{api_id}.execute-api.localhost:{port}"
    logs_by_id = by_type.get("AWS::Logs::LogGroup", {})

    # The API answers (this also takes the API function through its cold start).
    t2 = time.time()
    status, body = http_get(f"{api_url}/v1/openapi.json")
    if status != 200:
        raise SystemExit(f"GET {api_url}/v1/openapi.json: {status} {body[:300]!r}")
    # The dashboard calls the API at /v1/..., so it needs the API at the root of its origin: the
    # host-style URL (browsers resolve *.localhost to loopback), not the path-style one.
    status, body = http_get(f"http://127.0.0.1:{port}/ui/index.html", host=api_host)
    dashboard = status == 200 and b"<html" in body.lower()
    timings["api_check_s"] = round(time.time() - t2, 1)

    info = {
        "endpoint": endpoint,
        "port": port,
        "region": REGION,
        "account_id": st["StackId"].split(":")[4],
        "credentials": CREDENTIALS,
        "stack": stack,
        "stack_status": st["StackStatus"],
        "api_id": api_id,
        "api_url": api_url,
        "api_host_url": f"http://{api_host}",
        "dashboard_url": f"http://{api_host}/ui/index.html" if dashboard else None,
        "api_key": key,
        "owner": owner,
        "outputs": outputs,
        "tables": by_type.get("AWS::DynamoDB::Table", {}),
        "queues": by_type.get("AWS::SQS::Queue", {}),
        "topics": by_type.get("AWS::SNS::Topic", {}),
        "functions": by_type.get("AWS::Lambda::Function", {}),
        "log_groups": [logs_by_id[logical] for logical in LOG_GROUPS],
        "resources": sorted(
            ({"type": r["ResourceType"], "logical_id": r["LogicalResourceId"], "physical_id": r["PhysicalResourceId"]}
             for r in resources), key=lambda r: (r["type"], r["logical_id"])),
        "template": packaged,
        "emulator_log": args.emulator_log,
        "pid": args.pid,
        "deployed_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "timings": timings,
    }
    tmp = STACK_JSON + ".tmp"
    with open(tmp, "w") as f:
        json.dump(info, f, indent=2)
        f.write("\n")
    os.replace(tmp, STACK_JSON)
    log(f"stack {stack}: {st['StackStatus']}, {len(resources)} resources "
        f"(package {timings['package_s']} s, deploy {timings['deploy_s']} s, API check {timings['api_check_s']} s)")


def stack_info():
    if not os.path.exists(STACK_JSON):
        raise SystemExit("no deployed stack (.deployed/stack.json): run scripts/deploy-local")
    return json.load(open(STACK_JSON))


def log_events(info, group, start):
    """Every event of log group `group` from `start` (ms since the epoch), oldest first."""
    logs = client("logs", info["endpoint"])
    kw = {"logGroupName": group, "startTime": start}
    events = []
    while True:
        try:
            r = logs.filter_log_events(**kw)
        except ClientError as e:
            if e.response["Error"]["Code"] == "ResourceNotFoundException":
                break
            raise
        events += r["events"]
        if not r.get("nextToken") or r["nextToken"] == kw.get("nextToken"):
            break
        kw["nextToken"] = r["nextToken"]
    return events


def read_logs(args):
    info = stack_info()
    start = 0 if args.check else int((time.time() - args.since * 60) * 1000)
    bad = 0
    for group in info["log_groups"]:
        events = log_events(info, group, start)
        if not args.check:
            print(f"=== {group}: {len(events)} events")
        for e in events:
            message = e["message"].rstrip()
            if args.check:
                if FAILURE.search(message):
                    bad += 1
                    print(f"{group}: {message[:1000]}")
            elif args.grep in message:
                t = datetime.datetime.fromtimestamp(e["timestamp"] / 1000, datetime.timezone.utc).strftime("%H:%M:%S")
                print(t, message[:2000])
    if args.check:
        with open(info["emulator_log"], errors="replace") as f:
            for line in f:
                if FAILURE.search(line):
                    bad += 1
                    print(f"emulator: {line.rstrip()[:1000]}")
        print(f"{bad} failure lines in the {len(info['log_groups'])} function log groups and the emulator's log",
              file=sys.stderr)
        sys.exit(1 if bad else 0)


def capacity(args):
    """Sums the capacity log (`dynamodb capacity` lines, one per table or index a call touched,
    carrying the span of the run or job it was spent on) into units per run, by scenario, table
    and index; and the units of tick and watchdog passes that belong to no job."""
    info = stack_info()
    scenarios = json.load(open(args.runs))["jobs"]
    tables = {physical: logical for logical, physical in info["tables"].items()}
    functions = dict(zip(info["log_groups"], ["api", "tick", "worker", "watchdog"]))

    lines, passes, unreported = [], {"tick": 0, "watchdog": 0}, {}
    for group in info["log_groups"]:
        function = functions[group]
        for e in log_events(info, group, 0):
            try:
                line = json.loads(e["message"])
            except ValueError:
                continue  # EMF lines, the runtime's own lines
            fields = line.get("fields", {})
            message = fields.get("message")
            if message in ("tick done", "watchdog done"):
                passes[function] += 1
            if message != "dynamodb capacity":
                continue
            if not fields.get("reported"):
                key = (function, fields.get("operation", "?"))
                unreported[key] = unreported.get(key, 0) + 1
                continue
            part = tables.get(fields.get("table"), fields.get("table"))
            if fields.get("index"):
                part += "/" + fields["index"]
            lines.append((function, line.get("span", {}), fields["kind"], part, float(fields.get("units", 0))))

    def add(into, kind, part, units):
        into.setdefault(kind, {}).setdefault(part, 0.0)
        into[kind][part] += units

    rows = []
    for job in scenarios:
        job_id, runs = job["job_id"], job["runs"]
        # The tick's advance of the job (one write per pass) is shared by the runs it claimed.
        shared = {}
        for function, span, kind, part, units in lines:
            if span.get("job_id") == job_id and "run_id" not in span:
                add(shared, kind, part, units / max(1, len(runs)))
        by_attempts = {}
        for run in runs:
            if run["state"] != "SUCCEEDED":
                continue
            spent = {}
            for function, span, kind, part, units in lines:
                if span.get("run_id") == run["id"]:
                    add(spent, kind, part, units)
            for kind, parts in shared.items():
                for part, units in parts.items():
                    add(spent, kind, part, units)
            by_attempts.setdefault(run["attempts"], []).append(spent)
        for attempts, spents in sorted(by_attempts.items()):
            mean = {}
            for spent in spents:
                for kind, parts in spent.items():
                    for part, units in parts.items():
                        add(mean, kind, part, units / len(spents))
            path = "happy path" if attempts == 1 else f"{attempts - 1} retr{'y' if attempts == 2 else 'ies'}"
            rows.append({"schedule": job["schedule"], "path": path, "runs": len(spents), "units": mean})

    fixed = {}
    for function, span, kind, part, units in lines:
        if function in passes and "job_id" not in span and "run_id" not in span:
            add(fixed.setdefault(function, {}), kind, part, units / max(1, passes[function]))

    def breakdown(parts):
        return ", ".join(f"{part} {units:.2f}" for part, units in sorted(parts.items()) if units) or "-"

    out = ["| scenario | runs | write units / run | read units / run | writes by table/index | reads by table/index |",
           "|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["schedule"], r["path"])):
        w, rd = r["units"].get("write", {}), r["units"].get("read", {})
        out.append(f"| {r['schedule']}, {r['path']} | {r['runs']} | {sum(w.values()):.2f} | {sum(rd.values()):.2f} "
                   f"| {breakdown(w)} | {breakdown(rd)} |")
    out += ["", "| per pass, no job | passes | write units | read units | writes by table/index | reads by table/index |",
            "|---|---|---|---|---|---|"]
    for function, units in sorted(fixed.items()):
        w, rd = units.get("write", {}), units.get("read", {})
        out.append(f"| {function} | {passes[function]} | {sum(w.values()):.2f} | {sum(rd.values()):.2f} "
                   f"| {breakdown(w)} | {breakdown(rd)} |")
    if unreported:
        out += ["", "Calls the emulator reported no capacity for: "
                + ", ".join(f"{op} ×{n} ({fn})" for (fn, op), n in sorted(unreported.items()))]
    table = "\n".join(out)
    print(table)
    with open(os.path.join(DEPLOYED, "capacity.md"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(DEPLOYED, "capacity.json"), "w") as f:
        json.dump({"per_run": rows, "per_pass": fixed, "passes": passes,
                   "unreported": [{"function": fn, "operation": op, "calls": n} for (fn, op), n in unreported.items()]},
                  f, indent=2)
    missing = {(j["schedule"], p) for j in scenarios for p in ("happy path", "1 retry")} - {
        (r["schedule"], r["path"]) for r in rows if r["units"]}
    if missing:
        raise SystemExit(f"no capacity measured for: {sorted(missing)}")


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends quietly
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    d = sub.add_parser("deploy")
    d.add_argument("--endpoint", required=True)
    d.add_argument("--pid", type=int, required=True)
    d.add_argument("--emulator-log", required=True)
    d.add_argument("--bin-dir", default="target/debug")
    d.add_argument("--timing", action="append", default=[], help="NAME=SECONDS, recorded in stack.json")
    g = sub.add_parser("logs")
    g.add_argument("--since", type=float, default=60, help="minutes (default 60)")
    g.add_argument("--grep", default="")
    g.add_argument("--check", action="store_true")
    c = sub.add_parser("capacity")
    c.add_argument("--runs", default=os.path.join(DEPLOYED, "capacity-runs.json"),
                   help="the runs to cost, as the deployed stage writes them")
    args = ap.parse_args()
    {"deploy": deploy, "logs": read_logs, "capacity": capacity}[args.command](args)


if __name__ == "__main__":
    main()
