#!/usr/bin/env python3
"""A fake agent that, launched by `aileron launch claude`, runs the unmodified AWS CLI against an
S3 endpoint through its session's proxy with whatever keys the launch gave it. Driven by
crates/aileron/tests/it/launch.rs; outcomes go into $ATTACK_REPORT.
"""

import json
import os
import subprocess

env = os.environ
# The endpoint is `localhost`, which NO_PROXY lists: told to use the proxy anyway.
for name in ["no_proxy", "NO_PROXY"]:
    env.pop(name, None)
endpoint = f"https://{env['UPSTREAM']}"
aws = [os.path.join(os.path.dirname(env["VENV_PYTHON"]), "aws"), "--region", "us-east-1", "--endpoint-url", endpoint]
report = {name: env.get(name) for name in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]}


def run(name, command):
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=dict(env, AWS_CONFIG_FILE="/dev/null"))
    report[name] = {"code": done.returncode, "stdout": done.stdout[-2000:], "stderr": done.stderr[-2000:]}


run("list_buckets", aws + ["s3api", "list-buckets"])
upload = os.path.join(env.get("TMPDIR", "/tmp"), "hello.txt")
with open(upload, "w") as out:
    out.write("hello from a sealed agent\n")
run("copy", aws + ["s3", "cp", upload, "s3://sealed-bucket/hello.txt"])
with open("/proc/self/environ", "rb") as environ:
    report["environ"] = environ.read().decode(errors="replace")

with open(env["ATTACK_REPORT"], "w") as out:
    json.dump(report, out, indent=2)
