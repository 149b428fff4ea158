"""The record browser's web app (FastAPI + Jinja2), served on 127.0.0.1 by `curriculum browse`.

Read-only to the data: the one thing it writes is reviews (`pipeline.store.reviews`).
Every record field is untrusted model output: templates autoescape everything, no field is
ever put in a URL, attribute handler or script, and the Content-Security-Policy allows no
script at all, so an injected `<script>`, `onerror=` or `javascript:` link is inert text.
A review is a same-origin POST carrying the session's token (an HMAC of its cookie).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
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
from pipeline.core.identifiers import is_identifier
from pipeline.store.reviews import ReviewError, Verdict, write_reviews
from schemas.tables import REVIEW_REASONS

HERE = Path(__file__).parent
SESSION_COOKIE = "browse_session"
MAX_TEXT = 200  # characters of a filter value or search
MAX_BULK = 500  # records in one bulk review
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
        if not source or urlsplit(source).netloc != request.headers.get("host", ""):
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
    note: Annotated[str | None, Form(max_length=2000)] = None,
    next_url: Annotated[str, Form(alias="next", max_length=2000)] = "/records",
) -> Response:
    b = _browser(request)
    b.check_review_request(request, csrf)
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
    md = b.reader.root() / "runs" / run_id / "report" / "report.md"
    if not md.is_file():
        return PlainTextResponse(f"run {run_id!r} has no report", status_code=404)
    return b.page(request, "report.html", run_id=run_id, text=md.read_text(errors="replace"))


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


def create_browse_app(catalog: Path, reviewer: str = "reviewer") -> FastAPI:
    """The browser over `catalog` (read-only); reviews go to the catalog's store."""
    app = FastAPI(title="curriculum browse", docs_url=None, redoc_url=None, openapi_url=None)
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.autoescape = True  # every template, whatever its name
    app.state.browser = Browser(CatalogReader(catalog), reviewer, templates)
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")
    app.middleware("http")(_headers)
    app.add_exception_handler(RequestValidationError, _plain(400))
    app.add_exception_handler(BadParameter, _plain(400))
    app.add_exception_handler(ReviewRefused, _plain(403))
    app.add_exception_handler(CatalogNotReadyError, _plain(503))
    app.include_router(router)
    return app


def serve(catalog: Path, host: str = "127.0.0.1", port: int = 8765, reviewer: str = "") -> None:
    import uvicorn

    name = reviewer or os.environ.get("USER") or "reviewer"
    uvicorn.run(create_browse_app(catalog, name), host=host, port=port, log_level="info")
