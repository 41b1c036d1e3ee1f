"""How a reset peer shows through asyncio's sendfile, and that ``broker.connection`` tells it
from a sendfile that is really unavailable: on real loopback sockets, no mocks."""

from __future__ import annotations

import asyncio
import socket
import struct
import time

from odradek.broker.connection import _connected


def test_a_peer_reset_before_a_sendfiles_first_byte_is_told_apart(tmp_path):
    """asyncio turns the ECONNRESET of a sendfile's first call into SendfileNotAvailableError
    (the errno is lost): ``_connected`` is what tells a gone peer (peer_gone) from a bug."""
    path = tmp_path / "segment.log"
    path.write_bytes(b"r" * 65536)

    async def scenario() -> tuple[bool, bool, type[BaseException] | None]:
        accepted: asyncio.Future[asyncio.Transport] = asyncio.get_running_loop().create_future()

        class Server(asyncio.Protocol):
            def connection_made(self, transport):
                accepted.set_result(transport)

        server = await asyncio.get_running_loop().create_server(Server, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        transport = await accepted
        alive = _connected(transport)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()  # a reset, before the loop has read anything of it
        time.sleep(0.05)  # the kernel has it; the loop, not running, has not looked
        raised = None
        try:
            with open(path, "rb") as file:
                await asyncio.get_running_loop().sendfile(transport, file, 0, 65536, fallback=False)
        except BaseException as e:  # noqa: BLE001 - what asyncio raises is the point
            raised = type(e)
        gone = not _connected(transport)
        transport.close()
        server.close()
        await server.wait_closed()
        return alive, gone, raised

    alive, gone, raised = asyncio.run(scenario())
    assert alive
    assert gone
    assert raised is asyncio.SendfileNotAvailableError
