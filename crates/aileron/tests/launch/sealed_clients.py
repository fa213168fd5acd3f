#!/usr/bin/env python3
"""A fake agent that, launched by `aileron launch claude`, uses an unmodified curl the way `gh`
does: `Authorization: token $GH_TOKEN`, where GH_TOKEN is whatever the launch put there. Driven
by crates/aileron/tests/it/launch.rs; every outcome goes into $ATTACK_REPORT, which the test
searches for the real key (it must not be anywhere the agent could see).
"""

import json
import os
import subprocess

env = os.environ
upstream = env["UPSTREAM"]
report = {"GH_TOKEN": env.get("GH_TOKEN")}


def curl(name, method, path, *extra):
    command = ["curl", "-sS", "--noproxy", "", "-x", env["HTTPS_PROXY"], "--path-as-is", "-X", method,
               "-D", "-", "-H", f"Authorization: token {env.get('GH_TOKEN', '')}", *extra, f"https://{upstream}{path}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    head, _, body = done.stdout.replace("\r\n", "\n").partition("\n\n")
    if head.startswith("HTTP/1.1 200 Connection established"):
        # The proxy's answer to curl's CONNECT comes first.
        head, _, body = body.partition("\n\n")
    status = head.split("\n")[0].split(" ")[1] if head.startswith("HTTP/") else None
    report[name] = {"code": done.returncode, "status": status, "head": head, "body": body, "stderr": done.stderr[-500:]}


curl("rest", "GET", "/user")
curl("gated", "PUT", "/repos/acme/app/pulls/7/merge")
curl("dot_dot", "PUT", "/repos/acme/app/contents/%2e%2e/pulls/7/merge")
curl("contents", "PUT", "/repos/acme/app/contents/README.md", "--data", "hello")
curl("unmatched", "DELETE", "/user")

# What the agent's own processes hold: its environment, as /proc shows it.
with open("/proc/self/environ", "rb") as environ:
    report["environ"] = environ.read().decode(errors="replace")

with open(env["ATTACK_REPORT"], "w") as out:
    json.dump(report, out, indent=2)
