"""Retrieval server speaking Search-R1's `/retrieve` protocol, so trainers use the same tool.

Request:  {"queries": ["..."], "topk": 3, "return_scores": true}
Response: {"result": [[{"document": {"id": ..., "contents": "\"Title\"\nText"}, "score": s}, ...]]}
          (without return_scores each inner list holds the documents themselves).

Requests are bounded (`retrieval.max_*`), strictly typed (`"topk": "3"` or `"return_scores":
"yes"` is a 422, not coerced) and must be valid Unicode; a body over `retrieval.max_body_bytes`
is a 413.
"""

import threading
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from pipeline.core.config import RetrievalConfig
from pipeline.core.wire import BodySizeLimit, Text
from pipeline.retrieval.faiss_index import Hit, Retriever


def _document(h: Hit) -> dict[str, str]:
    return {"id": h.id, "contents": f'"{h.title}"\n{h.text}'}


def create_retrieval_app(retriever: Retriever, limits: RetrievalConfig | None = None) -> FastAPI:
    """The server over `retriever`, bounded by the `retrieval.*` section (its `topk` is the
    default for requests without one)."""
    limits = limits or RetrievalConfig()

    class RetrieveRequest(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        queries: list[Text] = Field(min_length=1, max_length=limits.max_queries)
        topk: int | None = Field(None, ge=1, le=limits.max_topk)
        return_scores: bool = False

        @field_validator("queries")
        @classmethod
        def _bounded(cls, qs: list[str]) -> list[str]:
            for i, q in enumerate(qs):
                if not q.strip():
                    raise ValueError(f"query {i} is empty")
                if len(q) > limits.max_query_chars:
                    raise ValueError(
                        f"query {i} has {len(q)} characters; the limit is {limits.max_query_chars}"
                    )
            return qs

    app = FastAPI(title="curriculum retrieval", version="1")
    app.add_middleware(
        BodySizeLimit,
        max_bytes=limits.max_body_bytes,
        setting="retrieval.max_body_bytes",
        render=lambda status, msg: JSONResponse(status_code=status, content={"error": msg}),
    )
    lock = threading.Lock()  # one batched search at a time; FAISS uses all cores per search

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        details = [
            {
                "loc": ".".join(str(p) for p in e.get("loc", ()) if p != "body"),
                "msg": str(e.get("msg")),
                "type": e.get("type"),
            }
            for e in exc.errors()
        ]
        msg = "; ".join(f"{d['loc']}: {d['msg']}" if d["loc"] else d["msg"] for d in details)
        return JSONResponse(status_code=422, content={"error": msg, "detail": details})

    @app.get("/health")
    def health() -> dict[str, Any]:
        m = retriever.meta
        return {
            "status": "ok",
            "index": m.get("fingerprint"),
            "count": m.get("count"),
            "model": m.get("model"),
            "factory": m.get("factory"),
        }

    @app.post("/retrieve")
    def retrieve(req: RetrieveRequest) -> dict[str, Any]:
        with lock:
            hits = retriever.search(req.queries, req.topk or limits.topk)
        if req.return_scores:
            return {
                "result": [
                    [{"document": _document(h), "score": h.score} for h in hs] for hs in hits
                ]
            }
        return {"result": [[_document(h) for h in hs] for hs in hits]}

    return app
