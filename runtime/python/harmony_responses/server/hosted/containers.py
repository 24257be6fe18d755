"""`/v1/containers`: the code interpreter's containers and their files, as OpenAI's Containers API has them.

The openai SDK reads a container's files with `client.containers.files.list(container_id)` and
`client.containers.files.content.retrieve(file_id, container_id=...)`; those, and creating, reading, listing
and deleting containers, are served here from the sandbox of this server process (`sandbox.Sandbox`). A file
is any regular file the container's code wrote under `/mnt/data`; its id is stable for its path. A container
belongs to the API key that made it (by `POST /v1/containers` or by a response's `container: {"type":
"auto"}`) and is invisible to any other key. Uploading files into a container is not offered (this server
has no Files API): `POST /v1/containers/{id}/files` answers 405. Without `--code-interpreter` every route
here is a 404 saying so.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from ...models import Role
from ..errors import ErrorKind, ServerError
from ..state import ServerState
from ..stored import owner_of
from .base import HostedKind
from .code_interpreter import CodeInterpreterBackend
from .sandbox import Container, ContainerFile, Sandbox

PREFIX = "/v1/containers"
NETWORK_POLICIES = ("disabled",)  # a container never reaches the network


def sandbox_of(state: ServerState) -> Sandbox | None:
    """The sandbox of the server's code interpreter (None without `--code-interpreter`)."""
    backend = state.hosted.backends.get(HostedKind.CODE_INTERPRETER)
    return backend.sandbox if isinstance(backend, CodeInterpreterBackend) else None


def container_object(sandbox: Sandbox, c: Container) -> dict[str, Any]:
    last = sandbox.last_active_at(c)
    return {
        "id": c.id,
        "object": "container",
        "created_at": c.created_at,
        "status": "running",
        "name": c.name,
        "expires_after": {"anchor": "last_active_at", "minutes": max(1, round(sandbox.config.idle_seconds / 60))},
        "last_active_at": last,
        "memory_limit": None,
        "network_policy": {"type": "disabled"},
    }


def file_object(c: Container, f: ContainerFile) -> dict[str, Any]:
    return {
        "id": f.id,
        "object": "container.file",
        "created_at": f.created_at,
        "bytes": f.bytes,
        "container_id": c.id,
        "path": f.path,
        "source": Role.ASSISTANT.value,  # written by the code the model ran
    }


def _page(data: list[dict[str, Any]], request: Request) -> dict[str, Any]:
    """A cursor page as OpenAI lists things (`after`, `limit`, `order`)."""
    query = request.query_params
    if query.get("order", "desc") == "desc":
        data = list(reversed(data))
    after = query.get("after")
    if after:
        ids = [d["id"] for d in data]
        data = data[ids.index(after) + 1 :] if after in ids else []
    try:
        limit = max(1, min(100, int(query.get("limit", "20"))))
    except ValueError:
        raise ServerError(ErrorKind.BAD_REQUEST, "limit must be an integer", "limit") from None
    page = data[:limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(data) > limit,
    }


