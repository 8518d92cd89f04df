"""The first process of a worker container: fetch the deployment's listening socket, then
become the worker.

`python -m harness.components.fdlaunch BROKER_SOCKET PORT -- ARGV...` connects to the
harness's Unix socket (mounted into the container), asks for the listening socket of `PORT`,
receives it as a file descriptor (SCM_RIGHTS) and execs `python ARGV...` with `{fd}` in ARGV
replaced by its number. `python -m harness.components.fdlaunch -- ARGV...` only execs.
Standard library only: it runs before anything else in the container.
"""

from __future__ import annotations

import array
import os
import socket
import sys


def _receive(path: str, port: str) -> int:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(path)
        conn.sendall(port.encode() + b"\n")
        fds = array.array("i")
        msg, ancdata, _, _ = conn.recvmsg(64, socket.CMSG_SPACE(fds.itemsize))
        for level, kind, data in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
        if not fds:
            raise SystemExit(f"fdlaunch: no socket for port {port} from {path}: {msg!r}")
        return int(fds[0])


def main(argv: list[str]) -> None:
    if "--" not in argv:
        raise SystemExit("usage: fdlaunch [BROKER_SOCKET PORT] -- ARGV...")
    split = argv.index("--")
    head, command = argv[:split], argv[split + 1:]
    if head:
        fd = _receive(head[0], head[1])
        os.set_inheritable(fd, True)
        command = [arg.replace("{fd}", str(fd)) for arg in command]
    os.execv(sys.executable, [sys.executable, *command])


if __name__ == "__main__":
    main(sys.argv[1:])
