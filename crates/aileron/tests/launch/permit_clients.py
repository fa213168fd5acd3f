#!/usr/bin/env python3
"""A fake agent that sends one gated request (`PUT …/pulls/7/merge`, as `gh` would) through its
session's proxy and reports the answer. With STEP=a it then waits until the test has approved the
request late ($SHARED_DIR/a-approved), and exits without retrying: the permit is left for another
session to try. Driven by crates/aileron/tests/it/launch.rs; the answer goes into $ATTACK_REPORT.
"""

import json
import os
import subprocess
import time

env = os.environ
upstream, shared = env["UPSTREAM"], env["SHARED_DIR"]
command = ["curl", "-sS", "--noproxy", "", "-x", env["HTTPS_PROXY"], "-X", "PUT", "-o", "-", "-w", "\n%{http_code}",
           "--data", '{"merge_method":"squash"}', "-H", f"Authorization: token {env.get('GH_TOKEN', '')}",
           f"https://{upstream}/repos/acme/app/pulls/7/merge"]
done = subprocess.run(command, capture_output=True, text=True, timeout=60)
body, _, status = done.stdout.rpartition("\n")
try:
    body = json.loads(body)
except ValueError:
    pass
if env["STEP"] == "a":
    open(os.path.join(shared, "a-pending"), "w").close()
    deadline = time.time() + 30
    while not os.path.exists(os.path.join(shared, "a-approved")) and time.time() < deadline:
        time.sleep(0.05)
with open(env["ATTACK_REPORT"], "w") as out:
    json.dump({"status": status, "body": body}, out)
