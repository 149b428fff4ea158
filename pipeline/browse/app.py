"""The record browser's web app (FastAPI + Jinja2), served on 127.0.0.1 by `curriculum browse`.

Read-only to the data: the one thing it writes is reviews (`pipeline.store.reviews`).
Every record field is untrusted model output: templates autoescape everything, no field is
ever put in a URL, attribute handler or script, and the Content-Security-Policy allows no
script at all, so an injected `<script>`, `onerror=` or `javascript:` link is inert text.
A review is a same-origin POST carrying the session's token (an HMAC of its cookie).

It is a local app: a request whose Host is not one of its own names (the loopback names and
the host it was told to bind) is refused before anything else (421), so a web page that
rebinds its own name to 127.0.0.1 reads nothing and forges no review; an Origin must be one
of those names too. It binds to anything but loopback only when told to expose itself, and
then every request must carry the access token (`serve`).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import os
import re
import secrets
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode, urlsplit

from fastapi import APIRouter, FastAPI, Form, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from pipeline.browse.catalog_reader import CatalogNotReadyError, CatalogReader
from pipeline.browse.query import (
    REVIEW_STATES,
    SORTS,
    STATUSES,
    CursorError,
    RecordFilter,
    facets,
    record_detail,
    records_page,
    run_of,
    runs_overview,
)
from pipeline.browse.render import chain_marks, highlight, path_drawing
from pipeline.core.errors import BadInputError
from pipeline.core.identifiers import is_identifier
from pipeline.core.io import PathEscapeError, contained
from pipeline.store.reviews import MAX_NOTE, ReviewError, Verdict, write_reviews
from schemas.tables import REVIEW_REASONS

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
SESSION_COOKIE = "browse_session"
MAX_TEXT = 200  # characters of a filter value or search
MAX_BULK = 500  # records in one bulk review
MAX_REVIEWS_PER_MINUTE = 60  # submissions per server and minute; then 429
MAX_REPORT = 8 * 2**20  # bytes of a run report shown
MAX_BODY = 256 * 1024  # bytes of a request body (a bulk review of MAX_BULK ids and a note)
ACCESS_COOKIE = "browse_access"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,128}$"
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)


class BadParameter(ValueError):
    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"bad parameter {name!r}: {why}")


def _token(secret: bytes, session: str) -> str:
    return hmac.new(secret, session.encode(), hashlib.sha256).hexdigest()


@dataclass
class Browser:
    """What the routes share: the catalog reader, the session secret, the templates."""

    reader: CatalogReader
    reviewer: str
    templates: Jinja2Templates
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))  # per server
    hosts: frozenset[str] = frozenset(LOOPBACK_NAMES)  # the names a request's Host may say
    access_token: str | None = None  # exposed beyond loopback: every request carries it
    _submitted: deque[float] = field(default_factory=deque)
    _submit_lock: threading.Lock = field(default_factory=threading.Lock)

    def allow_submission(self) -> bool:
        """At most MAX_REVIEWS_PER_MINUTE review submissions in any 60 s: a flood of files
        would slow every page (each is a file every connection lists)."""
        now = time.monotonic()
        with self._submit_lock:
            while self._submitted and now - self._submitted[0] > 60:
                self._submitted.popleft()
            if len(self._submitted) >= MAX_REVIEWS_PER_MINUTE:
                return False
            self._submitted.append(now)
            return True

    def session_of(self, request: Request) -> str:
        session = request.cookies.get(SESSION_COOKIE)
        if not session:  # first visit: the middleware sets this one as the cookie
            session = getattr(request.state, "session", None) or secrets.token_urlsafe(32)
            request.state.session = session
        return session

    def page(self, request: Request, name: str, **context: Any) -> HTMLResponse:
        context |= {
            "csrf": _token(self.secret, self.session_of(request)),
            "reasons": REVIEW_REASONS,
            "reviewer": self.reviewer,
        }
        return self.templates.TemplateResponse(request, name, context)

    def check_review_request(self, request: Request, csrf: str) -> None:
        """A review must come from a page of this server (Origin, else Referer) and carry
        the token of the session's cookie."""
        source = request.headers.get("origin") or request.headers.get("referer")
        parts = urlsplit(source or "")
        if (
            not source
            or parts.netloc != request.headers.get("host", "")
            or host_name(parts.netloc) not in self.hosts
        ):
            raise ReviewRefused("not a same-origin request")
        session = request.cookies.get(SESSION_COOKIE)
        if not session or not hmac.compare_digest(csrf, _token(self.secret, session)):
            raise ReviewRefused("bad or missing session token")


class ReviewRefused(PermissionError):
    pass


