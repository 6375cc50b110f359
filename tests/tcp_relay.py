"""A TCP relay in a process of its own: ``python -m tests.tcp_relay LISTEN_PORT TARGET_HOST TARGET_PORT``.

Tests put it between a server and its database; killing it cuts every
connection at once and refuses new ones, as a database host that went away
would, and starting it again on the same port brings the database back.
"""

import asyncio
import sys


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def main(listen_port, target_host, target_port):
    async def relay(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection(target_host, target_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))

    server = await asyncio.start_server(relay, "127.0.0.1", listen_port, reuse_address=True)
    print(f"relaying 127.0.0.1:{listen_port} to {target_host}:{target_port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
