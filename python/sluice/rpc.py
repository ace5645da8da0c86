"""A JSON-RPC 2.0 client for sluiced's control socket (docs/protocol.md), stdlib only.

One request is one line of JSON on a Unix stream socket and so is its answer; answers come
back in order. Typical use::

    with RpcClient("/run/sluice/sluiced.sock", timeout=5.0) as rpc:
        rpc.call("add-switch", name="br0", mode="patch")
        ports = rpc.call("list-ports", switch="br0")

An error answer raises `RpcError` (its `code` is one of docs/protocol.md's codes, see
`ERROR_NAMES`). Not reaching the daemon, losing the connection, a closed connection in the
middle of an answer and a timeout raise `ConnectError`; an answer that is not a JSON-RPC 2.0
answer to the request raises `ProtocolError`, a kind of `ConnectError`. After any
`ConnectError` the client is closed: its connection can no longer be trusted to be in step.

A client is one connection, for one thread at a time.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from types import MappingProxyType, TracebackType
from typing import Any

DEFAULT_SOCKET = "/run/sluice/sluiced.sock"
SOCKET_ENV = "SLUICE_SOCKET"
DEFAULT_TIMEOUT = 30.0

# The error codes of docs/protocol.md, by code.
ERROR_NAMES: Mapping[int, str] = MappingProxyType({
    -32700: "parse error",
    -32600: "invalid request",
    -32601: "method not found",
    -32602: "invalid params",
    -32603: "internal error",
    -32000: "not found",
    -32001: "already exists",
    -32002: "bad port spec",
    -32003: "device error",
    -32004: "limit reached",
    -32005: "wrong state",
})


def default_socket(environ: Mapping[str, str] | None = None) -> str:
    """The socket to use when none is named: $SLUICE_SOCKET if set and not empty, else the
    default /run/sluice/sluiced.sock. ENVIRON defaults to os.environ."""
    env = os.environ if environ is None else environ
    return env.get(SOCKET_ENV) or DEFAULT_SOCKET


class RpcError(Exception):
    """An error answer from the daemon: CODE is the JSON-RPC error code, MESSAGE its text."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message
        self.data = data

    @property
    def name(self) -> str:
        """The code's name in docs/protocol.md ("not found"), or "error" for another code."""
        return ERROR_NAMES.get(self.code, "error")

    def __str__(self) -> str:
        return f"{self.message} (code {self.code})"


class ConnectError(Exception):
    """No answer could be had: the daemon is unreachable, went away or did not answer in time.

    SOCKET_PATH is the socket that was tried; STAGE is where it failed: "connect" (nobody
    reached), "lost" (the connection broke or was closed before a whole answer came),
    "timeout" (no answer in time) or "answer" (ProtocolError: the answer made no sense)."""

    def __init__(self, message: str, socket_path: str = "", stage: str = "connect") -> None:
        super().__init__(message)
        self.socket_path = socket_path
        self.stage = stage


class ProtocolError(ConnectError):
    """The peer answered with something that is not a JSON-RPC 2.0 answer to the request."""

    def __init__(self, message: str, socket_path: str = "") -> None:
        super().__init__(message, socket_path, "answer")


def encode_request(method: str, params: Mapping[str, Any] | None,
                   request_id: int | None) -> bytes:
    """One request line: named PARAMS, no newline inside, a newline at the end. Without
    REQUEST_ID the request is a notification (the daemon does not answer it)."""
    request: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": dict(params or {})}
    if request_id is not None:
        request["id"] = request_id
    # json.dumps escapes control characters in strings, so the line holds no raw newline.
    return json.dumps(request, separators=(",", ":")).encode() + b"\n"


def decode_answer(line: bytes, request_id: int, socket_path: str = "") -> Any:
    """The result in LINE, the answer to request REQUEST_ID as read from the socket.

    Raises RpcError for an error answer, ConnectError when LINE is empty or lacks its
    newline (the daemon closed the connection before or while answering), ProtocolError when
    LINE is not a JSON-RPC 2.0 answer to that request. An error answer whose id is null is
    accepted: the daemon answers so when it could not read the request's id."""
    where = f"sluiced at {socket_path}" if socket_path else "sluiced"
    if not line:
        raise ConnectError(f"{where} closed the connection without answering", socket_path,
                           "lost")
    if not line.endswith(b"\n"):
        raise ConnectError(f"{where} closed the connection in the middle of an answer "
                           f"(after {len(line)} bytes)", socket_path, "lost")
    try:
        answer = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProtocolError(f"{where} answered with a line that is not JSON ({e})",
                            socket_path) from e
    if not isinstance(answer, dict) or answer.get("jsonrpc") != "2.0":
        raise ProtocolError(f"{where} answered with something that is not JSON-RPC 2.0: "
                            f"{_clip(line)}", socket_path)
    error = answer.get("error")
    if error is not None:
        if (not isinstance(error, dict) or not isinstance(error.get("code"), int)
                or not isinstance(error.get("message"), str)):
            raise ProtocolError(f"{where} sent a malformed error: {_clip(line)}", socket_path)
        if answer.get("id") not in (request_id, None):
            raise ProtocolError(f"{where} answered request {answer.get('id')!r}, not "
                                f"{request_id}", socket_path)
        raise RpcError(error["code"], error["message"], error.get("data"))
    if answer.get("id") != request_id:
        raise ProtocolError(f"{where} answered request {answer.get('id')!r}, not {request_id}",
                            socket_path)
    if "result" not in answer:
        raise ProtocolError(f"{where} sent an answer with neither result nor error: "
                            f"{_clip(line)}", socket_path)
    return answer["result"]