def _number(name: str, raw: str | None, kind: type, lo: float, hi: float) -> Any:
    """A number from a form field: empty is no filter (a form sends every field)."""
    if raw is None or not raw.strip():
        return None
    try:
        value = kind(raw)
    except ValueError:
        raise BadParameter(name, f"not {'an integer' if kind is int else 'a number'}") from None
    if not lo <= value <= hi:  # also refuses nan
        raise BadParameter(name, f"must be in [{lo:g}, {hi:g}]")
    return value


router = APIRouter()
Text = Annotated[str | None, Query(max_length=MAX_TEXT)]


def _browser(request: Request) -> Browser:
    return request.app.state.browser


@router.get("/health")
def health(request: Request) -> dict[str, str]:
    return {"status": "ok", "catalog": str(_browser(request).reader.catalog)}


@router.get("/", response_class=HTMLResponse)
def runs(request: Request) -> HTMLResponse:
    b = _browser(request)
    con = b.reader.cursor()
    try:
        return b.page(request, "runs.html", runs=runs_overview(con))
    finally:
        con.close()


@router.get("/records", response_class=HTMLResponse)
def records(
    request: Request,
    run_id: Text = None,
    status: Annotated[str | None, Query(pattern=f"^({'|'.join(STATUSES)})?$")] = None,
    rejected_by: Text = None,
    gate: Text = None,
    gate_verdict: Text = None,
    task_type: Text = None,
    hop_count: Annotated[str | None, Query(max_length=3)] = None,
    v_min: Annotated[str | None, Query(max_length=32)] = None,
    v_max: Annotated[str | None, Query(max_length=32)] = None,
    review: Annotated[str | None, Query(pattern=f"^({'|'.join(REVIEW_STATES)})?$")] = None,
    q: Text = None,
    sort: Annotated[str, Query(pattern=f"^({'|'.join(SORTS)})$")] = "v",
    order: Annotated[str, Query(pattern="^(asc|desc)$")] = "desc",
    after: Annotated[str | None, Query(max_length=400)] = None,
) -> HTMLResponse:
    given = {
        "run_id": run_id or None,
        "status": status or None,
        "rejected_by": rejected_by or None,
        "gate": gate or None,
        "gate_verdict": gate_verdict or None,
        "task_type": task_type or None,
        "hop_count": _number("hop_count", hop_count, int, 0, 100),
        "v_min": _number("v_min", v_min, float, -1e6, 1e6),
        "v_max": _number("v_max", v_max, float, -1e6, 1e6),
        "review": review or None,
        "q": (q or "").strip() or None,
    }
    flt = RecordFilter(**given, sort=sort, desc=order == "desc")
    b = _browser(request)
    con = b.reader.cursor()
    try:
        try:
            result = records_page(con, flt, after)
        except CursorError as exc:
            raise BadParameter("after", str(exc)) from None
        options = facets(con)
    finally:
        con.close()
    base = {**{k: v for k, v in given.items() if v is not None}, "sort": sort, "order": order}
    nxt = result.next_cursor
    return b.page(
        request, "records.html", result=result, given=given, options=options, sorts=SORTS,
        sort=sort, order=order, statuses=STATUSES, review_states=REVIEW_STATES,
        next_url=f"/records?{urlencode({**base, 'after': nxt})}" if nxt else None,
        first_url=f"/records?{urlencode(base)}",
        here=f"/records?{urlencode({**base, **({'after': after} if after else {})})}",
    )  # fmt: skip


@router.get("/records/{record_id}", response_class=HTMLResponse)
def record(request: Request, record_id: str) -> Response:
    if not re.match(ID_PATTERN, record_id):
        raise BadParameter("record_id", "not a record id")
    b = _browser(request)
    con = b.reader.cursor()
    try:
        detail = record_detail(con, record_id, b.reader.root())
    finally:
        con.close()
    if detail is None:
        return PlainTextResponse(f"no record {record_id!r} in the catalog", status_code=404)
    rec, passage, sg = detail["record"], detail["passage"], detail["subgraph"]
    marked = None
    if passage:
        start, end = rec["evidence_char_start"], rec["evidence_char_end"]
        marked = highlight(passage["text"], rec["evidence"] or "", start, end)
    drawing = path_drawing(rec["kg_path"], rec["waypoints"], sg["distractors"] if sg else None)
    chain = chain_marks(rec.get("evidence_chain"), detail["chain_passages"])
    return b.page(
        request, "record.html", d=detail, rec=rec, marked=marked, drawing=drawing,
        chain=chain, here=f"/records/{record_id}",
    )  # fmt: skip


