#!/usr/bin/python3
"""fbwrite.py [--seek] [--read-only] [--bad-buffer] NODE POS FILE [POS FILE ...]: a plain fbdev writer.
For each pair it sets the open file's stream position (devns' ioctl, or
lseek() with --seek) and writes FILE's bytes with one write() (with
--bad-buffer, as many bytes from an address nothing is mapped at). Prints one
line per write ("n N" or "errno E"), then "pos P" (the stream position at
the end), "memfd yes|no" (whether it holds a persona's framebuffer memfd:
libdevns-fbmmap.so took its write() path), and with --seek "cur C"
(lseek(0, SEEK_CUR)) and "end E" (lseek(0, SEEK_END))."""

import ctypes
import mmap
import os
import sys

import fbrig


def main():
    args = sys.argv[1:]
    seek = "--seek" in args
    read_only = "--read-only" in args
    bad_buffer = "--bad-buffer" in args
    args = [a for a in args if a not in ("--seek", "--read-only", "--bad-buffer")]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.write.restype = ctypes.c_ssize_t
    libc.write.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    fd = os.open(args[0], os.O_RDONLY if read_only else os.O_RDWR)
    args = args[1:]
    for pos, path in zip(args[0::2], args[1::2]):
        with open(path, "rb") as f:
            data = f.read()
        if seek:
            os.lseek(fd, int(pos), os.SEEK_SET)
        else:
            fbrig.set_pos(fd, int(pos))
        if bad_buffer:
            # Memory reserved with no access: write() must fail with EFAULT, not crash the program.
            hole = libc.mmap(None, len(data), 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)  # PROT_NONE
            n = libc.write(fd, hole, len(data))
            print(*(("n", n) if n >= 0 else ("errno", ctypes.get_errno())))
            continue
        try:
            print("n", os.write(fd, data))
        except OSError as e:
            print("errno", e.errno)
    print("pos", fbrig.get_pos(fd))
    if seek:
        print("cur", os.lseek(fd, 0, os.SEEK_CUR))
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
