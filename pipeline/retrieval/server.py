"""Retrieval server speaking Search-R1's `/retrieve` protocol, so trainers use the same tool.

Request:  {"queries": ["..."], "topk": 3, "return_scores": true}
Response: {"result": [[{"document": {"id": ..., "contents": "\"Title\"\nText"}, "score": s}, ...]]}
          (without return_scores each inner list holds the documents themselves).

Two opt-in request fields serve the pipeline's own client (`retrieval.backend: http`), so its
records equal an in-process search's; Search-R1 clients never send them and see the protocol
unchanged: `"return_passages": true` adds each document's passage-table `row`, `title` and
`text`; `"return_vectors": true` adds `"query_vectors"` (the embedded queries, which the
agents' sub-query redundancy reward needs). `/health` names the index fingerprint, embedder
model and query prompt, and the request limits, so a client can refuse the wrong index and
split a batch over `max_queries`.

Requests are bounded (`retrieval.max_*`), strictly typed (`"topk": "3"` or `"return_scores":
"yes"` is a 422, not coerced; an unknown field is a 422 naming it) and must be valid Unicode; a
body over `retrieval.max_body_bytes` is a 413. Searches run one at a time in a worker thread
(pipeline.llm.model_worker): a request whose client disconnects, or that outlives
`retrieval.max_request_s`, is cancelled at the embedder's next layer, so abandoned work does
not hold up the next request.
"""

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from pipeline.core.config import RetrievalConfig
from pipeline.core.wire import BodySizeLimit, Text
from pipeline.llm.model_worker import TIMEOUT, ModelWorker, RequestCancelled
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
        return_passages: bool = False
        return_vectors: bool = False

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
    # One batched search at a time (FAISS uses all cores per search), cancelled when its
    # client leaves or it overruns retrieval.max_request_s.
    worker = ModelWorker(limits.max_request_s, "retrieval.max_request_s")
    app.router.on_shutdown.append(worker.shutdown)

    @app.exception_handler(RequestCancelled)
    async def _cancelled(_: Request, exc: RequestCancelled) -> JSONResponse:
        return JSONResponse(status_code=504 if exc.reason == TIMEOUT else 499,
                            content={"error": exc.message})  # fmt: skip

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
            "query_prompt": m.get("query_prompt"),
            "dim": m.get("dim"),
            "factory": m.get("factory"),
            "limits": {
                "max_topk": limits.max_topk,
                "max_queries": limits.max_queries,
                "max_query_chars": limits.max_query_chars,
                "max_body_bytes": limits.max_body_bytes,
            },
        }

    @app.post("/retrieve")
    async def retrieve(req: RetrieveRequest, request: Request) -> dict[str, Any]:
        topk = req.topk or limits.topk
        hits, vecs = await worker.run(
            request, lambda: retriever.search_with_vectors(req.queries, topk)
        )

        def doc(h: Hit) -> dict[str, Any]:
            d: dict[str, Any] = _document(h)
            return (
                {**d, "row": h.row, "title": h.title, "text": h.text} if req.return_passages else d
            )

        if req.return_scores:
            result: list = [[{"document": doc(h), "score": h.score} for h in hs] for hs in hits]
        else:
            result = [[doc(h) for h in hs] for hs in hits]
        if req.return_vectors:  # float32 -> float -> JSON round-trips exactly
            return {"result": result, "query_vectors": vecs.tolist()}
        return {"result": result}

    return app
