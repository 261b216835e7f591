"""``/v1/jobs``: add one or a batch, list, show, cancel, run now, reschedule, retry. Each route
reads its input, checks the token, calls the ``Awty`` method the CLI command calls, and
answers with the document ``--json`` prints."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .. import tokens
from ..documents import job_dict, job_json, show_document
from ..errors import InvalidInput
from .auth import authorize, presented
from .body import read_bytes, read_json, read_lines
from .problems import Problem

if TYPE_CHECKING:
    from ..api import AddResult, Awty
    from ..model import ApiToken

LIST_LIMIT, LIST_MAX = 100, 1000


def admit(token: ApiToken, spec: dict[str, Any], index: int | None = None) -> None:
    """What ``token`` may add over HTTP (a job, or a schedule's occurrences): no ``cwd`` (an
    exec job runs in the token's own directory), exec and python only with ``jobs:exec``,
    callbacks under the token's prefixes; ``Problem`` 400 or 403 naming the field."""
    if "cwd" in spec:
        raise Problem(400, "cwd: over HTTP an exec job runs in its token's --exec-dir",
                      field="cwd", index=index)
    try:
        tokens.check_spec(token, spec)
    except PermissionError as e:
        raise Problem(403, str(e), field=str(e).split(":")[0], index=index) from None


def _admitted(token: ApiToken, specs: list[Any], single: bool) -> None:
    for i, spec in enumerate(specs):
        at = None if single else i
        if not isinstance(spec, dict):
            raise Problem(400, "the body must be a JSON object (a job, as an `add --batch` line)"
                          if single else f"line {i + 1}: not a JSON object", index=at)
        admit(token, spec, at)


def _secret(request: Request) -> str | None:
    """The token the adds' group commit looks up again (None: --no-auth)."""
    return None if request.app.state.options.no_auth else presented(request)


async def add_job(request: Request) -> Response:
    token = await authorize(request, "jobs:write", cached=True)
    spec = await read_json(request)
    key = request.headers.get("idempotency-key")
    if key is not None and isinstance(spec, dict):
        if spec.get("idempotency_key") not in (None, key):
            raise Problem(400, "idempotency_key: the body's differs from the Idempotency-Key "
                          "header", field="idempotency_key")
        spec["idempotency_key"] = key
    _admitted(token, [spec], True)
    state = request.app.state
    (added,) = await state.adds.add(token, _secret(request), [spec], True)
    state.metrics.added(1)
    if added.created:  # show_document's, built from the job with no read: JobView.of's
        job = added.job
        doc = job_json(job, f'"state":"{job.status.value}",', ',"executions":[]')
        return Response(doc, 201, headers={"Location": f"/v1/jobs/{job.id}"},
                        media_type="application/json")
    return JSONResponse(await state.backend.run(_shown, added.job.id), 200,
                        headers={"Location": f"/v1/jobs/{added.job.id}"})


async def add_batch(request: Request) -> Response:
    token = await authorize(request, "jobs:write", cached=True)
    specs = read_lines(await read_bytes(request))
    state = request.app.state
    cap = state.options.max_batch
    if len(specs) > cap:
        raise Problem(413, f"{len(specs):,} jobs in one batch: at most {cap:,} "
                      "(serve_max_batch)")
    if not specs:
        raise Problem(400, "an empty batch: send a JSON array or JSON lines of jobs")
    _admitted(token, specs, False)
    added = await state.adds.add(token, _secret(request), specs, False)
    created = sum(1 for r in added if r.created)
    state.metrics.added(created)
    # each job's document as job_dict's JSON, with its created last (job_json: ~1/3 of
    # building the dicts and dumping them)
    jobs = ",".join([job_json(r.job, after=',"created":true' if r.created else
                              ',"created":false') for r in added])
    return Response(f'{{"created":{created},"jobs":[{jobs}]}}', 201 if created else 200,
                    media_type="application/json")


def _shown(a: Awty, job_id: str) -> dict[str, Any]:
    return show_document(a.get(job_id), a.executions(job_id))


async def show_job(request: Request) -> Response:
    await authorize(request, "jobs:read")
    return JSONResponse(await request.app.state.backend.run(_shown, request.path_params["id"]))


def job_page(a: Awty, q: dict[str, Any], limit: int, after: str | None) -> dict[str, Any]:
    """One page of pending jobs for ``list``'s filters in ``q``, and the link to the next."""
    from ..slots import parse_slot_id, slot_id

    filters: dict[str, Any] = {k: q.get(k) for k in ("entity", "key")}
    status, kind = q.get("status"), q.get("kind")
    if status not in (None, "pending", "in_flight"):
        raise Problem(400, "status must be pending or in_flight", field="status")
    if kind not in (None, "http", "exec", "python"):
        raise Problem(400, "kind must be http, exec or python", field="kind")
    filters.update(status=status, kind=kind)
    if q.get("slot"):
        try:
            filters["slot"] = parse_slot_id(q["slot"])
        except ValueError as e:
            raise Problem(400, f"slot: {e}", field="slot") from None
    start = None
    if after:
        start = _position(a, after)
    jobs = list(a.list(**filters, after=start, limit=limit + 1))
    more = len(jobs) > limit
    jobs = jobs[:limit]
    nxt = None
    if more:
        last = jobs[-1]
        query = {k: v for k, v in q.items() if k not in ("after",)}
        query["after"] = f"{slot_id(last.next_check_at)}.{last.id}"
        query["limit"] = str(limit)
        nxt = "/v1/jobs?" + urlencode(query)
    return {"jobs": [job_dict(j) for j in jobs], "next": nxt}


def _position(a: Awty, after: str) -> Any:
    """Where a page starts: ``SLOT.ID`` (the ``next`` link's cursor) or a pending job's id."""
    from ..slots import parse_slot_id

    slot, dot, job_id = after.partition(".")
    if dot:
        try:
            return parse_slot_id(slot), a.resolve_id(job_id, strict=False)
        except ValueError:
            raise Problem(400, f"after: {after!r} is not a cursor (SLOT.ID) nor a job id",
                          field="after") from None
    try:
        job = a.get_pending(a.resolve_id(after))
    except InvalidInput as e:
        raise Problem(400, f"after: {e}", field="after") from None
    except LookupError:
        raise Problem(400, f"after: {after!r} is not a pending job (use the `next` link's "
                      "cursor, SLOT.ID)", field="after") from None
    return job.next_check_at, job.id


async def list_jobs(request: Request) -> Response:
    await authorize(request, "jobs:read")
    q = dict(request.query_params)
    limit = query_int(q.pop("limit", None), LIST_LIMIT, LIST_MAX)
    after = q.pop("after", None)
    return JSONResponse(await request.app.state.backend.run(job_page, q, limit, after))


def query_int(text: str | None, default: int, top: int, name: str = "limit") -> int:
    """A whole number 1 to ``top`` from a query string (``default`` when absent)."""
    if text is None:
        return default
    # ASCII digits only: str.isdigit() holds for '²', which int() refuses
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) <= top:
        raise Problem(400, f"{name} must be 1 to {top}", field=name)
    return int(text)


