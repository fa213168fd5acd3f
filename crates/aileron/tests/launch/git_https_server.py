#!/usr/bin/env python3
"""A real git smart-HTTP server over TLS for the launch tests: `git http-backend` (git's own CGI
program) behind Python's HTTP server, one thread per connection.

Usage: git_https_server.py CERT KEY PROJECT_ROOT PORT_FILE. Listens on 127.0.0.1, writes its port
to PORT_FILE once ready, logs each request line to stderr, serves until killed. With
GIT_PUSH_AUTHORIZATION set, a push (git-receive-pack) is served only to a request carrying exactly
that Authorization header (as GitHub takes `Basic base64(x-access-token:TOKEN)`); others get 401.
"""

import http.server
import os
import ssl
import subprocess
import sys

cert, key, root, port_file = sys.argv[1:5]
backend = os.path.join(subprocess.run(["git", "--exec-path"], capture_output=True, text=True).stdout.strip(),
                       "git-http-backend")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def run_backend(self):
        path, _, query = self.path.partition("?")
        pushing = path.endswith("/git-receive-pack") or "service=git-receive-pack" in query
        expected = os.environ.get("GIT_PUSH_AUTHORIZATION")
        remote_user = {}
        if pushing and expected:
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            remote_user = {"REMOTE_USER": "pusher"}
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        env = dict(os.environ, GIT_PROJECT_ROOT=root, GIT_HTTP_EXPORT_ALL="1", PATH_INFO=path,
                   REQUEST_METHOD=self.command, QUERY_STRING=query,
                   CONTENT_TYPE=self.headers.get("Content-Type", ""), CONTENT_LENGTH=str(len(body)),
                   REMOTE_ADDR="127.0.0.1", **remote_user)
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        output = subprocess.run([backend], input=body, env=env, capture_output=True).stdout
        head, _, content = output.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    do_GET = run_backend
    do_POST = run_backend


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
with open(port_file + ".tmp", "w") as out:
    out.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
