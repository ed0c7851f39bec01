#!/usr/bin/python3
"""tcp_link.py — the latency and bandwidth of TCP between two addresses, with Python's standard
library alone (no iperf or ping needed): the median of 2000 one-byte round trips, then 2 GiB
sent in 1 MiB writes. Start `tcp_link.py serve ADDRESS` on one side (it answers both tests
once, then exits) and `tcp_link.py measure ADDRESS` on the other. It measures a link; it knows
nothing of cnnc or MPI (build/mpi_exchange measures what a training step sends)."""
import socket
import sys
import time

PORT = 5001
ROUNDS = 2000
CHUNK = 1 << 20
CHUNKS = 2048


def serve(address):
    listener = socket.create_server((address, PORT))
    for echo in (True, False):  # the round trips, then the bulk transfer
        conn, _ = listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while data := conn.recv(CHUNK):
            if echo:
                conn.sendall(data)
        if not echo:
            conn.send(b"!")  # all received
        conn.close()


def measure(address):
    conn = socket.create_connection((address, PORT))
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        conn.send(b"x")
        conn.recv(1)
        times.append(time.perf_counter() - start)
    conn.close()
    times.sort()
    print(f"1-byte round trip: median {times[ROUNDS // 2] * 1e6:.1f} us over {ROUNDS}")
    conn = socket.create_connection((address, PORT))
    block = bytes(CHUNK)
    start = time.perf_counter()
    for _ in range(CHUNKS):
        conn.sendall(block)
    conn.shutdown(socket.SHUT_WR)
    conn.recv(1)
    seconds = time.perf_counter() - start
    print(f"{CHUNKS} MiB in {seconds:.2f} s: {CHUNKS * CHUNK * 8 / seconds / 1e9:.2f} Gbit/s")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("serve", "measure"):
        sys.exit("usage: tcp_link.py serve|measure ADDRESS")
    (serve if sys.argv[1] == "serve" else measure)(sys.argv[2])
