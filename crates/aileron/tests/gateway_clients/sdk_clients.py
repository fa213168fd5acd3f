"""The official OpenAI and Anthropic Python SDKs as clients of Aileron's LLM gateway.

Usage: sdk_clients.py NAME=BASE_URL [NAME=BASE_URL ...]
       sdk_clients.py --errors BASE_URL

With --errors it makes each kind of call (streaming and not) against a gateway that refuses
them and prints, per call, the status code, error type and message the SDK raised.

For each base URL (the scripted upstream directly, and the same upstream through the gateway)
it makes three streaming calls with tools: Anthropic Messages, OpenAI Chat Completions and
OpenAI Responses. It prints one JSON object {NAME: summary}, where a summary is what the SDK
parsed: event types and order, text, streamed tool calls with their arguments decoded, stop
reasons and usage. The Rust test (tests/it/gateway_clients.rs) checks the summaries are equal
and hold what the upstream sent.
"""

import json
import sys

import anthropic
import openai

TOOL_SCHEMA = {
    "type": "object",
    "properties": {"owner": {"type": "string"}, "state": {"type": "string"}},
    "required": ["owner"],
}
PROMPT = "list my open issues"


def anthropic_messages(base_url):
    client = anthropic.Anthropic(base_url=base_url, api_key="sk-ant-test-key", max_retries=0)
    with client.messages.stream(
        model="claude-test",
        max_tokens=256,
        messages=[{"role": "user", "content": PROMPT}],
        tools=[{"name": "list_issues", "description": "List issues", "input_schema": TOOL_SCHEMA}],
    ) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_message()
    content = []
    for block in final.content:
        if block.type == "text":
            content.append({"type": "text", "text": block.text})
        elif block.type == "tool_use":
            content.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
    return {
        "events": events,
        "id": final.id,
        "content": content,
        "stop_reason": final.stop_reason,
        "usage": {"input_tokens": final.usage.input_tokens, "output_tokens": final.usage.output_tokens},
    }


def openai_chat(base_url):
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="sk-test-key", max_retries=0)
    stream = client.chat.completions.create(
        model="gpt-test",
        messages=[{"role": "user", "content": PROMPT}],
        tools=[{"type": "function", "function": {"name": "list_issues", "parameters": TOOL_SCHEMA}}],
        stream=True,
    )
    chunks, text, calls, finish_reason = 0, "", {}, None
    for chunk in stream:
        chunks += 1
        for choice in chunk.choices:
            delta = choice.delta
            text += delta.content or ""
            for call in delta.tool_calls or []:
                entry = calls.setdefault(call.index, {"id": None, "name": "", "arguments": ""})
                entry["id"] = call.id or entry["id"]
                if call.function is not None:
                    entry["name"] += call.function.name or ""
                    entry["arguments"] += call.function.arguments or ""
            finish_reason = choice.finish_reason or finish_reason
    tool_calls = [
        {"id": c["id"], "name": c["name"], "arguments": json.loads(c["arguments"])} for _, c in sorted(calls.items())
    ]
    return {"chunks": chunks, "text": text, "tool_calls": tool_calls, "finish_reason": finish_reason}


def openai_responses(base_url):
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="sk-test-key", max_retries=0)
    stream = client.responses.create(
        model="gpt-test",
        input=PROMPT,
        tools=[{"type": "function", "name": "list_issues", "parameters": TOOL_SCHEMA, "strict": False}],
        stream=True,
    )
    events, text, arguments, final = [], "", "", None
    for event in stream:
        events.append([event.type, event.sequence_number])
        if event.type == "response.output_text.delta":
            text += event.delta
        elif event.type == "response.function_call_arguments.delta":
            arguments += event.delta
        elif event.type == "response.completed":
            final = event.response
    output = []
    for item in final.output:
        if item.type == "function_call":
            output.append({"type": item.type, "name": item.name, "call_id": item.call_id, "arguments": json.loads(item.arguments)})
        elif item.type == "message":
            output.append({"type": item.type, "text": "".join(part.text for part in item.content)})
    return {
        "events": events,
        "streamed_text": text,
        "streamed_arguments": json.loads(arguments),
        "status": final.status,
        "output": output,
        "output_text": final.output_text,
    }


def surfaced_errors(base_url):
    """What each SDK raises when the gateway refuses (e.g. 423 while the vault is locked)."""
    ant = anthropic.Anthropic(base_url=base_url, api_key="sk-ant-test-key", max_retries=0)
    oai = openai.OpenAI(base_url=base_url + "/v1", api_key="sk-test-key", max_retries=0)
    messages = [{"role": "user", "content": PROMPT}]
    calls = {
        "anthropic_messages": lambda: ant.messages.create(model="claude-test", max_tokens=16, messages=messages),
        "anthropic_stream": lambda: list(ant.messages.create(model="claude-test", max_tokens=16, messages=messages, stream=True)),
        "openai_chat": lambda: oai.chat.completions.create(model="gpt-test", messages=messages),
        "openai_chat_stream": lambda: list(oai.chat.completions.create(model="gpt-test", messages=messages, stream=True)),
        "openai_responses": lambda: oai.responses.create(model="gpt-test", input=PROMPT),
    }
    surfaced = {}
    for name, call in calls.items():
        try:
            call()
            surfaced[name] = {"raised": False}
        except (anthropic.APIStatusError, openai.APIStatusError) as error:
            body = error.body if isinstance(error.body, dict) else {}
            inner = body.get("error", body) if isinstance(body, dict) else {}
            surfaced[name] = {
                "raised": True,
                "status_code": error.status_code,
                "message": str(error),
                "type": inner.get("type") if isinstance(inner, dict) else None,
            }
    return surfaced


def main():
    if sys.argv[1:2] == ["--errors"]:
        json.dump(surfaced_errors(sys.argv[2]), sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
        return
    summaries = {}
    for argument in sys.argv[1:]:
        name, base_url = argument.split("=", 1)
        summaries[name] = {
            "anthropic_messages": anthropic_messages(base_url),
            "openai_chat": openai_chat(base_url),
            "openai_responses": openai_responses(base_url),
        }
    json.dump(summaries, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
