#!/usr/bin/env python3
"""A fake GitHub over TLS (api.github.com's REST and GraphQL, as the GitHub CLI `gh` calls them)
that accepts only `Authorization: token TOKEN` with the token the test bound in the vault: a
request carrying anything else (the placeholder a launched agent holds) is answered 401 "Bad
credentials", as GitHub does.

Usage: fake_github.py CERT KEY TOKEN LOG. Prints its port, then serves until killed; each
request is one JSON line in LOG (method, path, GraphQL operation, whether the token was the bound
one), never the token itself.
"""

import http.server
import json
import re
import sys

import tls_server

cert, key, token, log_path = sys.argv[1:5]

REPOSITORY = {
    "id": "R_acme_app", "name": "app", "owner": {"login": "acme"}, "nameWithOwner": "acme/app",
    "url": "https://github.com/acme/app", "hasIssuesEnabled": True, "hasProjectsEnabled": False,
    "hasWikiEnabled": False, "viewerPermission": "ADMIN", "defaultBranchRef": {"name": "main"},
    "isPrivate": False, "isArchived": False, "isFork": False, "parent": None,
    "mergeCommitAllowed": True, "rebaseMergeAllowed": True, "squashMergeAllowed": True,
}
PULL_REQUEST = {
    "id": "PR_7", "number": 7, "title": "Sealed credentials", "state": "OPEN", "isDraft": False,
    "url": "https://github.com/acme/app/pull/7", "headRefName": "feature", "baseRefName": "main",
    "headRefOid": "0123456789abcdef0123456789abcdef01234567", "headRepositoryOwner": {"login": "acme"},
    "headRepository": {"id": "R_acme_app", "name": "app"}, "isCrossRepository": False,
    "mergeable": "MERGEABLE", "mergeStateStatus": "CLEAN", "isInMergeQueue": False,
    "isMergeQueueEnabled": False, "reviewDecision": "APPROVED",
    "commits": {"nodes": [{"commit": {"oid": "0123456789abcdef0123456789abcdef01234567"}}]},
}


def graphql(document):
    """What GitHub would answer `document` with, enough for `gh issue create` and `gh pr merge`."""
    if "createIssue" in document:
        issue = {"id": "I_1", "number": 1, "url": "https://github.com/acme/app/issues/1"}
        return {"createIssue": {"issue": issue}}
    if "mergePullRequest" in document:
        return {"mergePullRequest": {"clientMutationId": None}}
    data = {}
    if "repository(" in document:
        repository = dict(REPOSITORY)
        if "pullRequest(" in document:
            repository["pullRequest"] = PULL_REQUEST
        data["repository"] = repository
    if "viewer" in document:
        data["viewer"] = {"login": "octo", "id": "U_octo"}
    return data


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, value):
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def serve(self):
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        authorized = self.headers.get("authorization", "") == f"token {token}"
        document, operation = "", None
        if self.path == "/graphql" and body:
            document = json.loads(body).get("query", "")
            found = re.search(r"\b(query|mutation)\s+(\w+)", document)
            operation = found.group(2) if found else None
        with open(log_path, "a") as log:
            entry = {"method": self.command, "path": self.path, "operation": operation, "authorized": authorized}
            log.write(json.dumps(entry) + "\n")
        if not authorized:
            return self.answer(401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
        if self.path == "/graphql":
            return self.answer(200, {"data": graphql(document)})
        if self.path == "/user":
            return self.answer(200, {"login": "octo", "id": 1})
        return self.answer(404, {"message": "Not Found"})

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = serve


tls_server.serve_forever(Handler, cert, key)
