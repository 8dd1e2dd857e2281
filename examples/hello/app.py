"""Fleetweft's sample app: a tiny HTTP service answering its version.

The agent starts it with PORT, FLEETWEFT_RELEASE (the release digest) and
FLEETWEFT_VERSION (the bundle manifest's version, e.g. the `--version v2`
given to `fleetweft bundle sign`) set, and probes GET /hello (an exact body,
"hello from <version>"). GET /status answers JSON for probe specs that judge
a field (`--expect-json /version='"v2"'`): the version, and the release
digest, echoed back. BAKED_VERSION, when set in the file (the demo and the
tests bake v1, v2 in so that each release's app file differs), wins over
FLEETWEFT_VERSION. HELLO_ANSWER_WRONGLY=1 (set only by
an agent started with --allow-fault-injection) makes it answer a healthy 200
with the wrong body: the failure a process check cannot see.
HELLO_CRASH_ON_START=1 (same switch) makes it exit at once: a restart loop.
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Replaced by runtime::demo::sign_hello; None: the bundle's version decides.
BAKED_VERSION = None
VERSION = BAKED_VERSION or os.environ.get("FLEETWEFT_VERSION") or "unversioned"


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/hello":
            wrong = os.environ.get("HELLO_ANSWER_WRONGLY") == "1"
            body = ("goodbye from " if wrong else "hello from ") + VERSION
            payload = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        elif self.path == "/status":
            wrong = os.environ.get("HELLO_ANSWER_WRONGLY") == "1"
            payload = json.dumps(
                {
                    "app": "hello",
                    "version": "goodbye" if wrong else VERSION,
                    "release": os.environ.get("FLEETWEFT_RELEASE", ""),
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        elif self.path == "/healthz":
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    def log_message(self, fmt, *args):  # keep the agent's log readable
        sys.stderr.write("hello-app %s: %s\n" % (VERSION, fmt % args))


def main():
    if os.environ.get("HELLO_CRASH_ON_START") == "1":
        sys.stderr.write("hello-app %s: crashing on start (fault injection)\n" % VERSION)
        sys.exit(3)
    port = int(os.environ.get("PORT", "0"))
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.serve_forever()


if __name__ == "__main__":
    main()
