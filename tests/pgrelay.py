"""A TCP relay on 127.0.0.1 in front of a server's socket (PostgreSQL's unix socket) that a
test can cut: after ``cut()`` it forwards nothing either way and answers no new connection
(held open, never answered: a host that is gone), and with ``reset=True`` it also resets the
connections that were open (a failover, a restarted host). Only loopback is ever used."""

from __future__ import annotations

import selectors
import socket
import threading


class Relay:
    """``Relay(path_or_addr)``; ``.port`` on 127.0.0.1; ``cut()``; ``close()``."""

    def __init__(self, target) -> None:
        self.target = target  # a unix socket path (str) or (host, port)
        self._srv = socket.socket()
        self._srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._srv.bind(("127.0.0.1", 0))
        self._srv.listen(64)
        self.port = self._srv.getsockname()[1]
        self._cut = threading.Event()
        self._stop = threading.Event()
        self._socks: list[socket.socket] = []
        self._pumps: list[threading.Thread] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def cut(self, reset: bool = False) -> None:
        """Stop forwarding; ``reset``: also drop the open connections (as a failover or a
        restarted host does) rather than leave them silent (a partition, a frozen server)."""
        self._cut.set()
        if reset:
            import struct
            for s in list(self._socks):
                try:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    s.close()
                except OSError:
                    pass

    def close(self) -> None:
        """Returns once the relay's threads have ended, then closes its sockets: none is
        closed under a thread still using it."""
        self._stop.set()
        try:
            self._srv.shutdown(socket.SHUT_RDWR)  # wakes the accept() (closing does not)
        except OSError:
            pass
        self._srv.close()
        self._thread.join(5)
        for t in self._pumps:  # the accept thread, ended, starts no more
            t.join(5)
        for s in self._socks:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._srv.accept()
            except OSError:
                return
            self._socks.append(client)
            if self._stop.is_set():
                return
            if self._cut.is_set():
                continue  # held open, never answered
            fam = socket.AF_UNIX if isinstance(self.target, str) else socket.AF_INET
            up = socket.socket(fam)
            try:
                up.connect(self.target)
            except OSError:
                client.close()
                up.close()
                continue
            self._socks.append(up)
            pump = threading.Thread(target=self._pump, args=(client, up), daemon=True)
            self._pumps.append(pump)
            pump.start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        with selectors.DefaultSelector() as sel:
            try:
                sel.register(a, selectors.EVENT_READ, b)
                sel.register(b, selectors.EVENT_READ, a)
            except (OSError, ValueError):  # closed by cut(reset=True) before it began
                return
            self._forward(sel)

    def _forward(self, sel: selectors.BaseSelector) -> None:
        while not self._stop.is_set():
            for key, _ in sel.select(0.05):
                if self._cut.is_set():
                    continue
                try:
                    data = key.fileobj.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                try:
                    key.data.sendall(data)
                except OSError:
                    return
            if self._cut.is_set():
                self._stop.wait()  # held open, forwarding nothing, until close()
                return
