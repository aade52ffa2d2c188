"""Network links for tools/bench-scaling and tools/bench-solve-ranks: each rank in a network namespace of
its own, joined to the others through a switch namespace by a veth pair whose
two ends are each limited to the link's rate by `tc tbf`, so that a rank sends
and receives at most that rate, as through a NIC on a switch that does not
block. With a delay, a forwarding process (delay_switch.py) takes the place of
the bridge and holds every frame that long (this kernel has no netem).

    phsc-<pid>-r<r> [eth0 10.214.0.<r+1>/24, tbf] ==veth== [p<r>, tbf] phsc-<pid>-sw
    phsc-<pid>-sw: bridge br0 over p0..p<N-1>, or delay_switch.py on them

Nothing leaves: the rank namespaces have only loopback and their veth, with
no default route. Each change is a command (argv), listed before it runs, so
that a dry run prints exactly these; down() kills what runs in the namespaces
and deletes them, which deletes the veths, qdiscs and bridge too."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SUBNET = "10.214.0"
UNITS = {"k": 1e3, "m": 1e6, "g": 1e9}


def parse_rate(text):
    """'10gbit', '1gbit', '100mbit' → bits/s; ValueError otherwise."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg])bit", text.strip().lower())
    if not m:
        raise ValueError(f"{text!r}: expected a rate such as 10gbit, 1gbit or 100mbit")
    return float(m.group(1)) * UNITS[m.group(2)]


def parse_link(text):
    """'lo' → None (loopback); 'RATE' or 'RATE+Dms' → (text, bits/s, one-way
    delay in ms); ValueError otherwise."""
    if text == "lo":
        return None
    rate, _, delay = text.partition("+")
    m = re.fullmatch(r"(\d+(?:\.\d+)?)ms", delay) if delay else None
    if delay and not m:
        raise ValueError(f"{text!r}: expected RATE or RATE+DELAYms, e.g. 1gbit+0.5ms")
    return text, parse_rate(rate), float(m.group(1)) if m else 0.0


def describe_rate(bits):
    return f"{bits / 1e9:.3g} Gb/s" if bits >= 1e9 else f"{bits / 1e6:.3g} Mb/s"


def delete_namespace(ns):
    """Kills what runs in `ns`, then deletes it (its veth ends, qdiscs and
    bridge with it): a namespace with a process in it outlives `ip netns
    del`, and so would its veth."""
    for pid in subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                              text=True).stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)


