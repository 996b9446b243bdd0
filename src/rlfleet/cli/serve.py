"""`rlfleet serve CHECKPOINT`: an inference-only HTTP endpoint for a trained policy
(rlfleet.serving.inference_server; no Ray Serve needed)."""
from __future__ import annotations

import argparse

from rlfleet.cli.common import UsageError

# The parser is built for every command, so it imports nothing from rlfleet.serving (torch);
# tests/serving/test_inference_server.py checks these against the server's own values.
TOKEN_RULE = ("a token of 16 or more characters (--token TOKEN or $RLFLEET_SERVER_TOKEN) is required to bind "
              "any address but 127.0.0.1, localhost and ::1; clients send it as 'Authorization: Bearer <token>'")
TOKEN_EXAMPLE = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
DEFAULT_MAX_BATCH = 256
DEFAULT_MAX_REQUEST_ROWS = 4096


def add_serve_parser(subs) -> None:
    serve = subs.add_parser(
        "serve", help="serve a saved policy's actions over HTTP",
        description="Restore a checkpoint and answer POST /v1/compute_actions (batches of observations, "
                    "recurrent state in and out, explore on or off) and GET /v1/health, in JSON (or msgpack "
                    "for 'Accept: application/msgpack'). Binds 127.0.0.1 by default; "
                    f"{TOKEN_RULE}.",
        epilog="example:\n  rlfleet serve ~/rlfleet_results/PPO_CartPole-v1_.../checkpoint_10 --port 8000\n"
               "  curl -s -H 'Content-Type: application/json' -d '{\"observations\": [[0, 0, 0, 0]]}' "
               "http://127.0.0.1:8000/v1/compute_actions\n"
               f"a token for --token: {TOKEN_EXAMPLE}",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    serve.add_argument("checkpoint", metavar="CHECKPOINT", help="a checkpoint folder")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to bind (default 127.0.0.1; any other address needs --token)")
    serve.add_argument("--port", type=int, default=8000, help="TCP port (default 8000; 0: any free one)")
    serve.add_argument("--token", default=None,
                       help="the clients' shared secret, 16 or more characters (default "
                            "$RLFLEET_SERVER_TOKEN); required unless --host is 127.0.0.1, localhost or ::1")
    serve.add_argument("--tls-cert", default=None, metavar="PEM", help="serve HTTPS with this certificate")
    serve.add_argument("--tls-key", default=None, metavar="PEM", help="... and this private key")
    serve.add_argument("--max-batch", type=int, default=DEFAULT_MAX_BATCH, metavar="N",
                       help=f"most observations in one forward pass (default {DEFAULT_MAX_BATCH}); a longer "
                            "request is served in chunks of N")
    serve.add_argument("--max-request-rows", type=int, default=DEFAULT_MAX_REQUEST_ROWS, metavar="N",
                       help=f"most observations in one request (default {DEFAULT_MAX_REQUEST_ROWS}); more are "
                            "refused (413)")
    serve.add_argument("--batch-wait-ms", type=float, default=2.0, metavar="MS",
                       help="how long a request waits for others to batch with (default 2)")
    serve.add_argument("--trust-module", action="append", default=[], dest="trust_modules", metavar="NAME",
                       help="let the checkpoint's classes and functions be imported from module/package NAME "
                            "(repeatable; rlfleet and gymnasium are always trusted, nothing else by default)")
    serve.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)")
    serve.set_defaults(func=cmd_serve, subparser=serve)


def cmd_serve(args: argparse.Namespace) -> int:
    from rlfleet.serving.inference_server import serve_checkpoint
    from rlfleet.serving.security import CLI_NAMES, ServerSecurity, token_from_env

    try:
        # Before the (slow) restore, and in the flags' own names.
        ServerSecurity.checked(args.host, token_from_env(args.token), args.tls_cert, args.tls_key,
                               what="rlfleet serve", names=CLI_NAMES)
        server = serve_checkpoint(args.checkpoint, trusted_modules=args.trust_modules, address=args.host,
                                  port=args.port, token=args.token, tls_cert=args.tls_cert, tls_key=args.tls_key,
                                  max_batch=args.max_batch, max_request_rows=args.max_request_rows,
                                  batch_wait_ms=args.batch_wait_ms)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(f"rlfleet serve: {args.checkpoint} on {server.url} (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server.server_close()
        server.trainer.stop()
    return 0


__all__ = ["add_serve_parser", "cmd_serve"]
