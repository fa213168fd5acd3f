"""The TLS serving shared by the launch tests' fake upstreams (fake_github.py, fake_s3.py): a
threading HTTP server on an ephemeral loopback port, its port printed first, then served until
killed."""

import http.server
import ssl


def serve_forever(handler, cert, key):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print(server.server_address[1], flush=True)
    server.serve_forever()
