#!/usr/bin/env python3
"""A fake agent that, launched by `aileron launch claude`, reaches HTTPS upstreams through its
session's egress proxy with real clients and their default certificate checks (no -k, no
insecure flags): curl, Python's urllib and `requests`, Node's tls and fetch, the AWS CLI, and `git clone` over https from
a real smart-HTTP server. Driven by
crates/aileron/tests/it/launch.rs; every outcome goes into one JSON object in $ATTACK_REPORT.

The upstreams are on host loopback (`localhost:PORT`, allowed with --allow-private), and
`localhost` is in NO_PROXY, so each client is told to use the proxy anyway.
"""

import json
import os
import subprocess
import urllib.request

env = os.environ
report = {"env": {name: env.get(name) for name in ["SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO"]}}
trusted, untrusted = env["TRUSTED_UPSTREAM"], env["UNTRUSTED_UPSTREAM"]


def run(name, command, **extra):
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, **extra)
    report[name] = {"code": done.returncode, "stdout": done.stdout[-2000:], "stderr": done.stderr[-2000:]}


curl = ["curl", "-sS", "--noproxy", "", "-x", env["HTTPS_PROXY"]]
run("curl", curl + [f"https://{trusted}/curl?secret=QUERY-SECRET"])
run("curl_h2", curl + ["--http2", "-o", "/dev/null", "-w", "%{http_version}", f"https://{trusted}/h2"])
run("curl_h2_upstream", curl + ["--http2", f"https://{env['H2_UPSTREAM']}/h2-upstream"])
# A second curl process to the same upstream: its tunnel shares the first one's upstream connection.
run("curl_h2_upstream_again", curl + ["--http2", f"https://{env['H2_UPSTREAM']}/h2-again"])
run("curl_untrusted_upstream", curl + ["-o", "/dev/null", "-w", "%{http_code}", f"https://{untrusted}/bad"])
run("curl_with_only_its_default_bundle", curl + ["--cacert", "/etc/ssl/certs/ca-certificates.crt", f"https://{trusted}/bundle"])

# Python: the https_proxy variable, the default SSL context (OpenSSL's default paths).
for name in ["no_proxy", "NO_PROXY"]:
    env.pop(name, None)
try:
    with urllib.request.urlopen(f"https://{trusted}/python", timeout=30) as response:
        report["python"] = {"status": response.status, "body": response.read().decode()}
except Exception as error:
    report["python"] = {"error": f"{type(error).__name__}: {error}"}

# Node: CONNECT through the proxy, then tls.connect on that socket with its default checks
# (Node's own roots plus NODE_EXTRA_CA_CERTS).
node = r"""
const http = require('http'), tls = require('tls');
const proxy = new URL(process.env.HTTPS_PROXY);
const [host, port] = process.argv[1].split(':');
http.request({host: proxy.hostname, port: proxy.port, method: 'CONNECT', path: `${host}:${port}`})
  .on('connect', (res, socket) => {
    const secure = tls.connect({socket, servername: host}, () => {
      secure.write(`GET /node HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    });
    let answer = '';
    secure.on('data', d => answer += d).on('end', () => { console.log(answer.split('\r\n')[0]); });
    secure.on('error', e => { console.log('error ' + e.message); process.exit(1); });
  }).on('error', e => { console.log('error ' + e.message); process.exit(1); }).end();
"""
run("node", ["node", "-e", node, trusted])

# Node fetch (undici): it ignores the proxy variables unless NODE_USE_ENV_PROXY is set (Node
# 22.21 and later; the launcher sets it), and trusts NODE_EXTRA_CA_CERTS.
fetch = r"""
fetch(process.argv[1]).then(async r => console.log(r.status, await r.text()))
  .catch(e => { console.log('error ' + (e.cause ? e.cause.message : e.message)); process.exit(1); });
"""
run("node_fetch", [os.path.join(env["NODE22_BIN"], "node"), "-e", fetch, f"https://{trusted}/fetch"])

# The AWS CLI (botocore: HTTPS_PROXY, AWS_CA_BUNDLE): a signed S3 ListBuckets to the endpoint.
# The fake answers JSON, which botocore cannot parse as S3's XML: what counts is that the signed
# request reached the upstream through the proxy with its TLS verified.
aws_env = dict(env, AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="not-a-real-key", AWS_CONFIG_FILE="/dev/null")
aws = [os.path.join(os.path.dirname(env["VENV_PYTHON"]), "aws"), "s3api", "list-buckets", "--region", "us-east-1"]
run("aws", aws + ["--endpoint-url", f"https://{trusted}"], env=aws_env)

# Python requests: its own certifi bundle unless REQUESTS_CA_BUNDLE says otherwise.
requests_script = "import requests, sys; r = requests.get(sys.argv[1], timeout=30); print(r.status_code, r.text)"
run("python_requests", [env["VENV_PYTHON"], "-c", requests_script, f"https://{trusted}/requests"])

# git over https (libcurl: GIT_SSL_CAINFO, and the system bundle path).
clone = os.path.join(env.get("TMPDIR", "/tmp"), "clone")
run("git_clone", ["git", "clone", "-q", f"https://{env['GIT_UPSTREAM']}/repo.git", clone])
if os.path.exists(os.path.join(clone, "README")):
    with open(os.path.join(clone, "README")) as readme:
        report["git_clone"]["readme"] = readme.read().strip()

with open(env["ATTACK_REPORT"], "w") as out:
    json.dump(report, out, indent=2)
