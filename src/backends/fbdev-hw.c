/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "device-memory.h"
#include "fbdev-hw.h"

int fbdev_hw_open(const char *path, int *ret_fd, struct fbdev_hw *ret) {
	struct fbdev_hw hw = { 0 };
	int fd, r;

	fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, FBIOGET_VSCREENINFO, &hw.var) < 0 || ioctl(fd, FBIOGET_FSCREENINFO, &hw.fix) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	hw.mem = mmap(NULL, hw.fix.smem_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (hw.mem == MAP_FAILED) {
		r = -errno;
		close(fd);
		return r;
	}
	/* Best effort: with every guard in use the memory goes unguarded (device-memory.h). */
	(void)device_memory_guard(hw.mem, hw.fix.smem_len);
	*ret_fd = fd;
	*ret = hw;
	return 0;
}

int fbdev_hw_pan(int fd, struct fbdev_hw *hw, unsigned int yoffset) {
	struct fb_var_screeninfo var = hw->var;

	var.xoffset = 0;
	var.yoffset = yoffset;
	if (ioctl(fd, FBIOPAN_DISPLAY, &var) < 0)
		return -errno;
	hw->var.yoffset = yoffset;
	return 0;
}

void fbdev_hw_close(int fd, struct fbdev_hw *hw) {
	device_memory_unguard(hw->mem);
	munmap(hw->mem, hw->fix.smem_len);
	close(fd);
}
