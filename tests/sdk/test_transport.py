"""The SDK's own HTTP/1.1 transport against a scripted socket server: keep-alive, re-dial on
a connection the server closed, framings of the answer, timeouts and errors."""

from __future__ import annotations

import asyncio
import os
import resource
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

import jobq.client as jobq
from jobq.client._transport import LeanAsyncTransport, LeanTransport

# What the scripted server does with one request on one connection: it gets the
# connection, the request's head and body, and how many requests came before on this
# connection; it writes the answer (or not) and returns False to close the connection.
Script = Callable[[socket.socket, bytes, bytes, int], bool]

JSON_OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}"


class ScriptedServer:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = 0
        self.requests: list[bytes] = []
        self.closed = threading.Semaphore(0)  # released each time it closes a connection
        self._threads: list[threading.Thread] = []
        self._done = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._done.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        served = 0
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    try:
                        chunk = conn.recv(65536)
                    except OSError:
                        return
                    if not chunk:
                        return
                    buf += chunk
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buf) < length:
                    buf += conn.recv(65536)
                body, buf = buf[:length], buf[length:]
                self.requests.append(head + b"\r\n\r\n" + body)
                if not self.script(conn, head, body, served):
                    break
                served += 1
        self.closed.release()

    def close(self) -> None:
        self._done.set()
        self.listener.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Script], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(script: Script) -> ScriptedServer:
        server = ScriptedServer(script)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def answer_json(conn: socket.socket, head: bytes, body: bytes, served: int) -> bool:
    conn.sendall(JSON_OK)
    return True


def get_sync(server: ScriptedServer, n: int, **kwargs: Any) -> list[httpx.Response]:
    with httpx.Client(base_url=server.url, transport=LeanTransport(), **kwargs) as http:
        return [http.post("/v1/x", json={"i": i}) for i in range(n)]


async def get_async(server: ScriptedServer, n: int, **kwargs: Any) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=server.url, transport=LeanAsyncTransport(),
                                 **kwargs) as http:
        return [await http.post("/v1/x", json={"i": i}) for i in range(n)]


def test_requests_reuse_one_connection(serve: Callable[[Script], ScriptedServer]) -> None:
    server = serve(answer_json)
    answers = get_sync(server, 3)
    assert [a.json() for a in answers] == [{"ok": True}] * 3
    assert server.connections == 1
    assert b'{"i":2}' in server.requests[2] and b"Content-Length: 7" in server.requests[2]
    asyncio.run(get_async(server, 3))
    assert server.connections == 2


def test_an_idle_connection_the_server_closed_is_redialled(
    serve: Callable[[Script], ScriptedServer],
) -> None:
    def once_then_close(conn: socket.socket, head: bytes, body: bytes, served: int) -> bool:
        conn.sendall(JSON_OK)  # says nothing of closing, as after a keep-alive timeout
        return False

    server = serve(once_then_close)

    def closed() -> None:  # the server has closed the connection the answer came on
        assert server.closed.acquire(timeout=5)

    with httpx.Client(base_url=server.url, transport=LeanTransport()) as http:
        for i in range(3):
            assert http.post("/v1/x", json={"i": i}).status_code == 200
            closed()

    async def run_async() -> None:
        async with httpx.AsyncClient(base_url=server.url, transport=LeanAsyncTransport()) as http:
            for i in range(3):
                assert (await http.post("/v1/x", json={"i": i})).status_code == 200
                closed()

    asyncio.run(run_async())
    assert server.connections == 6 and len(server.requests) == 6


