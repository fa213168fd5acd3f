#!/usr/bin/env python3
"""A fake agent launched twice at once by `aileron launch claude` (ROLE=first, ROLE=second), each
in its own session, both with the same proxy URL (http://127.0.0.1:3128 in their own
namespaces). Driven by crates/aileron/tests/it/launch.rs; each writes $ATTACK_REPORT.

The second starts, requests /second-before, and waits for the first to finish; the first waits
for the second to be up, requests /first, then looks for the second from inside its own
namespaces: its processes in /proc, its listeners in /proc/net/tcp. After the first has exited
the second requests /second-after: its network outlives the other session.
"""

import json
import os
import subprocess
import time

env = os.environ
role, shared, upstream = env["ROLE"], env["SHARED_DIR"], env["UPSTREAM"]
report = {"role": role}


def marker(name):
    return os.path.join(shared, name)


def wait_for(name):
    deadline = time.time() + 60
    while not os.path.exists(marker(name)):
        if time.time() > deadline:
            raise SystemExit(f"{role}: {name} never appeared")
        time.sleep(0.05)


def fetch(path):
    done = subprocess.run(["curl", "-sS", "--noproxy", "", "-x", env["HTTPS_PROXY"], f"https://{upstream}{path}"],
                          capture_output=True, text=True, timeout=60)
    return {"code": done.returncode, "stdout": done.stdout, "stderr": done.stderr[-500:]}


with open(env["SSL_CERT_FILE"]) as bundle:
    # The session CA is the bundle's last certificate.
    report["session_ca"] = "-----BEGIN CERTIFICATE-----" + bundle.read().split("-----BEGIN CERTIFICATE-----")[-1]
report["proxy"] = env["HTTPS_PROXY"]

if role == "second":
    report["before"] = fetch("/second-before")
    open(marker("second-up"), "w").close()
    wait_for("first-done")
    report["after"] = fetch("/second-after")
else:
    wait_for("second-up")
    report["request"] = fetch("/first")
    # Every process this agent can see, and whether any of them is the other session's.
    seen = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                seen.append(environ.read().split(b"\0"))
        except OSError:
            pass
    report["processes_seen"] = len(seen)
    report["other_session_seen"] = any(b"ROLE=second" in variables for variables in seen)
    # Listening TCP sockets in this namespace: its own two, never the other session's.
    listening = set()
    for table in ["/proc/net/tcp", "/proc/net/tcp6"]:
        with open(table) as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                if fields[3] == "0A":
                    listening.add(int(fields[1].split(":")[1], 16))
    report["listening_ports"] = sorted(listening)

with open(env["ATTACK_REPORT"], "w") as out:
    json.dump(report, out, indent=2)
if role == "first":
    open(marker("first-done"), "w").close()
