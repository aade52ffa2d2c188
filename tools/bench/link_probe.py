"""Measures one link of tools/bench-scaling between two rank namespaces: the
round trip of one byte over TCP (median of 50) and the rate of a bulk send,
timed until the receiver has counted every byte. Each side runs in its own
namespace (links.py's prefix):

    python3 link_probe.py serve ADDRESS PORT      (exits after one client)
    python3 link_probe.py send ADDRESS PORT MBYTES

`send` prints one line: "rtt_ms=R rate_bits=B". Every wait has a deadline
(30 s): a link that carries nothing ends the probe with exit 1."""
import socket
import statistics
import sys
import time

DEADLINE_S = 30
ROUNDS = 50


def receive_exactly(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the other side closed the connection")
        data += chunk
    return data


def serve(address, port):
    with socket.create_server((address, port)) as server:
        server.settimeout(DEADLINE_S)
        conn, _ = server.accept()
        with conn:
            conn.settimeout(DEADLINE_S)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for _ in range(ROUNDS):
                conn.sendall(receive_exactly(conn, 1))
            total = 0
            while chunk := conn.recv(1 << 20):
                total += len(chunk)
            conn.sendall(f"{total}\n".encode())


def send(address, port, mbytes):
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            conn = socket.create_connection((address, port), timeout=1)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    with conn:
        conn.settimeout(DEADLINE_S)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rtts = []
        for _ in range(ROUNDS):
            t = time.perf_counter()
            conn.sendall(b"x")
            receive_exactly(conn, 1)
            rtts.append(time.perf_counter() - t)
        block = b"\0" * (1 << 20)
        total = int(mbytes * (1 << 20))
        t = time.perf_counter()
        for sent in range(0, total, len(block)):
            conn.sendall(block[:min(len(block), total - sent)])
        conn.shutdown(socket.SHUT_WR)
        counted = int(conn.makefile().readline())
        seconds = time.perf_counter() - t
    if counted != total:
        sys.exit(f"link_probe: sent {total} bytes, {counted} arrived")
    print(f"rtt_ms={statistics.median(rtts) * 1e3:.3f} rate_bits={total * 8 / seconds:.0f}")


if __name__ == "__main__":
    try:
        if len(sys.argv) == 4 and sys.argv[1] == "serve":
            serve(sys.argv[2], int(sys.argv[3]))
        elif len(sys.argv) == 5 and sys.argv[1] == "send":
            send(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
        else:
            sys.exit(__doc__)
    except (OSError, ValueError) as e:
        sys.exit(f"link_probe: {e}")
