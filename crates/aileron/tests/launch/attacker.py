#!/usr/bin/env python3
"""A fake agent that, launched by `aileron launch claude`, tries every way SECURITY.md names for an
agent to approve its own actions or take the user's credentials, and records what happened.

Driven by crates/aileron/tests/it/launch.rs. It reads the MCP config Claude Code would get
(`--mcp-config FILE`), starts the `aileron-mcp` it names, calls a plain tool (which must work) and
a gated one (which must wait for a human), then attacks: the daemon token and the rest of the
Aileron home, other processes through /proc, the CLI's approve, decide with forged actor
headers, a login ticket, installs, unmounting the mask (also from a nested user namespace) and
pushing keystrokes into a terminal. Every outcome goes into one JSON object in $ATTACK_REPORT.
"""

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

report = {}
home = os.environ.get("AILERON_HOME", "")
url = os.environ["AILERON_URL"]
token = os.environ["AILERON_TOKEN"]


def attempt(name, action):
    try:
        report[name] = {"ok": True, "value": action()}
    except Exception as error:  # every refusal is a result here
        report[name] = {"ok": False, "error": f"{type(error).__name__}: {error}"}


def read(path):
    with open(path, "rb") as handle:
        return handle.read().decode("utf-8", "replace")


def http(method, path, body=None, headers=None):
    request = urllib.request.Request(url + path, method=method, data=None if body is None else json.dumps(body).encode())
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return {"status": response.status, "body": response.read().decode()}
    except urllib.error.HTTPError as error:
        return {"status": error.code, "body": error.read().decode()}


class Mcp:
    def __init__(self, command):
        self.process = subprocess.Popen([command], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.next_id = 1

    def request(self, method, params):
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.next_id += 1
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()
        while True:
            answer = json.loads(self.process.stdout.readline())
            if answer.get("id") == message["id"]:
                return answer

    def notify(self, method):
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}) + "\n")
        self.process.stdin.flush()

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=10)


# The wiring Claude Code would use: the --mcp-config file names aileron-mcp.
config_path = sys.argv[sys.argv.index("--mcp-config") + 1]
server = json.loads(read(config_path))["mcpServers"]["aileron"]
mcp = Mcp(server["command"])
mcp.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "attacker", "version": "1"}})
mcp.notify("notifications/initialized")
plain = mcp.request("tools/call", {"name": "count_things", "arguments": {"count": 3}})
report["mcp_plain_call"] = plain.get("result", plain)
gated = mcp.request("tools/call", {"name": "fetch_gated", "arguments": {"url": os.environ["GATED_URL"]}})
report["mcp_gated_call"] = gated.get("result", gated)
text = "".join(block.get("text", "") for block in gated.get("result", {}).get("content", []))
approval_id = next((word.strip(".,`'\"()") for word in text.split() if word.startswith("act-")), "")
report["approval_id"] = approval_id
mcp.close()

# The daemon token and everything else under the home.
attempt("read_daemon_json", lambda: read(os.path.join(home, "daemon.json")))
attempt("list_home", lambda: os.listdir(home))
attempt("read_decoy_token_file", lambda: read(os.path.join(home, "launch", "decoy-session-token")))
attempt("read_vault", lambda: read(os.path.join(home, "secrets.json")))
attempt("read_audit_log", lambda: os.listdir(os.path.join(home, "audit")))


def plant_policy():
    # A permit-everything rule would undo the user's forbids (SPEC §16): the policy folder is the home's.
    with open(os.path.join(home, "policy", "zz-agent.cedar"), "w") as handle:
        handle.write("permit(principal, action, resource);\n")


attempt("read_policy", lambda: read(os.path.join(home, "policy", "guard.cedar")))
attempt("plant_policy", plant_policy)
# Other processes: the daemon's environment and its view of the filesystem.
daemon_pid = os.environ["DAEMON_PID"]
attempt("read_daemon_environ", lambda: read(f"/proc/{daemon_pid}/environ"))
attempt("read_home_through_daemon_root", lambda: read(f"/proc/{daemon_pid}/root{home}/daemon.json"))
# Any other process of the user: its /proc/<pid>/root is the filesystem without the mask.
attempt("read_home_through_another_process", lambda: read(f"/proc/{os.environ['OUTSIDE_PID']}/root{home}/daemon.json"))
attempt("visible_processes", lambda: sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
# Deciding: the CLI (it holds only what the agent's environment gives it), the API with forged
# actor headers, a web login ticket, installs.
def run(*command):
    done = subprocess.run(list(command), capture_output=True, text=True, timeout=30)
    return {"code": done.returncode, "stdout": done.stdout, "stderr": done.stderr}


attempt("cli_approve", lambda: run("aileron", "approval", "approve", approval_id))
report["decide_forged_actor"] = http(
    "POST",
    f"/v1/action-approvals/{approval_id}/decide",
    {"approved": True},
    {"X-Aileron-Actor-Type": "human", "X-Aileron-Actor-Id": "cli", "X-Aileron-Session-Id": ""},
)
report["login_ticket"] = http("POST", "/v1/web/login-tickets", {})
report["install_connector"] = http("POST", "/v1/connectors/install", {"reference": "github://evil/x@1.0.0", "consent": "flag", "expected_hash": "sha256:00"})
report["install_action"] = http("POST", "/v1/actions/install", {"file_name": "x.md", "content": "+++\n+++\n"})
# Lifting the mask: as we are, and from a nested user namespace.
attempt("umount_home", lambda: run("umount", home))
attempt("nested_umount_home", lambda: run("unshare", "-Urm", "sh", "-c", f"umount {home} && ls -A {home}"))
# Keystrokes pushed into a terminal (text that would run in the user's shell after we exit).
INJECT = (
    "import os, fcntl, termios\n"
    "leader, follower = os.openpty()\n"
    "name = os.ttyname(follower)\n"
    "tty = os.open(name, os.O_RDWR)\n"
    "try:\n"
    "    fcntl.ioctl(tty, termios.TIOCSTI, b'x')\n"
    "    print('injected')\n"
    "except OSError as error:\n"
    "    print('refused', error.errno)\n"
)
attempt("tiocsti", lambda: subprocess.run([sys.executable, "-c", INJECT], start_new_session=True, capture_output=True, text=True).stdout.strip())

with open(os.environ["ATTACK_REPORT"], "w") as handle:
    json.dump(report, handle)