@router.post("/reviews")
def review(
    request: Request,
    csrf: Annotated[str, Form(max_length=128)],
    verdict: Annotated[str, Form(max_length=16)],
    record_id: Annotated[list[str], Form()],
    reviewer_name: Annotated[str, Form(alias="reviewer", max_length=100)],
    reason: Annotated[str | None, Form(max_length=64)] = None,
    note: Annotated[str | None, Form(max_length=MAX_NOTE)] = None,
    next_url: Annotated[str, Form(alias="next", max_length=2000)] = "/records",
) -> Response:
    b = _browser(request)
    b.check_review_request(request, csrf)
    if not b.allow_submission():
        return PlainTextResponse(
            f"review refused: more than {MAX_REVIEWS_PER_MINUTE} submissions in a minute; "
            "wait a minute (a bulk review takes up to 500 records at once)",
            status_code=429,
        )
    if len(record_id) > MAX_BULK:
        raise BadParameter("record_id", f"at most {MAX_BULK} records per review")
    if any(not re.match(ID_PATTERN, r) for r in record_id):
        raise BadParameter("record_id", "not a record id")
    try:
        v = Verdict(verdict, reviewer_name, reason or None, note)
    except ReviewError as exc:
        raise BadParameter(exc.field, str(exc)) from None
    wanted = list(dict.fromkeys(record_id))
    con = b.reader.cursor()
    try:
        found = run_of(con, wanted)
    finally:
        con.close()
    if len(found) != len(wanted):
        raise BadParameter("record_id", "not every record is in the catalog")
    write_reviews(b.reader.root(), v, found)
    target = next_url if next_url.startswith("/") and not next_url.startswith("//") else "/"
    return RedirectResponse(target, status_code=303)


@router.get("/runs/{run_id}/report", response_class=HTMLResponse)
def report(request: Request, run_id: str) -> Response:
    if not is_identifier(run_id):
        raise BadParameter("run_id", "not a run id")
    b = _browser(request)
    try:  # a link out of the store (report.md -> /etc/passwd) is not followed
        md = contained(b.reader.root(), f"runs/{run_id}/report/report.md", verb="read")
    except PathEscapeError:
        md = None
    if md is None or not md.is_file():
        return PlainTextResponse(f"run {run_id!r} has no report", status_code=404)
    with md.open("rb") as fh:
        text = fh.read(MAX_REPORT).decode("utf-8", errors="replace")
    return b.page(request, "report.html", run_id=run_id, text=text)


def host_name(netloc: str) -> str | None:
    """The host of a Host header or an origin's netloc, lower case, without port or IPv6
    brackets (None: not a host)."""
    netloc = netloc.strip().lower()
    if not netloc or "@" in netloc or any(c.isspace() for c in netloc):
        return None
    try:
        parts = urlsplit(f"//{netloc}")
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        return None
    return parts.hostname or None


async def _guard(request: Request, call_next: Any) -> Response:
    """Before anything else: the Host must be one of the server's names (421, a request
    meant for another site, as DNS rebinding sends; 400 without one), an Origin, when the
    client sends one, too (403), a body must say its length and stay under MAX_BODY (411,
    413), and with an access token, every request must carry it (401)."""
    b: Browser = request.app.state.browser
    raw = request.headers.get("host")
    name = host_name(raw) if raw is not None else None
    if name is None:
        return PlainTextResponse("bad request: no Host header, or not a host", status_code=400)
    if name not in b.hosts:
        return PlainTextResponse(
            f"misdirected request: this server answers to {', '.join(sorted(b.hosts))} only",
            status_code=421,
        )
    origin = request.headers.get("origin")
    if origin is not None and host_name(urlsplit(origin).netloc) not in b.hosts:
        return PlainTextResponse("forbidden: a request from another origin", status_code=403)
    if request.method not in ("GET", "HEAD"):
        length = request.headers.get("content-length")
        if length is None or not length.isdigit():
            return PlainTextResponse("a request body must say its length", status_code=411)
        if int(length) > MAX_BODY:
            return PlainTextResponse(f"request body over {MAX_BODY} bytes", status_code=413)
    if b.access_token is not None:
        given = request.query_params.get("token") or request.cookies.get(ACCESS_COOKIE) or ""
        bearer = request.headers.get("authorization", "")
        if bearer.lower().startswith("bearer "):
            given = bearer[7:].strip()
        if not hmac.compare_digest(given.encode(), b.access_token.encode()):
            return PlainTextResponse("this server needs its access token", status_code=401)
        if request.query_params.get("token"):  # a link with the token: keep it in a cookie
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(ACCESS_COOKIE, b.access_token, httponly=True, samesite="strict")
            return response
    return await call_next(request)


