"""Registers a broker id from its own process and holds it until killed (for SIGKILL tests).

Usage: python hold_registration.py HOSTS BROKER_ID SESSION_TIMEOUT_S. Prints "registered" once the
node exists, then sleeps; the test kills it with SIGKILL so its session is never closed.
"""

from __future__ import annotations

import asyncio
import sys

from odradek.zk.client import ZkClient
from odradek.zk.paths import BrokerInfo, Endpoint
from odradek.zk.registration import BrokerRegistrar

HOLD_S_MAX = 120.0  # the test kills it long before; this bounds an orphan


async def main(hosts: str, broker_id: int, session_timeout_s: float) -> None:
    zk = ZkClient(hosts, session_timeout_s=session_timeout_s)
    await zk.astart()
    info = BrokerInfo((Endpoint("PLAINTEXT", "127.0.0.1", 9092),))
    await BrokerRegistrar(zk, broker_id, info).register()
    print("registered", flush=True)
    await asyncio.sleep(HOLD_S_MAX)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
