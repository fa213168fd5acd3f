"""A second, independent MCP client for the Aileron servers: the official Python SDK (PyPI `mcp`).

Driven by crates/aileron/tests/it/mcp.rs. It connects over stdio (spawning aileron-mcp) or
streamable HTTP (the daemon's /mcp with a bearer token), lists the tools, optionally calls one,
and prints one JSON object on stdout for the Rust test to check:
  {"protocol_version", "tools": [{name, description, inputSchema}], "call": {is_error, texts}}

usage: python_client.py (--stdio CMD | --url URL --token TOKEN) [--mode auto|legacy]
                        [--call TOOL --arguments JSON]

Any warning the SDK (or Python) raises while doing so, a logged one such as "Session termination
failed: 202" included, makes it exit 1 after printing them: a clean session has none.
"""

import argparse
import asyncio
import json
import logging
import os
import sys

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


def transport(args):
    if args.stdio:
        # The SDK passes only a few variables (HOME, PATH, ...) to the server; an agent host's
        # MCP config names the ones it needs, as this does.
        env = {name: value for name, value in os.environ.items() if name.startswith("AILERON_")}
        return StdioServerParameters(command=args.stdio, args=[], env=env)
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {args.token}"},
        timeout=httpx2.Timeout(30.0, read=300.0),
    )
    return streamable_http_client(args.url, http_client=http)


async def main(args):
    report = {}
    async with Client(transport(args), mode=args.mode, cache=None) as client:
        report["protocol_version"] = client.protocol_version
        listed = await client.list_tools()
        report["tools"] = [
            {"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema}
            for tool in listed.tools
        ]
        if args.call:
            result = await client.call_tool(args.call, json.loads(args.arguments))
            report["call"] = {
                "is_error": bool(result.is_error),
                "texts": [block.text for block in result.content if getattr(block, "type", "") == "text"],
            }
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")


class WarningRecorder(logging.Handler):
    """Keeps every record at WARNING or above, from any logger (Python warnings included)."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(f"{record.name}: {record.getMessage()}")


if __name__ == "__main__":
    recorder = WarningRecorder()
    logging.getLogger().addHandler(recorder)
    logging.captureWarnings(True)
    parser = argparse.ArgumentParser()
    parser.add_argument("--stdio")
    parser.add_argument("--url")
    parser.add_argument("--token")
    parser.add_argument("--mode", default="auto")
    parser.add_argument("--call")
    parser.add_argument("--arguments", default="{}")
    asyncio.run(main(parser.parse_args()))
    if recorder.records:
        print("warnings during the session:\n" + "\n".join(recorder.records), file=sys.stderr)
        sys.exit(1)