async def _headers(request: Request, call_next: Any) -> Response:
    response: Response = await call_next(request)
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["X-Frame-Options"] = "DENY"
    if SESSION_COOKIE not in request.cookies:
        session = getattr(request.state, "session", None) or secrets.token_urlsafe(32)
        response.set_cookie(SESSION_COOKIE, session, httponly=True, samesite="strict")
    return response


def _plain(status: int):
    async def handler(request: Request, exc: Exception) -> PlainTextResponse:
        if isinstance(exc, RequestValidationError):
            err = exc.errors()[0]
            name = str(err["loc"][-1]) if err.get("loc") else "request"
            return PlainTextResponse(f"bad parameter {name!r}: {err['msg']}", status_code=status)
        prefix = "review refused: " if isinstance(exc, ReviewRefused) else ""
        return PlainTextResponse(prefix + str(exc), status_code=status)

    return handler


def create_browse_app(
    catalog: Path,
    reviewer: str = "reviewer",
    hosts: tuple[str, ...] = (),
    access_token: str | None = None,
) -> FastAPI:
    """The browser over `catalog` (read-only); reviews go to the catalog's store. It answers
    requests whose Host is a loopback name or one of `hosts`; with `access_token`, only
    those that carry it."""
    app = FastAPI(title="curriculum browse", docs_url=None, redoc_url=None, openapi_url=None)
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.autoescape = True  # every template, whatever its name
    names = frozenset({*LOOPBACK_NAMES, *(h.lower().strip("[]") for h in hosts)})
    app.state.browser = Browser(
        CatalogReader(catalog), reviewer, templates, hosts=names, access_token=access_token
    )
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")
    app.middleware("http")(_headers)
    app.middleware("http")(_guard)  # added last: runs first
    app.add_exception_handler(RequestValidationError, _plain(400))
    app.add_exception_handler(BadParameter, _plain(400))
    app.add_exception_handler(ReviewRefused, _plain(403))
    app.add_exception_handler(CatalogNotReadyError, _plain(503))
    app.include_router(router)
    return app


class BindError(BadInputError):
    """A host or port the browser cannot or may not listen on: one line, exit 2."""


MIN_TOKEN = 16  # characters of an access token


def _addresses(host: str, port: int) -> list[tuple]:
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise BindError(f"--port {port}: not a port (1 to 65535)", "e.g. --port 8765")
    if not host or host != host.strip() or len(host) > 253:
        raise BindError(f"--host {host!a}: not a host name or address", "e.g. 127.0.0.1")
    try:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise BindError(
            f"--host {host!a}: not a host this machine can listen on ({exc})",
            "give an address of this machine, e.g. 127.0.0.1",
        ) from None


def bind_socket(host: str, port: int, expose: bool, token: str | None) -> socket.socket:
    """The listening socket: the host and port checked (BindError, exit 2: an empty host, a
    port outside 1..65535, a name that does not resolve, a port in use), and anything but a
    loopback address only with `expose` and an access token of MIN_TOKEN characters or
    more."""
    infos = _addresses(host, port)
    loopback = all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)
    if not loopback and not expose:
        raise BindError(
            f"--host {host}: not a loopback address; the browser shows every record and "
            "writes reviews, so it listens beyond this machine only when told to",
            "pass --expose (every request then needs the access token), or use 127.0.0.1",
        )
    if expose and (token is None or len(token) < MIN_TOKEN):
        raise BindError(
            f"--expose needs an access token of at least {MIN_TOKEN} characters",
            "set CURRICULUM_BROWSE_TOKEN (e.g. `export CURRICULUM_BROWSE_TOKEN=$(openssl "
            "rand -hex 16)`)",
        )
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise BindError(
            f"cannot listen on {host}:{port}: {exc.strerror}",
            "choose another --port (another server holds this one)",
        ) from None
    sock.set_inheritable(True)
    return sock


def serve(
    catalog: Path,
    host: str = "127.0.0.1",
    port: int = 8765,
    reviewer: str = "",
    expose: bool = False,
    token: str | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Serve the browser on `host`:`port` (bind_socket's checks first: BindError), or on
    `sock`, bound by bind_socket already."""
    import uvicorn

    sock = sock or bind_socket(host, port, expose, token)
    name = reviewer or os.environ.get("USER") or "reviewer"
    hosts: tuple[str, ...] = (host,)  # the name it was told, loopback or not (127.0.0.2)
    if expose and host in ("0.0.0.0", "::"):
        hosts += (socket.gethostname(), socket.getfqdn())
    app = create_browse_app(catalog, name, hosts, token if expose else None)
    config = uvicorn.Config(app, log_level="info")
    uvicorn.Server(config).run(sockets=[sock])
