"""One retrying JSON-over-HTTP client for the pipeline's servers (LLM completions, retrieval).

Both clients need the same rules, so they live once: connect errors, timeouts, 408, 429 and
5xx are retried with exponential backoff (`retry_backoff_s * 2**attempt`, at most 60 s, a
numeric Retry-After honoured); other 4xx fail at once. Failures raise `ServerError` (the
server answered with an error status) or `ServerUnreachableError` (no answer after every
attempt), both naming the URL; `run_control.is_transient` classifies them for the flows'
retries. At most `max_concurrency` requests are in flight per client.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 429})
MAX_BACKOFF_S = 60.0


class ServerError(RuntimeError):
    """The server answered with an error status (after retries, for retryable ones)."""

    def __init__(
        self, url: str, status: int, message: str, attempts: int = 1, method: str = "POST"
    ) -> None:
        self.url, self.status, self.server_message, self.attempts = url, status, message, attempts
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        super().__init__(f"{method} {url} failed with HTTP {status}{tries}: {message}")

    @property
    def transient(self) -> bool:
        return self.status >= 500 or self.status in RETRY_STATUS


class ServerUnreachableError(RuntimeError):
    """The server could not be reached (or kept timing out) after all retries."""

    # The setting that names the server, for the hint (subclasses override it).
    setting = "the server URL"

    def __init__(
        self,
        url: str,
        cause: BaseException,
        attempts: int,
        method: str = "POST",
        setting: str | None = None,
    ) -> None:
        self.url, self.attempts = url, attempts
        kind = type(cause).__name__
        super().__init__(
            f"{method} {url}: no response after {attempts} attempt(s) ({kind}: {cause}); "
            f"is the server running and is {setting or self.setting} right?"
        )


def normalize_base_url(url: str) -> str:
    """ "http://h:8000", "http://h:8000/" and "http://h:8000/v1" all name the same server."""
    url = url.strip().rstrip("/")
    return url.removesuffix("/v1")


def server_message(res: httpx.Response) -> str:
    """The human part of an error body in the shapes OpenAI, vLLM, TGI and FastAPI use."""
    try:
        body = res.json()
    except ValueError:
        return res.text.strip()[:500] or res.reason_phrase
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if body.get("message"):
            return str(body["message"])
        if isinstance(err, str) and err:  # ours and TGI's; FastAPI's `detail` is structured
            return err
        if body.get("detail"):
            return str(body["detail"])
    return str(body)[:500]


class RetryingClient:
    """JSON requests to one server with retries, backoff and bounded concurrency."""

    def __init__(
        self,
        base_url: str,
        *,
        max_concurrency: int = 8,
        timeout_s: float = 600.0,
        max_retries: int = 5,
        retry_backoff_s: float = 1.0,
        headers: dict[str, str] | None = None,
        server_error: type[ServerError] = ServerError,
        unreachable_error: type[ServerUnreachableError] = ServerUnreachableError,
        setting: str | None = None,
    ) -> None:
        self.base_url = normalize_base_url(base_url)
        self.max_concurrency = max(1, max_concurrency)
        self.max_retries = max_retries
        self.retry_backoff_s = retry_backoff_s
        self._server_error = server_error
        self._unreachable_error = unreachable_error
        self._setting = setting
        self._lock = threading.Lock()
        self._client = httpx.Client(
            headers=headers or {},
            timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s)),
            limits=httpx.Limits(
                max_connections=self.max_concurrency,
                max_keepalive_connections=self.max_concurrency,
            ),
        )
        self.requests_sent = 0  # attempts, including retries

    def close(self) -> None:
        self._client.close()

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One JSON request, retried while the failure is transient; the decoded body."""
        url = f"{self.base_url}{path}"
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            with self._lock:
                self.requests_sent += 1
            try:
                res = self._client.request(method, url, json=body)
            except httpx.TransportError as exc:  # connect errors, timeouts, broken streams
                if last:
                    raise self._unreachable_error(
                        url, exc, attempts, method=method, setting=self._setting
                    ) from exc
                self._sleep(attempt, None)
                log.warning("%s: %s; retrying (%d/%d)", url, exc, attempt + 1, self.max_retries)
                continue
            if res.status_code < 400:
                try:
                    return res.json()
                except ValueError as exc:
                    msg = f"response is not JSON: {res.text[:200]!r}"
                    raise self._server_error(url, res.status_code, msg, method=method) from exc
            err = self._server_error(
                url, res.status_code, server_message(res), attempt + 1, method=method
            )
            if not err.transient or last:
                raise err
            log.warning(
                "%s: HTTP %d (%s); retrying (%d/%d)",
                url,
                res.status_code,
                err.server_message[:200],
                attempt + 1,
                self.max_retries,
            )
            self._sleep(attempt, res.headers.get("retry-after"))
        raise AssertionError("unreachable")

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("POST", path, body)

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def post_many(self, path: str, bodies: Sequence[dict[str, Any]]) -> list[Any]:
        """Several POSTs, at most `max_concurrency` in flight; answers in request order."""
        if len(bodies) <= 1 or self.max_concurrency == 1:
            return [self.post(path, b) for b in bodies]
        with ThreadPoolExecutor(min(self.max_concurrency, len(bodies))) as pool:
            return list(pool.map(lambda b: self.post(path, b), bodies))

    def _sleep(self, attempt: int, retry_after: str | None) -> None:
        delay = self.retry_backoff_s * (2**attempt)
        if retry_after:
            with contextlib.suppress(ValueError):  # an HTTP date: keep our own schedule
                delay = max(delay, float(retry_after))
        delay = min(delay, MAX_BACKOFF_S)
        time.sleep(delay * (1 + 0.1 * random.random()))


__all__ = [
    "RetryingClient",
    "ServerError",
    "ServerUnreachableError",
    "normalize_base_url",
    "server_message",
]
