#!/usr/bin/env python3
"""A fake agent that, launched by `aileron launch claude --approval-hold 3`, sends requests that
match `approval = true` operations, the way `gh pr merge` and `gh repo delete` would. The test
decides them from outside (approve, deny, late); markers in $SHARED_DIR order the late approval.
Driven by crates/aileron/tests/it/launch.rs; every outcome goes into $ATTACK_REPORT.
"""

import json
import os
import subprocess
import threading
import time

env = os.environ
upstream, shared = env["UPSTREAM"], env["SHARED_DIR"]
report = {}


def at_once(requests):
    """Sends `requests` (method, path, body) together; their outcomes in order."""
    outcomes = [None] * len(requests)

    def send(index):
        outcomes[index] = curl(*requests[index])

    threads = [threading.Thread(target=send, args=(index,)) for index in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def curl(method, path, data=None):
    command = ["curl", "-sS", "--noproxy", "", "-x", env["HTTPS_PROXY"], "-X", method, "-o", "-", "-w", "\n%{http_code}",
               "-H", f"Authorization: token {env.get('GH_TOKEN', '')}", f"https://{upstream}{path}"]
    if data is not None:
        command[1:1] = ["--data", data]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    body, _, status = done.stdout.rpartition("\n")
    try:
        body = json.loads(body)
    except ValueError:
        pass
    return {"status": status, "body": body}


# Approved while it waits: forwarded once, with the credential.
report["approved"] = curl("PUT", "/repos/acme/app/pulls/7/merge", '{"merge_method":"squash"}')
# Denied while it waits.
report["denied"] = curl("DELETE", "/repos/acme/app")
# Nobody decides in time: approval_pending, with where the user decides.
report["late"] = curl("PUT", "/repos/acme/app/pulls/8/merge", '{"merge_method":"merge"}')
open(os.path.join(shared, "late-pending"), "w").close()
deadline = time.time() + 30
while not os.path.exists(os.path.join(shared, "late-approved")) and time.time() < deadline:
    time.sleep(0.05)
# The identical request after the late approval: goes once. A different body is another request.
report["retry_other_body"] = curl("PUT", "/repos/acme/app/pulls/8/merge", '{"merge_method":"rebase"}')
report["retry"] = curl("PUT", "/repos/acme/app/pulls/8/merge", '{"merge_method":"merge"}')
report["retry_again"] = curl("PUT", "/repos/acme/app/pulls/8/merge", '{"merge_method":"merge"}')
# Two identical requests at once: one approval, one request forwarded.
report["concurrent"] = at_once([("PUT", "/repos/acme/app/pulls/9/merge")] * 2)
# Six gated requests at once, each its own (another body): the proxy holds at most four bodies of
# one session in memory, so two of them wait for a slot before their own hold: with a 3 s hold the
# six take two rounds (6 s and more), not one; all six end pending.
started = time.time()
report["flood"] = at_once([("PUT", "/repos/acme/app/pulls/10/merge", f'{{"n":{i}}}') for i in range(6)])
report["flood_seconds"] = time.time() - started
# GraphQL: a query goes out at once; a document naming the gated mutation field waits (and is
# denied); a body that is not a GraphQL request is refused unread.
report["graphql_query"] = curl("POST", "/graphql", '{"query":"query { viewer { login } }"}')
report["graphql_merge"] = curl("POST", "/graphql",
                               '{"query":"mutation M { m: mergePullRequest(input: {pullRequestId: \\"1\\"}) { clientMutationId } }"}')
report["graphql_unreadable"] = curl("POST", "/graphql", "mergePullRequest, but not JSON")
# A document in the URL (a Rails server takes it over the body's, and answers a GET): refused unsent.
merge_in_url = "/graphql?qu%65ry=mutation%7BmergePullRequest(input:%7BpullRequestId:%221%22%7D)%7Bx%7D%7D"
report["graphql_in_url_post"] = curl("POST", merge_in_url, '{"query":"query { viewer { login } }"}')
report["graphql_in_url_get"] = curl("GET", merge_in_url)
# The agent's own session token cannot decide its approvals.
pending_id = report["late"]["body"]["error"]["approval_id"] if isinstance(report["late"]["body"], dict) else "x"
decide = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
                         "-H", f"Authorization: Bearer {env['AILERON_TOKEN']}", "-H", "content-type: application/json",
                         "--data", '{"approved": true}', f"{env['AILERON_URL']}/v1/action-approvals/{pending_id}/decide"],
                        capture_output=True, text=True, timeout=30)
report["self_decide"] = decide.stdout

with open(env["ATTACK_REPORT"], "w") as out:
    json.dump(report, out, indent=2)