def test_only_an_idempotent_request_racing_a_close_is_sent_again(
    serve: Callable[[Script], ScriptedServer],
) -> None:
    def drop_the_second(conn: socket.socket, head: bytes, body: bytes, served: int) -> bool:
        # The second request on the first connection: read, then closed without a byte
        # of answer, as when a keep-alive timeout fires just as the request arrives.
        if served == 1 and len(server.requests) <= 2:
            return False
        conn.sendall(JSON_OK)
        return True

    def run(method: str, use_async: bool) -> list[int]:
        server.requests.clear()

        async def twice_async() -> list[int]:
            async with httpx.AsyncClient(transport=LeanAsyncTransport()) as http:
                return [(await http.request(method, server.url)).status_code for _ in "ab"]

        if use_async:
            return asyncio.run(twice_async())
        with httpx.Client(transport=LeanTransport()) as http:
            return [http.request(method, server.url).status_code for _ in "ab"]

    server = serve(drop_the_second)
    for use_async in (False, True):
        assert run("GET", use_async) == [200, 200]
        assert len(server.requests) == 3  # the second one twice
        # A POST the server read may have been acted on: it is not sent again.
        with pytest.raises(httpx.RemoteProtocolError, match="not sending POST again"):
            run("POST", use_async)
        assert len(server.requests) == 2


def test_chunked_and_until_close_answers(serve: Callable[[Script], ScriptedServer]) -> None:
    def chunked(conn: socket.socket, head: bytes, body: bytes, served: int) -> bool:
        if served == 0:
            conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            conn.sendall(b"4;ext=1\r\n{\"a\"\r\n")
            conn.sendall(b"5\r\n:[1,2\r\n2\r\n]}\r\n0\r\nX-Trailer: t\r\n\r\n")
            return True
        conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"b\":")
        conn.sendall(b"3}")
        return False

    server = serve(chunked)
    assert [a.json() for a in get_sync(server, 2)] == [{"a": [1, 2]}, {"b": 3}]
    assert [a.json() for a in asyncio.run(get_async(server, 2))] == [{"a": [1, 2]}, {"b": 3}]
    assert server.connections == 2  # each client: one kept alive, then closed on request


def test_no_answer_in_time_is_a_transport_error(serve: Callable[[Script], ScriptedServer]) -> None:
    def never_answer(conn: socket.socket, head: bytes, body: bytes, served: int) -> bool:
        threading.Event().wait(5)
        return False

    server = serve(never_answer)
    with pytest.raises(jobq.TransportError, match="ReadTimeout"):
        with jobq.Client(server.url, timeout=0.2, transport=LeanTransport()) as client:
            client.get("1")

    async def async_get() -> None:
        async with jobq.AsyncClient(server.url, timeout=0.2) as client:
            await client.get("1")

    with pytest.raises(jobq.TransportError, match="ReadTimeout"):
        asyncio.run(async_get())


