"""A JSON-over-HTTP server on 127.0.0.1 for the stand-ins of tests/k8s (the API server
and master status pages): every request, parsed, goes to answer(request) -> (status,
JSON body), on the server's own threads."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit


def serve_json(answer):
    """Starts the server; returns it (url in .url; shutdown() and server_close() stop it).
    request: {"method", "path", "query": {name: value}, "headers": {lower name: value},
    "content_type", "body": parsed JSON or None}."""

    class Handler(BaseHTTPRequestHandler):
        def _handle(self):
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            request = {"method": self.command, "path": url.path,
                       "query": dict(parse_qsl(url.query, keep_blank_values=True)),
                       "headers": {k.lower(): v for k, v in self.headers.items()},
                       "content_type": self.headers.get("Content-Type", ""),
                       "body": json.loads(raw) if raw else None}
            status, body = answer(request)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PATCH = do_POST = do_DELETE = do_PUT = _handle

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server
