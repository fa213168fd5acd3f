#!/usr/bin/env python3
"""A fake agent that, launched by `aileron launch claude`, runs the unmodified GitHub CLI (`gh`,
the Debian package) against github.com as a user's agent would: it creates an issue, then merges
a pull request three times — the test approves the first merge, denies the second and lets the
third wait out the hold. `gh` holds only the placeholder the launch put in GH_TOKEN. Driven by
crates/aileron/tests/it/launch.rs; every outcome goes into $ATTACK_REPORT.
"""

import json
import os
import subprocess

env = dict(os.environ)
# gh's own configuration and state live in the workspace (the user's ~/.config/gh is hidden).
workspace = os.getcwd()
env.update({
    "GH_CONFIG_DIR": os.path.join(workspace, "gh-config"),
    "XDG_STATE_HOME": os.path.join(workspace, "gh-state"),
    "XDG_CACHE_HOME": os.path.join(workspace, "gh-cache"),
    "GH_NO_UPDATE_NOTIFIER": "1",
    "GH_PROMPT_DISABLED": "1",
    "NO_COLOR": "1",
})
report = {"GH_TOKEN": os.environ.get("GH_TOKEN")}


def gh(name, *args):
    done = subprocess.run(["gh", *args], capture_output=True, text=True, env=env, timeout=120)
    report[name] = {"code": done.returncode, "stdout": done.stdout, "stderr": done.stderr}


gh("issue", "issue", "create", "--repo", "acme/app", "--title", "Sealed credentials", "--body", "Filed by an agent")
for name in ["merge_approved", "merge_denied", "merge_timed_out"]:
    gh(name, "pr", "merge", "7", "--repo", "acme/app", "--merge")

with open("/proc/self/environ", "rb") as environ:
    report["environ"] = environ.read().decode(errors="replace")
with open(env["ATTACK_REPORT"], "w") as out:
    json.dump(report, out, indent=2)
