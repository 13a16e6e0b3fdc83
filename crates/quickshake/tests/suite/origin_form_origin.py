"""An HTTP/1.1 origin that takes only origin-form targets, for the proxy_origin_form tests:
Python's own http.server (SimpleHTTPRequestHandler, which answers 404 to an absolute-form
target such as `GET https://127.0.0.1:9443/index.html HTTP/1.1`), recording what it was sent.

  origin_form_origin.py DIR LOG   serves DIR on 127.0.0.1 (a free port, printed alone on the
      first stdout line); appends one JSON line per request to LOG: {"line": the request line
      as received, "host": its Host header or null}. A request with `Upgrade: websocket` is
      answered 101 (RFC 6455's accept), then its bytes are echoed until the peer closes.
"""

import base64
import hashlib
import json
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
LOCK = threading.Lock()


class Handler(SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def record(self):
        line = json.dumps({"line": self.requestline, "host": self.headers.get("Host")})
        with LOCK, open(sys.argv[2], "a", encoding="utf-8") as f:
            f.write(line + "\n")

    def do_GET(self):
        self.record()
        if (self.headers.get("Upgrade") or "").lower() == "websocket":
            self.websocket()
        else:
            super().do_GET()

    def websocket(self):
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        while True:
            data = self.connection.recv(65536)
            if not data:
                break
            self.connection.sendall(data)
        self.close_connection = True


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=sys.argv[1]))
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
