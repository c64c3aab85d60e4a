"""An MCP server written by hand, line by line, to answer what no SDK server would: its handshake
and tool listing are valid, its tool results are not. ``python raw.py``; the tools:
``bad_shape`` answers a result without ``content``, ``wrong_id`` answers another request's id
(so the real one is never answered), ``bad_json`` answers half a JSON object, ``exit_after``
answers nothing and exits."""

import json
import sys

TOOLS = [{"name": n, "description": n, "inputSchema": {"type": "object", "properties": {}}}
         for n in ("ok", "bad_shape", "wrong_id", "bad_json", "exit_after")]


def send(message) -> None:
    sys.stdout.write((message if isinstance(message, str) else json.dumps(message)) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:  # a notification
        continue
    rid, method = msg["id"], msg.get("method")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw", "version": "0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        name = msg["params"]["name"]
        if name == "ok":
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "fine"}]}})
        elif name == "bad_shape":
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": "not a list", "isError": "maybe"}})
        elif name == "wrong_id":
            send({"jsonrpc": "2.0", "id": 987654, "result": {"content": []}})
        elif name == "bad_json":
            send('{"jsonrpc": "2.0", "id": ' + json.dumps(rid) + ', "result": {"content": [')
        elif name == "exit_after":
            sys.exit(0)
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no {method}"}})
