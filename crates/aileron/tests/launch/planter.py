#!/usr/bin/env python3
"""A fake agent that, launched by `aileron launch claude`, tries to leave something behind that
would run later as the user (the re-attack's H4: `aileron approval approve <id>` appended to
~/.bashrc approved the agent's own requests at the user's next shell), and checks that what an
agent needs to write still works. Every outcome goes into one JSON object in $PLANT_REPORT.

Driven by crates/aileron/tests/it/launch.rs (`a_launched_agent_writes_only_its_allow_list`).
"""

import json
import os
import subprocess

home = os.path.expanduser("~")
workspace = os.getcwd()
report = {}


def attempt(name, action):
    try:
        action()
        report[name] = "written"
    except OSError as error:
        report[name] = f"refused: {error.strerror}"


def append(path, text):
    def write():
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a") as handle:
            handle.write(text)
    return write


def run(*argv):
    def go():
        done = subprocess.run(argv, cwd=workspace, capture_output=True, text=True)
        if done.returncode != 0:
            raise OSError(done.returncode, (done.stderr or done.stdout).strip()[-300:])
    return go


approve = "aileron approval approve act-planted\n"
# Places that run as the user later.
attempt("bashrc", append(f"{home}/.bashrc", approve))
attempt("profile", append(f"{home}/.profile", approve))
attempt("bash_profile", append(f"{home}/.bash_profile", approve))
attempt("zshrc", append(f"{home}/.zshrc", approve))
attempt("local_bin_aileron", append(f"{home}/.local/bin/aileron", "#!/bin/sh\n" + approve))
attempt("cargo_bin_xdg_open", append(f"{home}/.cargo/bin/xdg-open", "#!/bin/sh\n" + approve))
attempt("autostart", append(f"{home}/.config/autostart/evil.desktop", "[Desktop Entry]\nExec=sh -c 'x'\n"))
attempt("systemd_unit", append(f"{home}/.config/systemd/user/evil.service", "[Service]\nExecStart=/bin/true\n"))
attempt("git_hook", append(f"{workspace}/.git/hooks/pre-commit", "#!/bin/sh\n" + approve))
attempt("git_config", append(f"{workspace}/.git/config", "[core]\n\thooksPath = /tmp/evil-hooks\n"))
attempt("git_config_by_git", run("git", "config", "core.fsmonitor", "sh -c x"))
attempt("git_dir_renamed", lambda: os.rename(f"{workspace}/.git", f"{workspace}/.git-old"))
attempt("outside_everything", append(os.environ["OUTSIDE_PATH"], "x"))
# What an agent needs.
attempt("workspace_file", append(f"{workspace}/notes.txt", "written by the agent\n"))
attempt("git_commit", run("git", "-c", "user.name=Agent", "-c", "user.email=agent@example.invalid", "commit", "-q", "--allow-empty", "-m", "agent"))
attempt("own_state", append(f"{home}/.claude/state.json", "{}"))
attempt("temp_dir", append(f"{os.environ['TMPDIR']}/scratch", "x"))
attempt("dev_null", append("/dev/null", "x"))
attempt("extra_writable", append(os.environ["EXTRA_PATH"] + "/granted.txt", "x"))

with open(os.environ["PLANT_REPORT"], "w") as handle:
    json.dump(report, handle)
