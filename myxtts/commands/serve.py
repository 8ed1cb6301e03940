"""``myxtts serve --checkpoint RUN``: the voice behind the OpenAI speech API (and Wyoming).

See :mod:`myxtts.serve`. Serves until Ctrl-C; one log line per request.
"""
from __future__ import annotations

import os
import signal

from myxtts.commands.common import add_checkpoint, add_command, err
from myxtts.errors import UserError

API_KEY_ENV = "MYXTTS_API_KEY"


def add_parser(sub) -> None:
    p = add_command(sub, "serve", "serve a voice: the OpenAI speech API and Wyoming",
                    "Serve a trained model over HTTP (POST /v1/audio/speech, the OpenAI speech API; "
                    "GET /v1/audio/voices; POST /v1/audio/voices, a voice from a clip; GET /health; "
                    "GET /, a page to listen in a browser) and, with --wyoming, Home Assistant's "
                    "Wyoming protocol. Concurrent requests are decoded together and streamed back.")
    add_checkpoint(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    p.add_argument("--port", type=int, default=8000, help="HTTP port")
    p.add_argument("--voices", metavar="DIR",
                   help="a folder of voices: one sub-folder of reference clips per voice, named by the folder")
    p.add_argument("--data", metavar="CACHE",
                   help="the cache the model was trained on: its speakers become voices "
                        "(default: the one the run recorded when its training started)")
    p.add_argument("--api-key", help=f"require this Bearer token on /v1/ (default: ${API_KEY_ENV}, if set)")
    p.add_argument("--wyoming", metavar="tcp://HOST:PORT", help="also serve Wyoming here")
    p.add_argument("--max-batch", type=int, default=16,
                   help="sentences decoded together at most (1: no batching across requests)")
    p.add_argument("--max-requests", type=int, default=64,
                   help="requests in flight at most; more are answered 503 with Retry-After")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    p.add_argument("--vocoder", metavar="RUN_OR_FILE",
                   help="vocoder run or file (default: the run's own RUN/vocoder if trained, else "
                        "Griffin-Lim, lower quality); griffin-lim: no vocoder")
    p.set_defaults(func=run)


def require() -> None:
    """The serve extra, or one line saying how to install it."""
    import importlib.util

    missing = [m for m in ("fastapi", "uvicorn", "wyoming", "python_multipart") if importlib.util.find_spec(m) is None]
    if missing:
        raise UserError(f"serving needs {', '.join(missing)}: pip install 'myxtts[serve]'")


def check_free(host: str, port: int, option: str) -> None:
    """Before seconds of loading: the address can be listened on."""
    import socket

    try:
        with socket.create_server((host, port)):
            pass
    except OSError as e:
        why = os.strerror(e.errno) if e.errno else str(e)
        raise UserError(f"{option}: cannot listen on {host}:{port} ({why.lower()})") from None


def run(args) -> int:
    require()
    if not 0 < args.port < 65536:
        raise UserError(f"--port {args.port}: give a port from 1 to 65535")
    if args.max_batch < 1 or args.max_requests < 1:
        raise UserError("--max-batch and --max-requests must be at least 1")
    wyoming_uri = None
    if args.wyoming:
        from myxtts.serve.wyoming import check_uri

        wyoming_uri = check_uri(args.wyoming)
    check_free(args.host, args.port, f"--port {args.port}")
    if wyoming_uri:
        from urllib.parse import urlparse

        u = urlparse(wyoming_uri)
        check_free(u.hostname, u.port, f"--wyoming {wyoming_uri}")
    api_key = args.api_key or os.environ.get(API_KEY_ENV) or None
    from myxtts.serve import build
    from myxtts.serve.openai_api import create_app, serve_forever
    from myxtts.serve.page import add_page

    engine, voices = build(args.checkpoint, args.vocoder, args.device, args.data, args.voices,
                           args.max_batch, args.max_requests, log=err, step=args.step)
    app = create_app(engine, voices, api_key, log=err)
    add_page(app, engine, args.voices, bool(api_key), log=err)
    extra = None
    if wyoming_uri:
        from myxtts.serve.wyoming import serve as serve_wyoming

        extra = lambda: serve_wyoming(wyoming_uri, engine, voices)
    err(f"serving {len(voices.names)} voice(s) ({', '.join(voices.names)}) on http://{args.host}:{args.port}"
        + (f" and Wyoming on {wyoming_uri}" if wyoming_uri else "")
        + (" (API key required)" if api_key else "") + "; Ctrl-C stops")
    # SIGTERM (systemd, docker stop, a process manager) stops it as Ctrl-C does: uvicorn catches
    # either, shuts down, restores the handlers it found and raises the signal again.
    signal.signal(signal.SIGTERM, _as_ctrl_c)
    try:
        serve_forever(app, args.host, args.port, extra)
    except KeyboardInterrupt:  # for a server, the way to stop
        pass
    finally:
        engine.stop()
    err("myxtts serve: stopped")
    return 0


def _as_ctrl_c(signum, frame) -> None:
    raise KeyboardInterrupt
