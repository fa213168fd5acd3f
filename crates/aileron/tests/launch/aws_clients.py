#!/usr/bin/env python3
"""A fake agent that, launched by `aileron launch claude`, runs the unmodified AWS CLI against
S3 and STS (their real names, which the daemon dials at a fake) with whatever keys and AWS config
the launch gave it: `s3api list-buckets`, an `s3 cp` upload, `sts get-caller-identity` (held until
the user approves it, then run again), and an
`s3 rm` that the bundled spec holds for approval (nobody approves it). Driven by
crates/aileron/tests/it/launch.rs; outcomes go into $ATTACK_REPORT.
"""

import json
import os
import subprocess
import time

env = os.environ
aws = [os.path.join(os.path.dirname(env["VENV_PYTHON"]), "aws")]
report = {name: env.get(name) for name in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_CONFIG_FILE"]}
with open(env["AWS_CONFIG_FILE"]) as config:
    report["config"] = config.read()


def run(name, command):
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    report[name] = {"code": done.returncode, "stdout": done.stdout[-2000:], "stderr": done.stderr[-2000:]}


run("list_buckets", aws + ["s3api", "list-buckets"])
upload = os.path.join(env.get("TMPDIR", "/tmp"), "hello.txt")
with open(upload, "w") as out:
    out.write("hello from a sealed agent\n")
run("copy", aws + ["s3", "cp", upload, "s3://sealed-bucket/hello.txt"])
# Every STS request waits for the user (it can mint keys): the CLI is run again once approved, as
# an agent would, and the approved request goes through once.
for attempt in range(60):
    run("identity", aws + ["sts", "get-caller-identity"])
    if "approval_pending" not in report["identity"]["stderr"]:
        break
    report["identity_held"] = True
    time.sleep(0.5)
run("remove", aws + ["s3", "rm", "s3://sealed-bucket/hello.txt"])
# An answer that echoes the signature the proxy made (S3's SignatureDoesNotMatch shows it): a
# signature is the user's key for fifteen minutes, and must come back redacted.
echoed = os.path.join(env.get("TMPDIR", "/tmp"), "echoed.xml")
run("echo", aws + ["s3api", "get-object", "--bucket", "sealed-bucket", "--key", "echo", echoed])
report["echoed"] = open(echoed).read() if os.path.exists(echoed) else ""
with open("/proc/self/environ", "rb") as environ:
    report["environ"] = environ.read().decode(errors="replace")

with open(env["ATTACK_REPORT"], "w") as out:
    json.dump(report, out, indent=2)
