"""A bearer-token gate for the HTTP transport: a small ASGI middleware.

Anyone who can reach the port can make this machine run code (that is what an
evaluator does), so a server bound beyond localhost should demand a token.
Lifespan events pass through untouched: the MCP session manager starts there.
"""

from __future__ import annotations

import hmac
import json

from starlette.types import ASGIApp, Receive, Scope, Send


class BearerTokenMiddleware:
    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError("the bearer token must not be empty")
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and not self._authorized(scope):
            await self._refuse(send)
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                return hmac.compare_digest(value, self._expected)
        return False

    @staticmethod
    async def _refuse(send: Send) -> None:
        body = json.dumps({"error": "unauthorized: send 'Authorization: Bearer <token>'"}).encode()
        await send({
            "type": "http.response.start", "status": 401,
            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
                        (b"content-length", str(len(body)).encode())],
        })
        await send({"type": "http.response.body", "body": body})
