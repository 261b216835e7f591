"""The receiver every figure posts to, on 127.0.0.1: nginx answering 204 when installed, else
awty's test receiver in its load mode (``python -m awty.testing.receiver --constant 204``:
uvloop + httptools, several processes sharing the port with SO_REUSEPORT)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from awty.testing.receiver import free_port

from .common import CHILDREN, die_with_parent, stop_proc, wait_port


class Receiver:
    name = "receiver"
    port = 0

    def pids(self) -> list[int]:
        return []

    def stop(self) -> None: ...

    def alive(self) -> bool:
        return True


class NginxReceiver(Receiver):
    def __init__(self, binary: str, workdir: Path, workers: int):
        self.prefix = workdir / "nginx"
        self.prefix.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        version = subprocess.run([binary, "-v"], capture_output=True, text=True).stderr.strip()
        self.name = f"{version.split(': ', 1)[-1]} ({workers} worker{'s' * (workers > 1)}, " \
                    f"return 204, keep-alive)"
        conf = self.prefix / "nginx.conf"
        p = self.prefix
        conf.write_text(f"""
worker_processes {workers};
daemon off;
pid {p}/nginx.pid;
error_log {p}/error.log warn;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  client_body_temp_path {p}/body;
  proxy_temp_path {p}/proxy; fastcgi_temp_path {p}/fastcgi; uwsgi_temp_path {p}/uwsgi;
  scgi_temp_path {p}/scgi;
  client_body_buffer_size 64k;
  keepalive_requests 100000000;
  keepalive_timeout 600s;
  server {{
    listen 127.0.0.1:{self.port} backlog=4096;
    location / {{ return 204; }}
  }}
}}
""")
        self.proc = subprocess.Popen(
            [binary, "-e", str(p / "error.log"), "-p", str(p), "-c", str(conf)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=die_with_parent)
        CHILDREN.append(self.proc)
        try:
            wait_port(self.port)
        except RuntimeError:
            self.stop()
            raise

    def pids(self) -> list[int]:
        pid = self.proc.pid
        try:
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            kids = []
        return [pid, *map(int, kids)]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        stop_proc(self.proc, signal.SIGQUIT)


class PythonReceiver(Receiver):
    def __init__(self, procs: int):
        self.port = free_port()
        try:
            import uvloop  # noqa: F401

            loop = "uvloop"
        except ImportError:
            loop = "asyncio"
        self.name = (f"Python {loop} + httptools asyncio.Protocol ({procs} process"
                     f"{'es' * (procs > 1)}, SO_REUSEPORT, 204, keep-alive)")
        self.procs = []
        for _ in range(procs):
            p = subprocess.Popen([sys.executable, "-m", "awty.testing.receiver", "--constant",
                                  "204", "--port", str(self.port), "--reuse-port", "--parent",
                                  str(os.getpid()), "--lifetime", str(4 * 3600)],
                                 stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
            CHILDREN.append(p)
            self.procs.append(p)
        try:
            wait_port(self.port)
            time.sleep(0.2)  # let every process reach accept()
        except RuntimeError:
            self.stop()
            raise

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def stop(self) -> None:
        for p in self.procs:
            stop_proc(p, signal.SIGTERM)


def start_receiver(a, workdir: Path) -> Receiver:
    nginx = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")
         if os.access(p, os.X_OK)), None)
    if a.receiver == "nginx" and not nginx:
        raise SystemExit("--receiver nginx: nginx is not installed")
    if a.receiver in ("auto", "nginx") and nginx:
        try:
            return NginxReceiver(nginx, workdir, a.receiver_procs or 1)
        except (RuntimeError, OSError) as e:
            if a.receiver == "nginx":
                raise
            print(f"bench: nginx did not start ({e}); using the Python receiver", file=sys.stderr)
    return PythonReceiver(a.receiver_procs or 2)
