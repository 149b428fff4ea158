"""Request hygiene shared by both servers: valid Unicode and a bounded request body.

JSON may carry a lone surrogate (`"\\ud800"`) that Python decodes into a `str` no tokenizer or
encoder can take, which surfaced as a 500 deep in the model; `Text` rejects it at validation,
so the error is a 4xx naming the field. Starlette reads a request body whole, whatever its
size; `BodySizeLimit` answers 413 before more than the limit is held in memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send


def valid_unicode(text: str) -> str:
    """`text`, or a ValueError naming its first unpaired surrogate (no encoder takes one)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        raise ValueError(
            f"contains an unpaired surrogate (\\u{code:04x}) at character {exc.start}; "
            "text must be valid Unicode"
        ) from None
    return text


def _one_or_many(value: object) -> object:
    return [value] if isinstance(value, str) else value


# A string that is valid Unicode (encodable as UTF-8): use it for every text field on the wire.
Text = Annotated[str, AfterValidator(valid_unicode)]
# OpenAI's "a string or a list of strings" (prompt, stop), always validated as a list, so an
# error names the list item (`prompt.0`) rather than both branches of a union.
Texts = Annotated[list[Text], BeforeValidator(_one_or_many)]


class BodySizeLimit:
    """ASGI middleware: a request body over `max_bytes` gets `render(413, message)`.

    A declared Content-Length over the limit is refused before reading; a chunked body is read
    up to the limit, then refused. The body the app sees is replayed from what was read.
    """

    def __init__(
        self, app: ASGIApp, max_bytes: int, setting: str, render: Callable[[int, str], Response]
    ) -> None:
        self.app, self.max_bytes, self.setting, self.render = app, max_bytes, setting, render

    def _refuse(self, size: str) -> Response:
        return self.render(
            413,
            f"request body of {size} bytes is over the limit of {self.max_bytes} bytes "
            f"({self.setting})",
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(declared)(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                await self.app(scope, _replay(message, receive), send)
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await self._refuse(f"more than {self.max_bytes}")(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        whole: Message = {"type": "http.request", "body": bytes(body), "more_body": False}
        await self.app(scope, _replay(whole, receive), send)


def _replay(first: Message, receive: Receive) -> Receive:
    """A receive channel that yields `first`, then whatever the connection says next."""
    pending = [first]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay
