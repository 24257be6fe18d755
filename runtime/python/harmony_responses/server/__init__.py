"""`harmony-responses serve`: an Open Responses and Chat Completions server in front of inference engines.

Needs the `server` extra (Starlette, uvicorn, httpx, prometheus-client). Nothing is imported here, so
the CLI can register the command without loading them: use `harmony_responses.server.app.create_app`.
"""
