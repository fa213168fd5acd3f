#!/usr/bin/env python3
"""A fake agent for the leak scan of sealed credentials: launched by `aileron launch claude`, it
sends $SECRETS requests through its session's proxy on one kept-alive tunnel (Python's own
http.client and ssl, trusting the session's CA through SSL_CERT_FILE), each after the test has
bound the next planted secret ($SHARED_DIR/go-N), with the placeholder it holds in GH_TOKEN.
Every byte it receives (status line, headers, body) is appended to $RECEIVED, and its whole
readable memory is written to $MEMORY at the end; the test searches both for every secret. Driven by crates/aileron/tests/it/leaks.rs.
"""

import http.client
import os
import ssl
import time
import urllib.parse

env = os.environ
shared, count = env["SHARED_DIR"], int(env["SECRETS"])
proxy = urllib.parse.urlsplit(env["HTTPS_PROXY"])
host, port = env["UPSTREAM"].rsplit(":", 1)


def connect():
    connection = http.client.HTTPSConnection(proxy.hostname, proxy.port, context=ssl.create_default_context(), timeout=60)
    connection.set_tunnel(host, int(port))
    return connection


connection = connect()
with open(env["RECEIVED"], "ab") as received:
    for index in range(count):
        go = os.path.join(shared, f"go-{index}")
        deadline = time.time() + 60
        while not os.path.exists(go) and time.time() < deadline:
            time.sleep(0.002)
        # Every tenth answer is large, so echoes cross the proxy's read boundaries.
        path = f"/big/{index}" if index % 10 == 9 else f"/echo/{index}"
        # Asking for gzip, as a content coding and as a transfer coding: a compressed echo would
        # pass a byte-for-byte redaction unseen.
        headers = {"Authorization": f"token {env.get('GH_TOKEN', '')}", "Accept-Encoding": "gzip", "TE": "gzip"}
        try:
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
        except (http.client.HTTPException, OSError):
            # The upstream closed the kept-alive tunnel: a new one.
            connection = connect()
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
        body = response.read()
        head = f"HTTP {response.status}\n" + "".join(f"{name}: {value}\n" for name, value in response.getheaders())
        received.write(head.encode() + body + b"\n")
        received.flush()
        open(os.path.join(shared, f"done-{index}"), "w").close()
    with open("/proc/self/environ", "rb") as environ:
        received.write(environ.read())

# This process's whole readable memory, after every answer went through it: $MEMORY.
with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as memory, open(env["MEMORY"], "wb") as out:
    for line in maps.read().splitlines():
        fields = line.split()
        if "r" not in fields[1] or (len(fields) > 5 and fields[5] in ("[vvar]", "[vsyscall]", "[vvar_vclock]")):
            continue
        start, end = (int(value, 16) for value in fields[0].split("-"))
        try:
            memory.seek(start)
            out.write(memory.read(end - start))
        except (OSError, ValueError, OverflowError):
            pass
