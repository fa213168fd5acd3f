#!/usr/bin/env python3
"""A fake agent whose own tool calls an OAuth2 API the way most clients do, `Authorization:
Bearer $SERVICE_TOKEN`, where SERVICE_TOKEN is whatever the launch put there; three requests, each
one's answer (status, headers, body) in $ATTACK_REPORT. Driven by crates/aileron/tests/it/launch.rs.
"""

import json
import os
import subprocess

env = os.environ
report = {"SERVICE_TOKEN": env.get("SERVICE_TOKEN"), "answers": []}
for index in range(3):
    command = ["curl", "-sS", "--noproxy", "", "-x", env["HTTPS_PROXY"], "-D", "-", "-H",
               f"Authorization: Bearer {env.get('SERVICE_TOKEN', '')}", f"https://{env['UPSTREAM']}/v1/me/{index}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    report["answers"].append({"code": done.returncode, "stdout": done.stdout, "stderr": done.stderr[-500:]})
with open("/proc/self/environ", "rb") as environ:
    report["environ"] = environ.read().decode(errors="replace")
with open(env["ATTACK_REPORT"], "w") as out:
    json.dump(report, out, indent=2)
