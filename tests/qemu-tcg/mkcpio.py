#!/usr/bin/python3
# Write a newc initramfs with /init (from a file) and /dev/console.
# Usage: mkcpio.py INIT OUT.cpio
import sys

def entry(name, mode, data=b"", rdev=(0, 0), ino=[0]):
    ino[0] += 1
    namez = name.encode() + b"\0"
    hdr = "070701" + "".join("%08x" % v for v in (
        ino[0], mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1],
        len(namez), 0))
    out = hdr.encode() + namez
    out += b"\0" * (-len(out) % 4)
    out += data + b"\0" * (-len(data) % 4)
    return out

init = open(sys.argv[1], "rb").read()
blob = (entry("dev", 0o40755) + entry("dev/console", 0o20600, rdev=(5, 1)) +
        entry("init", 0o100755, init) + entry("TRAILER!!!", 0))
blob += b"\0" * (-len(blob) % 512)
open(sys.argv[2], "wb").write(blob)
