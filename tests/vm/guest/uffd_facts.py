#!/usr/bin/python3
"""What the kernel gives the caller of userfaultfd(2), printed one line each
(test_fb_track.py runs it as an unprivileged user): whether a userfaultfd
that takes the kernel's faults can be had, whether a user-mode-only one can,
and what read() into a range write-protected with the latter returns."""

import ctypes
import mmap
import os
import struct
import tempfile

NR_USERFAULTFD = 323
UFFD_USER_MODE_ONLY = 1
UFFD_API = 0xAA
UFFD_FEATURE_WP_HUGETLBFS_SHMEM = 1 << 12
UFFDIO_API = (3 << 30) | (24 << 16) | (0xAA << 8) | 0x3F
UFFDIO_REGISTER = (3 << 30) | (32 << 16) | (0xAA << 8) | 0x00
UFFDIO_WRITEPROTECT = (3 << 30) | (24 << 16) | (0xAA << 8) | 0x06
UFFDIO_REGISTER_MODE_WP = 2
UFFDIO_WRITEPROTECT_MODE_WP = 1

libc = ctypes.CDLL(None, use_errno=True)


def userfaultfd(flags):
    fd = libc.syscall(NR_USERFAULTFD, os.O_CLOEXEC | os.O_NONBLOCK | flags)
    return fd if fd >= 0 else -ctypes.get_errno()


def ioctl(fd, request, data):
    buf = ctypes.create_string_buffer(data, len(data))
    if libc.ioctl(fd, request, buf) < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return buf.raw


def main():
    full = userfaultfd(0)
    print("full:", "ok" if full >= 0 else "errno %d" % -full)
    uffd = userfaultfd(UFFD_USER_MODE_ONLY)
    print("user-mode-only:", "ok" if uffd >= 0 else "errno %d" % -uffd)
    print("/dev/userfaultfd:", "present" if os.path.exists("/dev/userfaultfd") else "absent")
    if uffd < 0:
        return
    features = struct.unpack("QQQ", ioctl(uffd, UFFDIO_API, struct.pack("QQQ", UFFD_API, 0, 0)))[1]
    print("wp on shared memory:", "yes" if features & UFFD_FEATURE_WP_HUGETLBFS_SHMEM else "no")
    size = 4 * mmap.PAGESIZE
    memfd = os.memfd_create("facts")
    os.ftruncate(memfd, size)
    m = mmap.mmap(memfd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    ioctl(uffd, UFFDIO_REGISTER, struct.pack("QQQQ", addr, size, UFFDIO_REGISTER_MODE_WP, 0))
    ioctl(uffd, UFFDIO_WRITEPROTECT, struct.pack("QQQ", addr, size, UFFDIO_WRITEPROTECT_MODE_WP))
    with tempfile.TemporaryFile() as f:
        f.write(b"x" * size)
        f.flush()
        os.lseek(f.fileno(), 0, os.SEEK_SET)
        try:
            print("read into the protected range:", "ok %d" % os.readv(f.fileno(), [m]))
        except OSError as err:
            print("read into the protected range: errno %d" % err.errno)


if __name__ == "__main__":
    main()