def routes() -> list[Route]:
    """The Containers API routes (every one a 404 without `--code-interpreter`)."""

    def sandbox_for(request: Request) -> tuple[Sandbox, str]:
        state: ServerState = request.app.state.server
        state.keys.check(request.headers)
        sandbox = sandbox_of(state)
        if sandbox is None:
            raise ServerError(
                ErrorKind.NOT_FOUND, "this server runs no code interpreter (serve --code-interpreter turns it on)"
            )
        return sandbox, owner_of(request.headers).digest

    def container_for(request: Request) -> tuple[Sandbox, Container]:
        sandbox, owner = sandbox_for(request)
        ident = request.path_params["container_id"]
        c = sandbox.get(ident)
        if c is None or (c.owner is not None and c.owner != owner):
            raise ServerError(ErrorKind.NOT_FOUND, f"no live container {ident!r} for this API key", "container_id")
        return sandbox, c

    def answer(handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            try:
                result = await handler(request)
            except ServerError as exc:
                return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)
            return result if isinstance(result, Response) else JSONResponse(result)

        return endpoint

    async def create(request: Request) -> dict[str, Any]:
        sandbox, owner = sandbox_for(request)
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            raise ServerError(ErrorKind.BAD_REQUEST, "the body is not JSON") from None
        if not isinstance(body, dict):
            raise ServerError(ErrorKind.BAD_REQUEST, "the body must be a JSON object")
        name = body.get("name", "")
        if not isinstance(name, str):
            raise ServerError(ErrorKind.BAD_REQUEST, "name must be a string", "name")
        if body.get("file_ids"):
            raise ServerError(ErrorKind.BAD_REQUEST, "this server has no Files API to copy from", "file_ids")
        policy = body.get("network_policy")
        if policy is not None and (not isinstance(policy, dict) or policy.get("type") not in NETWORK_POLICIES):
            raise ServerError(ErrorKind.BAD_REQUEST, "containers here have no network: only disabled", "network_policy")
        for unsupported in ("memory_limit", "expires_after"):
            if body.get(unsupported) is not None:
                raise ServerError(
                    ErrorKind.BAD_REQUEST,
                    f"{unsupported} is set by the server's operator (--code-interpreter-*), not per container",
                    unsupported,
                )
        unknown = sorted(set(body) - {"name", "file_ids", "network_policy", "memory_limit", "expires_after"})
        if unknown:
            raise ServerError(ErrorKind.BAD_REQUEST, f"unknown field {unknown[0]!r}", unknown[0])
        try:
            c = await sandbox.create(name=name, owner=owner)
        except RuntimeError as exc:
            raise ServerError(ErrorKind.TOO_MANY_REQUESTS, str(exc), headers={"Retry-After": "5"}) from None
        return container_object(sandbox, c)

    async def listing(request: Request) -> dict[str, Any]:
        sandbox, owner = sandbox_for(request)
        mine = [c for c in sandbox.containers.values() if c.owner == owner]
        return _page([container_object(sandbox, c) for c in sorted(mine, key=lambda c: c.created_at)], request)

    async def retrieve(request: Request) -> dict[str, Any]:
        sandbox, c = container_for(request)
        return container_object(sandbox, c)

    async def delete(request: Request) -> dict[str, Any]:
        sandbox, c = container_for(request)
        await sandbox.delete(c.id)
        return {"id": c.id, "object": "container.deleted", "deleted": True}

    async def files(request: Request) -> dict[str, Any]:
        sandbox, c = container_for(request)
        return _page([file_object(c, f) for f in sandbox.files(c)], request)

    def one_file(request: Request) -> tuple[Sandbox, Container, ContainerFile]:
        sandbox, c = container_for(request)
        ident = request.path_params["file_id"]
        for f in sandbox.files(c):
            if f.id == ident:
                return sandbox, c, f
        raise ServerError(ErrorKind.NOT_FOUND, f"no file {ident!r} in container {c.id!r}", "file_id")

    async def file_retrieve(request: Request) -> dict[str, Any]:
        _, c, f = one_file(request)
        return file_object(c, f)

    async def file_content(request: Request) -> Response:
        sandbox, c, f = one_file(request)
        path = sandbox.file_path(c, f.id)
        if path is None:
            raise ServerError(ErrorKind.NOT_FOUND, f"file {f.id!r} is gone", "file_id")
        return FileResponse(path, media_type="application/octet-stream", filename=path.name)

    async def file_delete(request: Request) -> dict[str, Any]:
        sandbox, c, f = one_file(request)
        path = sandbox.file_path(c, f.id)
        if path is not None:
            path.unlink(missing_ok=True)
        return {"id": f.id, "object": "container.file.deleted", "deleted": True}

    base = PREFIX + "/{container_id}"
    return [
        Route(PREFIX, answer(create), methods=["POST"]),
        Route(PREFIX, answer(listing), methods=["GET"]),
        Route(base, answer(retrieve), methods=["GET"]),
        Route(base, answer(delete), methods=["DELETE"]),
        Route(base + "/files", answer(files), methods=["GET"]),
        Route(base + "/files/{file_id}", answer(file_retrieve), methods=["GET"]),
        Route(base + "/files/{file_id}", answer(file_delete), methods=["DELETE"]),
        Route(base + "/files/{file_id}/content", answer(file_content), methods=["GET"]),
    ]
