#!/usr/bin/env python3
"""How long a client that connects to a starting node waits for its first
answer: starts `BIN start` on a data dir (filled beforehand by the caller),
connects to its PB port every 10 ms from the moment the process starts, and
prints when the first connect succeeded and when the first ping answer came
(seconds after the start), and the gap between the two (the time a client
sat in the accept queue). Usage: readiness.py BIN DATA_DIR PORT [RUNS]"""
import socket, subprocess, sys, time

bin_, data, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
runs = int(sys.argv[4]) if len(sys.argv) > 4 else 3
for run in range(runs):
    t0 = time.monotonic()
    p = subprocess.Popen([bin_, "start", "--data-dir", data, "--pb-listen", f"127.0.0.1:{port}",
                          "--cluster-listen", f"127.0.0.1:{port + 1}", "--http-listen", ""],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=30)
                break
            except OSError:
                time.sleep(0.01)
        t_conn = time.monotonic() - t0
        s.sendall(b"\x00\x00\x00\x01\x01")
        s.recv(5)
        t_ans = time.monotonic() - t0
        print(f"run {run}: connected {t_conn:.3f} s, first answer {t_ans:.3f} s, waited {t_ans - t_conn:.3f} s after connecting")
        s.close()
    finally:
        p.terminate()
        p.wait()