def cancel_one(a: Awty, job_id: str) -> dict[str, Any]:
    from ..ids import runner_label

    res = a.cancel([job_id])
    if res.running:
        j = res.jobs[res.running[0]]
        raise Problem(409, f"job {j.id} is being delivered now ({runner_label(j.lease_owner)}); "
                      "its outcome will be in history", runner=j.lease_owner)
    if res.missing:
        raise Problem(404, f"not pending (unknown or already ended): {res.missing[0]}")
    return {"cancelled": res.cancelled[0]}


async def cancel_job(request: Request) -> Response:
    await authorize(request, "jobs:write")
    job_id = request.path_params["id"]
    return JSONResponse(await request.app.state.backend.run(cancel_one, job_id))


async def run_job(request: Request) -> Response:
    await authorize(request, "jobs:write")
    # the callback may take its whole timeout: not on the store's thread
    summary = await request.app.state.backend.apart(
        lambda a: a.run_now(request.path_params["id"]))
    return JSONResponse(summary.to_dict())


async def reschedule_job(request: Request) -> Response:
    await authorize(request, "jobs:write")
    body = await read_json(request)
    if not isinstance(body, dict) or set(body) - {"at", "in"} or ("at" in body) == ("in" in body):
        raise Problem(400, "give one of at or in, as a JSON object: {\"in\": \"2h\"}",
                      field="at")
    job = await request.app.state.backend.run(
        lambda a: a.reschedule(request.path_params["id"], at=body.get("at"),
                               in_=body.get("in")))
    return JSONResponse(job_dict(job))


async def retry_job(request: Request) -> Response:
    await authorize(request, "jobs:write")
    (job,) = await request.app.state.backend.run(lambda a: a.retry(request.path_params["id"]))
    return JSONResponse(job_dict(job))


ROUTES = [
    Route("/v1/jobs", add_job, methods=["POST"]),
    Route("/v1/jobs", list_jobs, methods=["GET"]),
    Route("/v1/jobs/batch", add_batch, methods=["POST"]),
    Route("/v1/jobs/{id}", show_job, methods=["GET"]),
    Route("/v1/jobs/{id}", cancel_job, methods=["DELETE"]),
    Route("/v1/jobs/{id}/run", run_job, methods=["POST"]),
    Route("/v1/jobs/{id}/reschedule", reschedule_job, methods=["POST"]),
    Route("/v1/jobs/{id}/retry", retry_job, methods=["POST"]),
]