def test_refused_and_broken_connections_are_transport_errors(
    serve: Callable[[Script], ScriptedServer],
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as unused:
        port = unused.getsockname()[1]
    with pytest.raises(jobq.TransportError, match="ConnectError"):
        with jobq.Client(f"http://127.0.0.1:{port}") as client:
            client.get("1")

    def garbage(conn: socket.socket, head: bytes, body: bytes, served: int) -> bool:
        conn.sendall(b"NOT HTTP\r\n\r\n")
        return False

    server = serve(garbage)
    with pytest.raises(jobq.TransportError, match="RemoteProtocolError"):
        with jobq.Client(server.url) as client:
            client.get("1")

    async def async_get() -> None:
        async with jobq.AsyncClient(server.url) as client:
            await client.get("1")

    with pytest.raises(jobq.TransportError, match="RemoteProtocolError"):
        asyncio.run(async_get())


def test_many_concurrent_requests_wait_for_a_connection(
    serve: Callable[[Script], ScriptedServer],
) -> None:
    server = serve(answer_json)

    async def burst() -> list[int]:
        transport = LeanAsyncTransport(max_connections=4)
        async with httpx.AsyncClient(base_url=server.url, transport=transport) as http:
            answers = await asyncio.gather(*(http.get("/x") for _ in range(40)))
        return [a.status_code for a in answers]

    assert asyncio.run(burst()) == [200] * 40
    assert server.connections <= 4


def test_the_clients_use_it_unless_a_proxy_tls_or_a_transport_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mock = httpx.MockTransport(lambda request: httpx.Response(200, json={}))
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    assert isinstance(jobq.Client("http://jobq.test")._transport, LeanTransport)
    assert isinstance(jobq.AsyncClient("http://jobq.test")._transport, LeanAsyncTransport)
    assert jobq.Client("http://jobq.test", transport=mock)._transport is mock
    # None: httpx.Client's own transport, which reads the proxy settings and does TLS.
    assert jobq.Client("https://jobq.test")._transport is None
    assert jobq.AsyncClient("https://jobq.test")._transport is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.test:3128")  # not for http:// URLs
    assert isinstance(jobq.Client("http://jobq.test")._transport, LeanTransport)
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.test:3128")
    assert jobq.Client("http://jobq.test")._transport is None
    assert jobq.AsyncClient("http://jobq.test")._transport is None


def test_an_async_client_outlives_its_event_loop(serve: Callable[[Script], ScriptedServer]) -> None:
    server = serve(answer_json)
    client = jobq.AsyncClient(server.url)

    async def call() -> int:
        return (await client._http.get(server.url)).status_code

    # Each asyncio.run is a new loop; a connection from the old one must not be reused.
    assert [asyncio.run(call()) for _ in range(2)] == [200, 200]
    assert server.connections == 2


def test_a_streamed_request_body_is_sent_whole(serve: Callable[[Script], ScriptedServer]) -> None:
    server = serve(answer_json)

    def parts() -> Iterator[bytes]:
        yield b'{"a":'
        yield b"1}"

    async def aparts() -> Any:
        yield b'{"b":'
        yield b"2}"

    async def send_async() -> int:
        async with httpx.AsyncClient(transport=LeanAsyncTransport()) as http:
            return (await http.post(server.url, content=aparts())).status_code

    with httpx.Client(transport=LeanTransport()) as http:
        assert http.post(server.url, content=parts()).status_code == 200
    assert asyncio.run(send_async()) == 200
    for request, body in zip(server.requests, (b'{"a":1}', b'{"b":2}'), strict=True):
        head = request.lower()
        assert request.endswith(b"\r\n\r\n" + body)
        assert b"content-length: 7\r\n" in head and b"transfer-encoding" not in head


def test_the_async_transport_runs_under_uvloop(serve: Callable[[Script], ScriptedServer]) -> None:
    # uvicorn[standard] brings uvloop, and users run their AsyncClient and Worker under it;
    # its TCP transport is no asyncio.Transport subclass, which the transport once assumed.
    import uvloop

    server = serve(answer_json)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        answers = runner.run(get_async(server, 3))
    assert [a.json() for a in answers] == [{"ok": True}] * 3
    assert server.connections == 1


def test_answers_h11_refuses_are_protocol_errors(serve: Callable[[Script], ScriptedServer]) -> None:
    # int(size, 16) read "0x1f" as 31 and "1_0" as 16; HTTP's chunk size is hex digits only.
    def odd_chunk_size(conn: socket.socket, head: bytes, body: bytes, served: int) -> bool:
        size = (b"0x1f", b"1_0")[served % 2]
        data = b"x" * int(size, 16)
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     + size + b"\r\n" + data + b"\r\n0\r\n\r\n")
        return False

    server = serve(odd_chunk_size)
    for _ in range(2):
        with pytest.raises(httpx.RemoteProtocolError):
            get_sync(server, 1)
        with pytest.raises(httpx.RemoteProtocolError):
            asyncio.run(get_async(server, 1))


