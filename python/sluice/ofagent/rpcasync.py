"""sluiced's JSON-RPC from asyncio: calls, and a subscription's notifications."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any

from sluice.rpc import RpcError

LINE_LIMIT = 64 * 1024 * 1024


class AsyncRpc:
    """One connection to sluiced. Answers come back in order; notifications (a subscribed
    connection's events) go to ON_EVENT as they arrive, between answers."""

    def __init__(self, path: str,
                 on_event: Callable[[str, dict[str, Any]], Awaitable[None]] | None = None
                 ) -> None:
        self.path = path
        self.on_event = on_event
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.task: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_unix_connection(self.path,
                                                                      limit=LINE_LIMIT)
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.reader is not None
        try:
            while True:
                line = await self.reader.readline()
                if not line:
                    break
                msg = json.loads(line)
                if "id" not in msg and "method" in msg:
                    if self.on_event is not None:
                        await self.on_event(msg["method"], msg.get("params", {}))
                    continue
                fut = self.pending.pop(msg.get("id"), None)
                if fut is None or fut.done():
                    continue
                if "error" in msg:
                    err = msg["error"]
                    fut.set_exception(RpcError(err.get("code", 0), err.get("message", "")))
                else:
                    fut.set_result(msg.get("result"))
        except (ConnectionError, asyncio.IncompleteReadError, json.JSONDecodeError):
            pass
        finally:
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("sluiced closed the connection"))
            self.pending.clear()
            self.closed.set()

    async def call(self, method: str, **params: Any) -> Any:
        if self.writer is None or self.closed.is_set():
            raise ConnectionError("not connected to sluiced")
        rid = next(self.ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[rid] = fut
        line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        self.writer.write(line.encode() + b"\n")
        await self.writer.drain()
        return await fut

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(ConnectionError):
                await self.writer.wait_closed()
        if self.task is not None:
            await asyncio.gather(self.task, return_exceptions=True)
