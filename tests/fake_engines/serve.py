"""Run a fake inference engine: `python tests/fake_engines/serve.py KIND [--port 0] [options]`.

KIND is vllm, sglang (both /generate and /v1/completions), llamacpp or ollama, or `all`: every engine
under its own path prefix (`/vllm/v1/completions`, `/sglang-incremental/generate`, see
`wire.VARIANTS`). The process prints
`fake engine KIND listening on PORT` once it accepts connections, and runs until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harmony_responses import load_harmony_encoding  # noqa: E402

from httpserver import serve  # noqa: E402
from wire import ROUTES, Options, all_routes, model_listings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kind", choices=[*sorted(ROUTES), "all"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--fail-rate", type=float, default=0.0, help="share of plain requests failing mid-stream")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-token-ids", action="store_true", help="/v1/completions returns text only")
    parser.add_argument("--incremental", action="store_true", help="SGLang --incremental-streaming-output")
    parser.add_argument("--token-delay-ms", type=float, help="pause per chunk (default 1 ms)")
    parser.add_argument("--models", default="", help="comma-separated model names the engine lists (default: none)")
    args = parser.parse_args()
    encoding = load_harmony_encoding("HarmonyGptOss")
    options = Options(
        fail_rate=args.fail_rate,
        seed=args.seed,
        no_token_ids=args.no_token_ids,
        incremental=args.incremental,
        token_delay_ms=args.token_delay_ms,
    )

    def ready(port: int) -> None:
        print(f"fake engine {args.kind} listening on {port}", flush=True)

    routes = all_routes(encoding, options) if args.kind == "all" else ROUTES[args.kind](encoding, options)
    models = [m for m in args.models.split(",") if m]
    listings = {} if args.kind == "all" else model_listings(args.kind, models)
    asyncio.run(serve(routes, args.port, ready, listings))


if __name__ == "__main__":
    main()
