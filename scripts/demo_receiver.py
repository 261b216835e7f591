"""The demo's callback receiver: 127.0.0.1 only, prints each callback, checks its signature.

/ok answers 204; /recheck asks once to be checked again in 15 minutes, then 200;
/flaky answers 500 once, then 200. Stops by itself after --lifetime seconds."""

import argparse
import base64
import hashlib
import hmac
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

seen: dict[str, int] = {}


def signature_ok(secret: str, headers, body: bytes) -> bool:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(s.split(",", 1)[1] == expected for s in headers["webhook-signature"].split())


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        doc = json.loads(body)
        n = seen[self.path] = seen.get(self.path, 0) + 1
        sig = "signed ok" if signature_ok(self.server.secret, self.headers, body) else "BAD SIG"
        status, answer = 204, b""
        if self.path == "/recheck" and n == 1:
            status, answer = 200, b'{"recheck_in": "15m"}'
        elif self.path == "/flaky" and n == 1:
            status = 500
        print(f"  receiver <- {self.path:9} job {doc['id'][:10]}… check {doc['check']} "
              f"attempt {doc['attempt']} payload {json.dumps(doc['payload'])} [{sig}] "
              f"-> {status}", flush=True)
        self.send_response(status)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port-file", required=True)
    p.add_argument("--secret", required=True)
    p.add_argument("--lifetime", type=float, default=120)
    args = p.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.secret = args.secret
    threading.Timer(args.lifetime, server.shutdown).start()
    with open(args.port_file, "w") as f:
        f.write(str(server.server_address[1]))
    try:
        server.serve_forever()
    finally:
        sys.exit(0)


if __name__ == "__main__":
    main()
