"""``adaptune dashboard``: serve the store as a live web page (a thin shell over ``adaptune.dashboard``)."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dashboard", help="serve a results database as a live web page (read-only)")
    p.add_argument("db", nargs="?", default="adaptune.db",
                   help="SQLite file or database URL (postgresql://...) a tuning run wrote to (default: adaptune.db)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, default=8080, help="port to listen on (default: 8080)")
    p.add_argument("--model", action="append", default=[], metavar="FILE.json",
                   help="a saved code-variant model: its choice per input on the per-input page (repeatable; default: none)")
    p.set_defaults(func=_dashboard)


def _dashboard(args: argparse.Namespace) -> int:
    try:
        from adaptune.dashboard import serve
    except ImportError as exc:
        print(f"adaptune dashboard: error: needs its extra: pip install 'adaptune[dashboard]' ({exc})",
              file=sys.stderr)
        return 2
    print(f"adaptune dashboard: serving {args.db} on http://{args.host}:{args.port}/ (Ctrl-C stops)", flush=True)
    serve(args.db, host=args.host, port=args.port, models=args.model)
    return 0
