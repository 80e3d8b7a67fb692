"""free_loopback_port: a port of the loopback address a server can listen on."""
import socket

from pjrt.distributed.launch import free_loopback_port


def test_a_free_loopback_port_can_be_listened_on():
    with socket.socket() as busy:  # a port in use is never the answer
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = free_loopback_port()
        assert 0 < port < 65536 and port != busy.getsockname()[1]
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))
            server.listen()
