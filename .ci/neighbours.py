"""What else runs on a contributor's machine while the suite does, for CI to run beside it.

- A foreign listener on 127.0.0.1:15002 and [::]:15002, where a real Spark Connect server
  would listen: it accepts and closes every connection, so a test that reaches for the
  default port fails rather than finds a Spark.
- Another dedup-lib process on the user's own cache (``~/.cache/dedup_lib``): a local Spark
  session of its own, held open; a class-data archive half written under its pid (a
  ``.part``, as a JVM leaves while it writes one at exit), removed when it stops; and a line
  appended to its ``spark.log`` every second.

Runs until killed (``.ci/run`` kills it when the suite ends). Prints one line when ready.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import sys
import threading
import time

PORT = 15002


def _listen(family: socket.AddressFamily, host: str) -> socket.socket | None:
    sock = socket.socket(family)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, PORT))
    except OSError as exc:
        print(f"neighbours: {host}:{PORT} already taken ({exc}); leaving it to its owner")
        sock.close()
        return None
    sock.listen()
    return sock


def _refuse(sock: socket.socket) -> None:
    while True:
        conn, _ = sock.accept()
        conn.close()


def main() -> int:
    for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        sock = _listen(family, host)
        if sock is not None:
            threading.Thread(target=_refuse, args=(sock,), daemon=True).start()
    for name in ("DEDUP_LIB_CACHE", "DEDUP_LOG_DIR", "SPARK_REMOTE"):
        os.environ.pop(name, None)
    from dedup_lib.class_data import _name
    from dedup_lib.spark import cache_dir, get_spark, java_tool, log_error

    spark = get_spark("neighbour", master="local[1]", config={"spark.ui.enabled": "false"})
    spark.range(10).count()
    part = cache_dir() / "jvm" / f"{_name(java_tool('java') or 'java')}.{os.getpid()}.part"
    part.parent.mkdir(parents=True, exist_ok=True)
    part.write_bytes(b"")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    atexit.register(part.unlink, missing_ok=True)
    print(f"neighbours: port {PORT} held, a Spark session writing {cache_dir()}", flush=True)
    while True:
        log_error("neighbour", "another dedup-lib process, writing the user's cache")
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
