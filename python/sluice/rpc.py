"""A JSON-RPC 2.0 client for sluiced's control socket (docs/protocol.md)."""

from __future__ import annotations

import json
import os
import socket
from typing import Any

DEFAULT_SOCKET = "/run/sluice/sluiced.sock"


def default_socket() -> str:
    return os.environ.get("SLUICE_SOCKET", DEFAULT_SOCKET)


class RpcError(Exception):
    """An error answer from the daemon: CODE is the JSON-RPC error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message


class ConnectError(Exception):
    """The daemon could not be reached or went away mid-answer."""


class RpcClient:
    """One connection to sluiced; requests are answered in order, one line each."""

    def __init__(self, path: str | None = None, timeout: float = 30.0) -> None:
        self.path = path or default_socket()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(self.path)
        except OSError as e:
            self.sock.close()
            raise ConnectError(f"cannot reach sluiced at {self.path}: {e.strerror or e}") from e
        self.reader = self.sock.makefile("rb")
        self.next_id = 1

    def call(self, method: str, **params: Any) -> Any:
        request = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.next_id += 1
        try:
            self.sock.sendall(json.dumps(request).encode() + b"\n")
            line = self.reader.readline()
        except OSError as e:
            raise ConnectError(f"lost the connection to sluiced at {self.path}: {e}") from e
        if not line.endswith(b"\n"):
            raise ConnectError(f"sluiced at {self.path} closed the connection mid-answer")
        answer = json.loads(line)
        if "error" in answer:
            raise RpcError(int(answer["error"]["code"]), str(answer["error"]["message"]))
        return answer["result"]

    def close(self) -> None:
        self.reader.close()
        self.sock.close()

    def __enter__(self) -> RpcClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
