"""A learning switch that holds every frame DELAY_MS before sending it on:
the latency of tools/bench-scaling's links, since this kernel has no netem.
Runs inside the switch namespace (links.py) on its veth ports, through
AF_PACKET sockets; the ports' offloads are off, so that every frame is whole
and has its checksums. A frame goes to the port its destination MAC was last
seen on, or to every other port while unknown. The delay is the same for
every frame, so one FIFO in arrival order is in due order too. A frame the
port cannot take at its due time (its tbf queue full) is dropped, as a
switch would; TCP sends it again. SIGTERM ends it, printing what it carried.

    python3 delay_switch.py DELAY_MS PORT...
"""
import collections
import os
import select
import signal
import socket
import sys
import time

ETH_P_ALL = 0x0003


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    delay = float(sys.argv[1]) / 1e3
    ports = []
    for name in sys.argv[2:]:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind((name, 0))
        s.setblocking(False)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        ports.append(s)
    by_fd = {s.fileno(): i for i, s in enumerate(ports)}
    where = {}  # MAC → port index, learnt from source addresses
    queue = collections.deque()  # (due, out ports, frame)
    counts = {"forwarded": 0, "dropped": 0}
    running = [True]
    signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
    while running[0]:
        now = time.monotonic()
        while queue and queue[0][0] <= now:
            _, outs, frame = queue.popleft()
            for i in outs:
                try:
                    ports[i].send(frame)
                    counts["forwarded"] += 1
                except (BlockingIOError, OSError):
                    counts["dropped"] += 1
        # select's timeout is in microseconds; poll's and epoll's are whole
        # milliseconds, which would add up to 1 ms to a delay.
        timeout = max(0.0, queue[0][0] - now) if queue else 0.1
        ready, _, _ = select.select(ports, [], [], timeout)
        for s in ready:
            i = by_fd[s.fileno()]
            while True:
                try:
                    frame, addr = ports[i].recvfrom(65536)
                except BlockingIOError:
                    break
                if addr[2] == socket.PACKET_OUTGOING:
                    continue  # what this switch sent out of the port
                where[frame[6:12]] = i
                out = where.get(frame[0:6])
                outs = [out] if out is not None else [j for j in range(len(ports)) if j != i]
                if out != i:
                    queue.append((time.monotonic() + delay, outs, frame))
    print(f"delay_switch: {counts['forwarded']} frames forwarded, {counts['dropped']} dropped",
          file=sys.stderr)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        os._exit(0)
