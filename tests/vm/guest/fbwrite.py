#!/usr/bin/python3
"""fbwrite.py [--seek] [--read-only] NODE POS FILE [POS FILE ...]: a plain fbdev writer.
For each pair it sets the open file's stream position (devns' ioctl, or
lseek() with --seek) and writes FILE's bytes with one write(). Prints one
line per write ("n N" or "errno E"), then "pos P" (the stream position at
the end), "memfd yes|no" (whether it holds a persona's framebuffer memfd:
libdevns-fbmmap.so took its write() path), and with --seek "end E"
(lseek(0, SEEK_END))."""

import os
import sys

import fbrig


def main():
    args = sys.argv[1:]
    seek = "--seek" in args
    read_only = "--read-only" in args
    args = [a for a in args if a not in ("--seek", "--read-only")]
    fd = os.open(args[0], os.O_RDONLY if read_only else os.O_RDWR)
    args = args[1:]
    for pos, path in zip(args[0::2], args[1::2]):
        with open(path, "rb") as f:
            data = f.read()
        if seek:
            os.lseek(fd, int(pos), os.SEEK_SET)
        else:
            fbrig.set_pos(fd, int(pos))
        try:
            print("n", os.write(fd, data))
        except OSError as e:
            print("errno", e.errno)
    print("pos", fbrig.get_pos(fd))
    if seek:
        print("end", os.lseek(fd, 0, os.SEEK_END))
    links = []
    for n in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink("/proc/self/fd/" + n))
        except FileNotFoundError:  # the directory's own descriptor
            pass
    print("memfd", "yes" if any(link.startswith("/memfd:devns-fb-") for link in links) else "no")


if __name__ == "__main__":
    main()
