#!/usr/bin/env python3
"""A fake agent that, launched by `aileron launch claude`, sends its own requests through its
session's proxy the way `gh` would, to operations the user's policy rules decide (SPEC §16): three
merges under a limit of two an hour, a repository deletion no rule lets through, a new issue a rule
asks a human about, and a listing only a shadow rule would refuse.
Driven by crates/aileron/tests/it/policy.rs; every outcome goes into $ATTACK_REPORT.
"""

import json
import os
import subprocess
import tempfile

env = os.environ
upstream = env["UPSTREAM"]
report = {}


def curl(method, path, data=None):
    with tempfile.NamedTemporaryFile("r") as headers:
        command = ["curl", "-sS", "--noproxy", "", "-x", env["HTTPS_PROXY"], "-X", method, "-o", "-", "-D",
                   headers.name, "-w", "\n%{http_code}", "-H", f"Authorization: token {env.get('GH_TOKEN', '')}",
                   f"https://{upstream}{path}"]
        if data is not None:
            command[1:1] = ["--data", data]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        retry_after = [line.split(":", 1)[1].strip() for line in headers.read().splitlines()
                       if line.lower().startswith("retry-after:")]
    body, _, status = done.stdout.rpartition("\n")
    try:
        body = json.loads(body)
    except ValueError:
        pass
    return {"status": status, "body": body, "retry_after": retry_after[0] if retry_after else None}


report["merges"] = [curl("PUT", f"/repos/acme/app/pulls/{number}/merge", '{"merge_method":"squash"}')
                    for number in (1, 2, 3)]
report["delete"] = curl("DELETE", "/repos/acme/app")
report["issue"] = curl("POST", "/repos/acme/app/issues", '{"title":"flaky test"}')
report["listing"] = curl("GET", "/repos/acme/app/issues")
with open(env["ATTACK_REPORT"], "w") as out:
    json.dump(report, out)
