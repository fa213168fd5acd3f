#!/usr/bin/env python3
"""A fake S3 and STS over TLS that checks every request's SigV4 signature the way AWS does, with
botocore (an implementation independent of Aileron's) and the keys the test bound in the vault: a
request signed with anything else (the placeholder keys a launched agent holds) is refused 403
SignatureDoesNotMatch. A stated hex `x-amz-content-sha256` must match the body. STS answers
GetCallerIdentity (`POST /`, service `sts`).

Usage: fake_s3.py CERT KEY ACCESS_KEY_ID SECRET LOG. Prints its port, then serves until killed;
each request is one JSON line in LOG (method, path, key id, verdict), never the secret.
"""

import hashlib
import http.server
import json
import re
import sys

from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

import tls_server

cert, key, access_key_id, secret, log_path = sys.argv[1:6]
LIST = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListAllMyBucketsResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        "<Owner><ID>owner</ID></Owner><Buckets><Bucket><Name>sealed-bucket</Name>"
        "<CreationDate>2026-01-01T00:00:00.000Z</CreationDate></Bucket></Buckets></ListAllMyBucketsResult>")


IDENTITY = ("<GetCallerIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><GetCallerIdentityResult>"
            "<Arn>arn:aws:iam::123456789012:user/sealed</Arn><UserId>AIDASEALED</UserId><Account>123456789012</Account>"
            "</GetCallerIdentityResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata>"
            "</GetCallerIdentityResponse>")


def verdict(method, path, headers, body):
    authorization = headers.get("authorization", "")
    found = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                         r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})", authorization)
    if not found:
        return None, "no SigV4 authorization", None
    key_id, _, region, service, signed_headers, signature = found.groups()
    expected_service = "sts" if headers.get("host", "").startswith("sts.") else "s3"
    if service != expected_service:
        return key_id, f"signed for {service}, not {expected_service}", None
    if key_id != access_key_id:
        return key_id, "unknown access key id", None
    request = AWSRequest(method=method, url=f"https://{headers['host']}{path}",
                         headers={name: headers[name] for name in signed_headers.split(";")}, data=body)
    request.context["timestamp"] = headers["x-amz-date"]
    signer = (S3SigV4Auth if service == "s3" else SigV4Auth)(Credentials(access_key_id, secret), service, region)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if expected != signature:
        return key_id, "signature does not match", None
    stated = headers.get("x-amz-content-sha256", "")
    if re.fullmatch(r"[0-9a-f]{64}", stated) and hashlib.sha256(body).hexdigest() != stated:
        return key_id, "body does not match x-amz-content-sha256", None
    return key_id, "ok", service


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self):
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                chunk = self.rfile.read(size)
                self.rfile.readline()
                if size == 0:
                    return data
                data += chunk
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def serve(self):
        body = self.body()
        headers = {name.lower(): value for name, value in self.headers.items()}
        key_id, outcome, service = verdict(self.command, self.path, headers, body)
        with open(log_path, "a") as log:
            entry = {"method": self.command, "path": self.path, "host": headers.get("host"), "service": service,
                     "key_id": key_id, "verdict": outcome}
            log.write(json.dumps(entry) + "\n")
        if outcome == "ok" and self.path.endswith("/echo"):
            # An answer that shows the request's signature, as S3's SignatureDoesNotMatch does.
            answer, status, extra = f"<Echo>{headers.get('authorization')}</Echo>", 200, {}
        elif outcome != "ok":
            answer, status, extra = f"<Error><Code>SignatureDoesNotMatch</Code><Message>{outcome}</Message></Error>", 403, {}
        elif service == "sts":
            answer, status, extra = IDENTITY, 200, {}
        elif self.command == "GET":
            answer, status, extra = LIST, 200, {}
        else:
            answer, status, extra = "", 200, {"ETag": f"\"{hashlib.md5(body).hexdigest()}\""}
        data = answer.encode()
        self.send_response(status)
        self.send_header("content-type", "application/xml")
        self.send_header("content-length", str(len(data)))
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = serve


tls_server.serve_forever(Handler, cert, key)
