"""What every Python peer sends: the same signed callback (Standard Webhooks headers, the
secret from PEER_SECRET, signed at send time), posted with requests, one Session per thread
(how most Python schedulers' jobs post). Runs inside the peer's own venv: stdlib + requests."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import threading
import time

import requests

_SECRET = base64.b64decode(os.environ.get("PEER_SECRET", "whsec_")[6:])
_local = threading.local()


def fire(url: str, key: str) -> None:
    s = getattr(_local, "s", None)
    if s is None:
        s = _local.s = requests.Session()
    body = json.dumps({"id": key, "payload": {"order": key, "status": "placed"}}).encode()
    ts = str(int(time.time()))
    mac = hmac.new(_SECRET, f"{key}.{ts}.".encode() + body, hashlib.sha256).digest()
    r = s.post(url, data=body, timeout=30, headers={
        "Content-Type": "application/json", "webhook-id": key, "webhook-timestamp": ts,
        "webhook-signature": "v1," + base64.b64encode(mac).decode()})
    r.raise_for_status()