class Links:
    """N rank namespaces on a switch, each link `rate` bits/s both ways and
    `delay_ms` one way (0: a kernel bridge, no forwarding process)."""

    def __init__(self, tag, n, rate, delay_ms):
        self.n, self.rate, self.delay_ms = n, rate, delay_ms
        self.switch = f"phsc-{tag}-sw"
        self.ranks = [f"phsc-{tag}-r{r}" for r in range(n)]
        self.forwarder = None
        self.made = []  # namespaces made, deleted by down()

    def describe(self):
        delay = f", {self.delay_ms:g} ms one way (delay_switch.py)" if self.delay_ms else ""
        return f"{describe_rate(self.rate)} links{delay}"

    def address(self, rank):
        return f"{SUBNET}.{rank + 1}"

    def prefix(self, rank):
        """What rank `rank`'s command runs under to be inside its namespace."""
        return ["ip", "netns", "exec", self.ranks[rank]]

    def _tbf(self, ns, dev):
        # burst: 2 ms at the rate (at least 64 kB, above a tick's worth at
        # HZ=1000 up to 250 Mb/s); a queue of 50 ms, then tail drops, as a
        # switch port's buffer.
        burst = max(65536, int(self.rate / 8 * 0.002))
        return ["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
                "rate", f"{int(self.rate)}bit", "burst", str(burst), "latency", "50ms"]

    def _offloads_off(self, ns, dev):
        # The forwarder reads and writes whole frames: segmentation and
        # checksums must be done before a frame leaves its sender.
        return ["ip", "netns", "exec", ns, "ethtool", "-K", dev, "tx", "off", "tso", "off",
                "gso", "off", "gro", "off"]

    def actions(self):
        sw = self.switch
        out = [["ip", "netns", "add", sw], ["ip", "-n", sw, "link", "set", "lo", "up"]]
        if not self.delay_ms:
            out += [["ip", "-n", sw, "link", "add", "br0", "type", "bridge"],
                    ["ip", "-n", sw, "link", "set", "br0", "up"]]
        for r, ns in enumerate(self.ranks):
            port = f"p{r}"
            out += [["ip", "netns", "add", ns], ["ip", "-n", ns, "link", "set", "lo", "up"],
                    ["ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port,
                     "netns", sw],
                    ["ip", "-n", ns, "addr", "add", f"{self.address(r)}/24", "dev", "eth0"],
                    ["ip", "-n", ns, "link", "set", "eth0", "up"],
                    ["ip", "-n", sw, "link", "set", port, "up"],
                    self._tbf(ns, "eth0"), self._tbf(sw, port)]
            if self.delay_ms:
                out += [self._offloads_off(ns, "eth0"), self._offloads_off(sw, port)]
            else:
                out += [["ip", "-n", sw, "link", "set", port, "master", "br0"]]
        return out

    def forwarder_command(self):
        return ["ip", "netns", "exec", self.switch, sys.executable,
                os.path.join(HERE, "delay_switch.py"), f"{self.delay_ms:g}"] + \
            [f"p{r}" for r in range(self.n)]

    def up(self, log):
        """Makes the namespaces and links (and starts the forwarder, its
        output to `log`); raises RuntimeError naming the command that failed
        and its output."""
        for argv in self.actions():
            if argv[:3] == ["ip", "netns", "add"]:
                self.made.append(argv[3])
            done = subprocess.run(argv, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"link: `{' '.join(argv)}` failed: "
                                   f"{(done.stderr or done.stdout).strip()}")
        if self.delay_ms:
            with open(log, "w") as out:
                self.forwarder = subprocess.Popen(self.forwarder_command(),
                                                  stdin=subprocess.DEVNULL, stdout=out,
                                                  stderr=subprocess.STDOUT, start_new_session=True)
            time.sleep(0.3)
            if self.forwarder.poll() is not None:
                raise RuntimeError(f"link: delay_switch.py exited {self.forwarder.returncode}")

    def down(self):
        if self.forwarder and self.forwarder.poll() is None:
            self.forwarder.send_signal(signal.SIGTERM)
            try:
                self.forwarder.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.forwarder.kill()
                self.forwarder.wait()
        self.forwarder = None
        for ns in reversed(self.made):
            delete_namespace(ns)
        self.made.clear()


def measure(tag, link, scratch):
    """(round trip ms, bulk rate bits/s) of `link` (parse_link's) between two
    namespaces, by link_probe.py; RuntimeError naming what failed."""
    net = Links(tag, 2, link[1], link[2])
    probe = os.path.join(HERE, "link_probe.py")
    mbytes = min(200, max(5, link[1] * 2 / 8 / 2**20))  # 2 s at the rate, 200 MB at most
    server = None
    try:
        net.up(os.path.join(scratch, f"probe-{link[0]}.switch.log"))
        server = subprocess.Popen(net.prefix(1) + [sys.executable, probe, "serve",
                                                    net.address(1), "5999"],
                                  stdin=subprocess.DEVNULL)
        time.sleep(0.3)
        try:
            done = subprocess.run(net.prefix(0) + [sys.executable, probe, "send",
                                                   net.address(1), "5999", f"{mbytes:g}"],
                                  capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            raise RuntimeError("link_probe.py send: no answer in 60 s")
        fields = dict(x.split("=", 1) for x in done.stdout.split() if "=" in x)
        if done.returncode != 0 or set(fields) != {"rtt_ms", "rate_bits"}:
            raise RuntimeError(f"link_probe.py send exited {done.returncode}: "
                               f"{(done.stderr or done.stdout).strip()}")
        return float(fields["rtt_ms"]), float(fields["rate_bits"])
    finally:
        net.down()  # kills the server too, if it still runs
        if server:
            try:
                server.wait(timeout=5)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def sweep(everything_of=None):
    """Deletes the namespaces of bench runs that no longer run, and
    all of run `everything_of`'s (a pid) on its way out. Nothing without
    iproute2 (a loopback-only run needs none)."""
    if not shutil.which("ip"):
        return
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for line in listed.splitlines():
        m = re.match(r"(phsc-(\d+)-\S+)", line)
        if m and (int(m.group(2)) == everything_of or not os.path.exists(f"/proc/{m.group(2)}")):
            delete_namespace(m.group(1))
