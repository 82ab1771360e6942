#!/usr/bin/python3
"""Runs a command with a stand-in for journald, and keeps what reaches it.

Binds the journal's native socket (/run/systemd/journal/socket, where
GLib's g_log_writer_journald sends) and its stream socket
(/run/systemd/journal/stdout), so run it where /run/systemd is a private
tmpfs (a mount namespace).  With --stderr-journal, the command's standard
error is a connection to the stream socket, as under a systemd unit (GLib
then takes it for the journal); otherwise a file.  Each datagram received
is written to OUT as its KEY=value lines, then a blank line.  Exits with
the command's status.

    journal-capture.py OUT STDERR_FILE [--stderr-journal] -- CMD...
"""
import os
import socket
import subprocess
import sys

out, stderr_file = sys.argv[1], sys.argv[2]
rest = sys.argv[3:]
to_journal = rest[0] == "--stderr-journal"
cmd = rest[rest.index("--") + 1:]

os.makedirs("/run/systemd/journal", exist_ok=True)
native = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
native.bind("/run/systemd/journal/socket")
stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
stream.bind("/run/systemd/journal/stdout")
stream.listen(1)

if to_journal:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect("/run/systemd/journal/stdout")
    server, _ = stream.accept()
    proc = subprocess.Popen(cmd, stderr=client.fileno())
    client.close()
    with open(stderr_file, "wb") as f:
        while True:
            data = server.recv(65536)
            if not data:
                break
            f.write(data)
else:
    with open(stderr_file, "wb") as f:
        proc = subprocess.Popen(cmd, stderr=f)
rc = proc.wait()

native.setblocking(False)
with open(out, "w") as f:
    while True:
        try:
            data = native.recv(1 << 20)
        except BlockingIOError:
            break
        f.write(data.decode("utf-8", "replace").rstrip("\n") + "\n\n")
sys.exit(rc)
