#!/usr/bin/env python3
"""A fake agent that, launched by `aileron launch claude`, tries every way around its network
namespace and at the user's credential stores (SPEC §15), and records what happened.

Driven by crates/aileron/tests/it/launch.rs. Targets come from the environment: a TCP and a UDP
canary on host loopback, an abstract and a path Unix socket of the host, a plain-HTTP upstream
the launch allowed with --allow-private, the daemon's port and the planted credential files.
Every outcome goes into one JSON object in $ATTACK_REPORT.
"""

import json
import os
import socket
import subprocess
import urllib.request

report = {}
env = os.environ


def attempt(name, action):
    try:
        report[name] = {"ok": True, "value": action()}
    except Exception as error:  # every refusal is a result here
        report[name] = {"ok": False, "error": f"{type(error).__name__}: {error}"}


def read(path):
    with open(path, "rb") as handle:
        return handle.read().decode("utf-8", "replace")


def tcp(host, port, family=socket.AF_INET):
    with socket.socket(family, socket.SOCK_STREAM) as connection:
        connection.settimeout(3)
        connection.connect((host, port))
        connection.sendall(b"REACHED\n")
        return "connected"


def udp(host, port):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as datagram:
        datagram.sendto(b"REACHED", (host, port))
        return "sent"


def unix(address):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(3)
        connection.connect(address)
        connection.sendall(b"REACHED\n")
        return "connected"


def proxy_connect(target, extra_headers=""):
    """One CONNECT through the session's proxy; returns its status line (and, when the tunnel
    opens, the first line of a plain HTTP request's answer through it)."""
    proxy = env["HTTPS_PROXY"].removeprefix("http://").rstrip("/")
    host, port = proxy.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{extra_headers}\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = connection.recv(1)
            if not chunk:
                break
            head += chunk
        status = head.split(b"\r\n", 1)[0].decode()
        if " 200 " not in status + " ":
            return status
        connection.sendall(f"GET /status/200?q=QUERY-SECRET HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while True:
            chunk = connection.recv(4096)
            if not chunk:
                break
            answer += chunk
        return status + " | " + answer.split(b"\r\n", 1)[0].decode()


def plain_proxy_request(url):
    """A plain-HTTP proxy request (absolute form), as a tool with `http_proxy` set sends one."""
    proxy = env["HTTP_PROXY"].removeprefix("http://").rstrip("/")
    host, port = proxy.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(f"GET {url} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        answer = connection.recv(4096)
        return int(answer.split(b" ", 2)[1])


def read_api_health():
    with urllib.request.urlopen(env["AILERON_URL"] + "/v1/health", timeout=5) as response:
        return response.status


# The user's credential stores: hidden (an empty directory, or an empty file).
for name, path in json.loads(env["CREDENTIAL_FILES"]).items():
    attempt("read_" + name, lambda path=path: read(path))
attempt("list_aws", lambda: os.listdir(os.path.expanduser("~/.aws")))
# The user's credential variables: withheld, but for the one the launch exposed.
report["credential_variables"] = {name: env.get(name) for name in ["GH_TOKEN", "AWS_SECRET_ACCESS_KEY", "NPM_TOKEN"]}

# Out of the namespace without the proxy.
canary_port = int(env["CANARY_PORT"])
attempt("tcp_host_loopback", lambda: tcp("127.0.0.1", canary_port))
attempt("tcp_daemon_port_is_the_sessions_own", lambda: read_api_health())
attempt("tcp_public", lambda: tcp("1.1.1.1", 443))
attempt("tcp6_loopback", lambda: tcp("::1", canary_port, socket.AF_INET6))
attempt("tcp6_public", lambda: tcp("2606:4700:4700::1111", 443, socket.AF_INET6))
attempt("udp_host_loopback", lambda: udp("127.0.0.1", int(env["UDP_CANARY_PORT"])))
attempt("dns", lambda: socket.getaddrinfo("example.com", 443))
attempt("abstract_unix", lambda: unix("\0" + env["ABSTRACT_SOCKET"]))
attempt("path_unix", lambda: unix(env["PATH_SOCKET"]))
attempt("path_unix_spaced", lambda: unix(env["SPACED_SOCKET"]))
# The seventh re-attack: a host process's socket inside the workspace (a dev server's).
attempt("path_unix_in_workspace", lambda: unix(env["WORKSPACE_SOCKET"]))


def datagram(address):
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
        return sender.sendto(b"DATAGRAM-FROM-THE-AGENT", address)


attempt("datagram_unix", lambda: datagram(env["DATAGRAM_SOCKET"]))
attempt("proc_net_tcp", lambda: read("/proc/net/tcp"))
attempt("proc_net_unix", lambda: read("/proc/net/unix"))

# Through the proxy.
upstream = env["ALLOWED_UPSTREAM"]
daemon_port = env["DAEMON_PORT"]
attempt("connect_allowed_private", lambda: proxy_connect(upstream))
attempt("connect_private", lambda: proxy_connect(f"127.0.0.1:{canary_port}"))
attempt("connect_name_of_loopback", lambda: proxy_connect(f"localhost:{canary_port}"))
attempt("connect_daemon_host_port", lambda: proxy_connect(f"127.0.0.1:{daemon_port}"))
attempt("connect_metadata", lambda: proxy_connect("169.254.169.254:80"))
attempt("connect_rfc1918", lambda: proxy_connect("10.0.0.1:80"))
attempt("connect_ula", lambda: proxy_connect("[fd00::1]:443"))
attempt(
    "connect_forged_credentials",
    lambda: proxy_connect(f"127.0.0.1:{canary_port}", "Proxy-Authorization: Basic YWRtaW46YWRtaW4=\r\n"),
)
attempt("plain_http_through_proxy", lambda: plain_proxy_request(f"http://{upstream}/status/200"))

# A real tool through the proxy (curl tunnels when asked to; NO_PROXY would send it direct).
curl = subprocess.run(
    ["curl", "-sS", "--noproxy", "", "--proxytunnel", "-x", env["HTTPS_PROXY"], "-o", "/dev/null", "-w", "%{http_code}",
     f"http://{upstream}/status/200?q=QUERY-SECRET"],
    capture_output=True, text=True, timeout=30,
)
report["curl_through_proxy"] = {"code": curl.returncode, "stdout": curl.stdout, "stderr": curl.stderr}
report["proxy_env"] = {name: env.get(name) for name in ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "NO_PROXY"]}


with open(env["ATTACK_REPORT"], "w") as out:
    json.dump(report, out, indent=2)