def test_https_goes_through_the_https_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # A plain-TCP proxy on loopback that records each CONNECT and refuses it: enough to see
    # where the SDK sent an https request (it must not go straight to the service).
    connects: list[bytes] = []
    proxy = socket.create_server(("127.0.0.1", 0))

    def serve_proxy() -> None:
        while True:
            try:
                conn, _ = proxy.accept()
            except OSError:
                return
            with conn:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    head += chunk
                connects.append(head.split(b"\r\n", 1)[0])
                conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    threading.Thread(target=serve_proxy, daemon=True).start()
    with socket.create_server(("127.0.0.1", 0)) as unused:  # nothing listens there
        service = f"127.0.0.1:{unused.getsockname()[1]}"
    for name in ("HTTP_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.getsockname()[1]}")

    async def async_get() -> None:
        async with jobq.AsyncClient(f"https://{service}") as client:
            await client.get("1")

    try:
        with pytest.raises(jobq.TransportError), jobq.Client(f"https://{service}") as client:
            client.get("1")
        with pytest.raises(jobq.TransportError):
            asyncio.run(async_get())
        assert connects == [f"CONNECT {service} HTTP/1.1".encode()] * 2
        # NO_PROXY names the host: straight to it (nothing listens: refused), as httpx does.
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        with pytest.raises(jobq.TransportError, match="ConnectError"), jobq.Client(f"https://{service}") as client:
            client.get("1")
        assert len(connects) == 2
    finally:
        proxy.close()


def test_keep_alive_holds_with_more_than_1024_files_open(
    serve: Callable[[Script], ScriptedServer],
) -> None:
    # select.select() refuses a descriptor >= 1024: the idle check failed, and every
    # connection was dropped after one request in any process with that many files open.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 1400
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
    files: list[int] = []
    try:
        files = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
        server = serve(answer_json)
        assert len(get_sync(server, 5)) == 5
        assert server.connections == 1
        assert len(asyncio.run(get_async(server, 5))) == 5
        assert server.connections == 2
    finally:
        for fd in files:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_read_timeout_is_per_read_in_both_halves(serve: Callable[[Script], ScriptedServer]) -> None:
    # As in httpx: a slow but steady answer is not cut off; only a silence of `read` is.
    # The answer takes 8 x 0.1 s in all against a 0.5 s read timeout.
    def slowly(conn: socket.socket, head: bytes, body: bytes, served: int) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n")
        for _ in range(8):
            threading.Event().wait(0.1)
            conn.sendall(b"x")
        return True

    server = serve(slowly)
    timeout = httpx.Timeout(5, read=0.5)
    assert [a.content for a in get_sync(server, 1, timeout=timeout)] == [b"x" * 8]
    assert [a.content for a in asyncio.run(get_async(server, 1, timeout=timeout))] == [b"x" * 8]


def test_each_request_sends_its_own_headers_and_length(
    serve: Callable[[Script], ScriptedServer],
) -> None:
    # The transport remembers header sets h11 has checked; a request must still go with its
    # own headers and Content-Length, never those of an earlier one that looked alike.
    server = serve(answer_json)
    bodies = [b'{"i":1}', b'{"i":1}', b'{"i":10}', b'{"i":1}']
    tokens = ["a", "a", "a", "b"]

    def send_sync(http: httpx.Client) -> None:
        for body, token in zip(bodies, tokens, strict=True):
            http.post("/v1/x", content=body, headers={"Authorization": f"Bearer {token}"})

    async def send_async() -> None:
        async with httpx.AsyncClient(base_url=server.url, transport=LeanAsyncTransport()) as http:
            for body, token in zip(bodies, tokens, strict=True):
                await http.post("/v1/x", content=body,
                                headers={"Authorization": f"Bearer {token}"})

    with httpx.Client(base_url=server.url, transport=LeanTransport()) as http:
        send_sync(http)
    asyncio.run(send_async())
    assert len(server.requests) == 8
    for sent, body, token in zip(server.requests, bodies * 2, tokens * 2, strict=True):
        assert sent.endswith(b"\r\n\r\n" + body)
        assert f"Content-Length: {len(body)}\r\n".encode() in sent
        assert f"Authorization: Bearer {token}\r\n".encode() in sent
        assert sent.count(b"Authorization:") == 1