def _clip(line: bytes, limit: int = 120) -> str:
    text = line.decode(errors="replace").rstrip("\n")
    return text if len(text) <= limit else text[:limit] + "..."


def _connect_reason(e: OSError, socket_path: str = "") -> str:
    if isinstance(e, FileNotFoundError):
        return "no such socket"
    if isinstance(e, ConnectionRefusedError):
        return "nobody listens on it (a socket file left by a daemon that stopped?)"
    if isinstance(e, PermissionError):
        return f"permission denied ({_permission_hint(socket_path)})"
    if isinstance(e, TimeoutError):
        return "timed out"
    return e.strerror or str(e)


def _permission_hint(socket_path: str) -> str:
    """Who may use SOCKET_PATH: its owner and group (docs/install.md, 'The sluice group')."""
    import grp
    import pwd
    try:
        st = os.stat(socket_path)
    except OSError:
        return "the socket or a directory above it is not open to this user"
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = str(st.st_gid)
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    return (f"the socket is {owner}'s and group {group}'s, mode {st.st_mode & 0o777:04o}: "
            f"run as {owner} or as a member of group {group}")


class RpcClient:
    """One connection to sluiced. TIMEOUT is in seconds for connecting and for each answer;
    None waits for ever. SOCKET_PATH defaults to default_socket()."""

    def __init__(self, socket_path: str | os.PathLike[str] | None = None,
                 timeout: float | None = DEFAULT_TIMEOUT) -> None:
        self.socket_path = os.fspath(socket_path) if socket_path is not None \
            else default_socket()
        self.timeout = timeout
        self._next_id = 1
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(self.socket_path)
        except OSError as e:
            self.sock.close()
            raise ConnectError(f"cannot reach sluiced at {self.socket_path}: "
                               f"{_connect_reason(e, self.socket_path)}", self.socket_path) from e
        self.reader = self.sock.makefile("rb")
        self._closed = False

    def call(self, method: str, /, **params: Any) -> Any:
        """Runs METHOD with named PARAMS and returns its result (see `request`)."""
        return self.request(method, params)

    def request(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """Sends one request, reads its answer and returns the result.

        Raises RpcError for an error answer, ConnectError (or ProtocolError) when there is
        no usable answer."""
        self._check_open()
        request_id = self._next_id
        self._next_id += 1
        line = encode_request(method, params, request_id)
        try:
            self.sock.sendall(line)
        except OSError as e:
            # The daemon may have answered and closed already (e.g. too many connections):
            # its answer says more than EPIPE does.
            self._raise_pending_error(request_id)
            self.close()
            raise ConnectError(f"lost the connection to sluiced at {self.socket_path}: "
                               f"{e.strerror or e}", self.socket_path, "lost") from e
        try:
            answer = self.reader.readline()
        except TimeoutError as e:
            self.close()
            raise ConnectError(f"sluiced at {self.socket_path} did not answer '{method}' "
                               f"within {self.timeout:g} s", self.socket_path, "timeout") from e
        except OSError as e:
            self.close()
            raise ConnectError(f"lost the connection to sluiced at {self.socket_path}: "
                               f"{e.strerror or e}", self.socket_path, "lost") from e
        try:
            return decode_answer(answer, request_id, self.socket_path)
        except ConnectError:
            self.close()
            raise

    def notify(self, method: str, /, **params: Any) -> None:
        """Sends METHOD as a notification: no id, and the daemon sends no answer."""
        self._check_open()
        try:
            self.sock.sendall(encode_request(method, params, None))
        except OSError as e:
            self.close()
            raise ConnectError(f"lost the connection to sluiced at {self.socket_path}: "
                               f"{e.strerror or e}", self.socket_path, "lost") from e

    def _raise_pending_error(self, request_id: int) -> None:
        try:
            self.sock.settimeout(0.2)
            line = self.reader.readline()
        except OSError:
            return
        try:
            decode_answer(line, request_id, self.socket_path)
        except RpcError:
            self.close()
            raise
        except ConnectError:
            return

    def _check_open(self) -> None:
        if self._closed:
            raise ConnectError(f"the connection to sluiced at {self.socket_path} is closed",
                               self.socket_path, "lost")

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Closes the connection; closing twice is harmless."""
        if not self._closed:
            self._closed = True
            self.reader.close()
            self.sock.close()

    def __enter__(self) -> RpcClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
