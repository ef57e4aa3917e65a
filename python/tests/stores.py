"""Objects in the storage emulators of scripts/emulators.sh (fake-gcs-server,
moto, azurite, on 127.0.0.1) for the Beam tests: putting inputs and getting
outputs with the standard library, and a proxy through which object_store
writes to fake-gcs-server.

The environment is ``eval "$(bash scripts/emulators.sh env)"``'s
(``INFEED_EMULATORS=1``; scripts/test.sh sets it); without it ``EMULATORS``
is false and the tests that need them skip.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import http.client
import json
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

EMULATORS = os.environ.get("INFEED_EMULATORS") == "1"
BUCKET = os.environ.get("INFEED_TEST_BUCKET", "infeed-test")
# Azurite's well-known development account (public, documented by Microsoft;
# scripts/emulators.sh uses it too).
AZ_ACCOUNT = "devstoreaccount1"
AZ_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


def _call(req: urllib.request.Request) -> bytes:
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            data: bytes = r.read()
            return data
    except urllib.error.HTTPError as e:
        body = e.read()[:300]
        raise OSError(f"{req.get_method()} {req.full_url}: HTTP {e.code}: {body!r}") from e


def _split(url: str) -> tuple[str, str, str]:
    scheme, rest = url.split("://", 1)
    bucket, key = rest.split("/", 1)
    return scheme, bucket, key


def _s3(method: str, bucket: str, key: str, data: bytes = b"") -> urllib.request.Request:
    """A SigV4-signed request to the S3 endpoint of ``AWS_ENDPOINT``."""
    endpoint = os.environ["AWS_ENDPOINT"]
    host = urlsplit(endpoint).netloc
    region = os.environ.get("AWS_REGION", "us-east-1")
    access, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    day = stamp[:8]
    path = "/" + quote(bucket, safe="-_.~") + "/" + quote(key, safe="/-_.~")
    payload = hashlib.sha256(data).hexdigest()
    headers = {"host": host, "x-amz-content-sha256": payload, "x-amz-date": stamp}
    names = sorted(headers)
    canonical = "\n".join(
        [method, path, "", *(f"{n}:{headers[n]}" for n in names), "", ";".join(names), payload]
    )
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    k = ("AWS4" + secret).encode()
    for part in (day, region, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
    auth = (
        f"AWS4-HMAC-SHA256 Credential={access}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    # Without a Content-Type urllib sends a form's, and moto reads the body
    # as a form (storing nothing).
    return urllib.request.Request(
        endpoint + path,
        data=data if method == "PUT" else None,
        method=method,
        headers={
            **{n: v for n, v in headers.items() if n != "host"},
            "Authorization": auth,
            "Content-Type": "application/octet-stream",
        },
    )


def _azure(method: str, container: str, blob: str, data: bytes = b"") -> urllib.request.Request:
    """A SharedKey-signed request to azurite (``AZURITE_BLOB_STORAGE_URL``)."""
    base = os.environ["AZURITE_BLOB_STORAGE_URL"].rstrip("/")
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT")
    headers = {"x-ms-date": date, "x-ms-version": "2021-08-06"}
    content_type = ""
    if method == "PUT":
        headers["x-ms-blob-type"] = "BlockBlob"
        content_type = "application/octet-stream"
    path = f"/{AZ_ACCOUNT}/{container}/{quote(blob, safe='/-_.~')}"
    length = str(len(data)) if data else ""
    to_sign = "\n".join(
        [method, "", "", length, "", content_type, "", "", "", "", "", ""]
        + [f"{n}:{headers[n]}" for n in sorted(headers)]
        + [f"/{AZ_ACCOUNT}{path}"]
    )
    key = base64.b64decode(AZ_KEY)
    signature = base64.b64encode(hmac.new(key, to_sign.encode(), hashlib.sha256).digest())
    headers["Authorization"] = f"SharedKey {AZ_ACCOUNT}:{signature.decode()}"
    if content_type:
        headers["Content-Type"] = content_type
    return urllib.request.Request(
        base + path, data=data if method == "PUT" else None, method=method, headers=headers
    )


def _gcs_endpoint() -> str:
    return os.environ["INFEED_GCS_ENDPOINT"].rstrip("/")


def put(url: str, data: bytes) -> None:
    """Stores ``data`` as the object ``url`` (``gs://``, ``s3://``, ``az://``)."""
    scheme, bucket, key = _split(url)
    if scheme == "gs":
        _call(
            urllib.request.Request(
                f"{_gcs_endpoint()}/upload/storage/v1/b/{bucket}/o"
                f"?uploadType=media&name={quote(key, safe='')}",
                data=data,
                method="POST",
                headers={"Content-Type": "application/octet-stream"},
            )
        )
    elif scheme == "s3":
        _call(_s3("PUT", bucket, key, data))
    else:
        _call(_azure("PUT", bucket, key, data))


def get(url: str) -> bytes:
    """The bytes of the object ``url``."""
    scheme, bucket, key = _split(url)
    if scheme == "gs":
        return _call(
            urllib.request.Request(
                f"{_gcs_endpoint()}/storage/v1/b/{bucket}/o/{quote(key, safe='')}?alt=media"
            )
        )
    if scheme == "s3":
        return _call(_s3("GET", bucket, key))
    return _call(_azure("GET", bucket, key))


def create_gcs_bucket(name: str) -> None:
    """A bucket in fake-gcs-server (one that exists already is fine)."""
    req = urllib.request.Request(
        f"{_gcs_endpoint()}/storage/v1/b?project=test",
        data=json.dumps({"name": name}).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        _call(req)
    except OSError as e:
        if "HTTP 409" not in str(e):
            raise


class _XmlToJson(BaseHTTPRequestHandler):
    """object_store writes to GCS through its XML API (PUT an object, PUT
    with ``x-goog-copy-source`` to copy, DELETE), which fake-gcs-server does
    not serve (fsouza/fake-gcs-server#331); this turns those three into its
    JSON API and passes every other request (GET, HEAD, listings) on as it
    is. A multipart upload (a shard over object_store's 10 MiB buffer) is
    refused: the tests write small shards."""

    protocol_version = "HTTP/1.1"
    upstream = ""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _object(self) -> tuple[str, str]:
        path = unquote(self.path.split("?", 1)[0]).lstrip("/")
        bucket, key = path.split("/", 1)
        return bucket, key

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        host = urlsplit(self.upstream).netloc
        conn = http.client.HTTPConnection(host, timeout=30)
        conn.request(method, path, body=body, headers={"Content-Type": "application/octet-stream"})
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, data

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if "?" in self.path:
            self._send(501, b"multipart uploads are not translated")
            return
        bucket, key = self._object()
        source = self.headers.get("x-goog-copy-source")
        if source is None:
            status, data = self._json(
                "POST",
                f"/upload/storage/v1/b/{bucket}/o?uploadType=media&name={quote(key, safe='')}",
                body,
            )
        else:
            src_bucket, src_key = unquote(source).lstrip("/").split("/", 1)
            status, data = self._json(
                "POST",
                f"/storage/v1/b/{src_bucket}/o/{quote(src_key, safe='')}"
                f"/copyTo/b/{bucket}/o/{quote(key, safe='')}",
            )
        if status != 200:
            self._send(status, data)
            return
        etag = str(json.loads(data).get("etag") or json.loads(data).get("generation"))
        self._send(200, headers={"ETag": f'"{etag}"'})

    def do_DELETE(self) -> None:
        bucket, key = self._object()
        status, data = self._json("DELETE", f"/storage/v1/b/{bucket}/o/{quote(key, safe='')}")
        self._send(status if status != 200 else 204, data if status >= 300 else b"")

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        host = urlsplit(self.upstream).netloc
        conn = http.client.HTTPConnection(host, timeout=30)
        headers = {n: v for n, v in self.headers.items() if n.lower() not in ("host", "connection")}
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        # A HEAD's Content-Length is the object's size: passed on as it is.
        dropped = ("connection", "transfer-encoding")
        if self.command != "HEAD":
            dropped += ("content-length",)
        passed = {n: v for n, v in resp.getheaders() if n.lower() not in dropped}
        if self.command == "HEAD":
            passed["Content-Length"] = resp.getheader("Content-Length", "0")
        self._send(resp.status, data, passed)

    do_GET = _forward
    do_HEAD = _forward
    do_POST = _forward


@contextmanager
def gcs_writable(tmp: Path) -> Iterator[str]:
    """A proxy in front of fake-gcs-server that takes object_store's writes
    (``_XmlToJson``), and ``GOOGLE_SERVICE_ACCOUNT`` pointing at it for this
    process and the Beam workers it starts; gives the proxy's URL."""
    handler = type("Handler", (_XmlToJson,), {"upstream": _gcs_endpoint()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    key = tmp / "gcs-proxy-key.json"
    key.write_text(
        json.dumps(
            {
                "private_key": "unused",
                "private_key_id": "unused",
                "client_email": "test@example.com",
                "gcs_base_url": url,
                "disable_oauth": True,
            }
        )
    )
    before = os.environ.get("GOOGLE_SERVICE_ACCOUNT")
    os.environ["GOOGLE_SERVICE_ACCOUNT"] = str(key)
    try:
        yield url
    finally:
        if before is None:
            del os.environ["GOOGLE_SERVICE_ACCOUNT"]
        else:
            os.environ["GOOGLE_SERVICE_ACCOUNT"] = before
        server.shutdown()
        server.server_close()
