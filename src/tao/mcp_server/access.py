"""Who may use ``tao mcp serve --http``, and who answers its approvals.

- **Token.** Off localhost a bearer token is required (``tao mcp serve`` makes and prints one,
  or takes ``--token``); the SDK's own bearer middleware checks it (``StaticToken`` is its
  verifier, comparing in constant time), so a client without it gets 401 before any JSON-RPC is
  read. On localhost a token is optional.
- **Host and Origin.** Every bind, not only localhost as the SDK does by itself, checks the
  ``Host`` header against an allow-list (127.0.0.1, localhost, ::1, the bound address and any
  ``--allow-host``) and a browser's ``Origin`` against the same names: a web page reached
  through DNS rebinding is refused (421 / 403) even when it learnt the token.
- **Approval.** A served tool that needs approval (``--require-approval``, a tool's own mark)
  is asked of the calling client by MCP elicitation; a client that cannot be asked (no
  elicitation capability, a transport without a back channel) gets the call rejected, with the
  reason as its result. The operator's terminal is never asked: the server may have none, and
  over stdio its stdin is the protocol.
"""

from __future__ import annotations

import hmac
import socket
from collections.abc import Iterable
from contextvars import ContextVar
from typing import Any

from .. import prompts

LOCAL = ("127.0.0.1", "localhost", "::1")
WILDCARD = ("0.0.0.0", "::", "")
#: the session of the MCP request being served: whom ``ClientApprover`` asks
CALLER: ContextVar[Any] = ContextVar("tao_mcp_caller", default=None)


def is_local(host: str) -> bool:
    return host in LOCAL


class StaticToken:
    """The SDK's ``TokenVerifier`` for one shared bearer token."""

    def __init__(self, token: str):
        if not token:
            raise ValueError("the token is empty")
        self._token = token.encode()

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        if hmac.compare_digest(token.strip().encode(), self._token):
            return AccessToken(token="***", client_id="tao-token", scopes=[])
        return None


def allowed_names(host: str, extra: Iterable[str] = ()) -> list[str]:
    """The Host names a request may carry: this machine's loopback names, the bound address,
    ``extra``; on a wildcard bind also the machine's own name and the addresses it resolves to
    (what a peer on the network puts in ``Host``)."""
    names = [*LOCAL, *([] if host in WILDCARD else [host]), *extra]
    if host in WILDCARD:
        me = socket.gethostname()
        names.append(me)
        try:
            names += [info[4][0] for info in socket.getaddrinfo(me, None)]
        except OSError:  # a machine whose own name does not resolve: --allow-host says the rest
            pass
    return list(dict.fromkeys(n for n in names if n))


def transport_security(host: str, extra: Iterable[str] = ()) -> Any:
    """The SDK's Host/Origin check, on for every bind (the SDK turns it on for loopback only)."""
    from mcp.server.transport_security import TransportSecuritySettings

    hosts, origins = [], []
    for name in allowed_names(host, extra):
        shown = f"[{name}]" if ":" in name and not name.startswith("[") else name
        hosts += [shown, f"{shown}:*"]
        origins += [f"{scheme}://{shown}{port}" for scheme in ("http", "https")
                    for port in ("", ":*")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=origins)


def auth_settings(url: str) -> Any:
    """What the SDK needs to run its bearer middleware: the server is its own issuer (a shared
    token, no OAuth flow), with no protected-resource metadata to advertise."""
    from mcp.server.auth.settings import AuthSettings

    return AuthSettings(issuer_url=url, resource_server_url=None)


class ClientApprover:
    """Asks the MCP client that made the call, by elicitation (a yes/no form with a reason)."""

    by = "mcp-client"

    def __init__(self, lang: str = "en"):
        self.t = prompts.table("guard")["zh" if lang == "zh" else "en"]

    async def decide(self, requests: list[Any]) -> list[Any]:
        from ..guard.approval import Decision

        out = []
        for request in requests:
            session = CALLER.get()
            if session is None:
                out.append(Decision.reject(self.t["mcp_no_client"]))
                continue
            try:
                answer = await session.elicit_form(
                    prompts.render(self.t["mcp_ask"], tool=request.tool, reason=request.reason,
                                   arguments=_shown(request.arguments)),
                    {"type": "object", "properties": {
                        "approve": {"type": "boolean", "title": self.t["mcp_approve"]},
                        "reason": {"type": "string", "title": self.t["mcp_reason"]}},
                     "required": ["approve"]})
            except Exception as e:  # noqa: BLE001 - no elicitation, no back channel: not approved
                out.append(Decision.reject(prompts.render(self.t["mcp_cannot_ask"],
                                                          error=f"{type(e).__name__}: {e}")))
                continue
            content = getattr(answer, "content", None) or {}
            if getattr(answer, "action", "") == "accept" and content.get("approve") is True:
                out.append(Decision.approve())
            else:
                out.append(Decision.reject(str(content.get("reason") or "")
                                           or self.t["mcp_declined"]))
        return out


def _shown(arguments: Any) -> str:
    from ..safe_json import dumps

    text = dumps(arguments)
    return text if len(text) <= 2000 else text[:2000] + "…"


__all__ = ["CALLER", "ClientApprover", "LOCAL", "StaticToken", "allowed_names", "auth_settings",
           "is_local", "transport_security"]
