/* SPDX-License-Identifier: MIT */
#pragma once

#include <linux/fb.h>

/* A kernel framebuffer device's screen info and memory. */
struct fbdev_hw {
	struct fb_var_screeninfo var;
	struct fb_fix_screeninfo fix;
	void *mem;
};

int fbdev_hw_open(const char *path, int *ret_fd, struct fbdev_hw *ret);
/* Shows the frame starting at row yoffset of the virtual screen. */
int fbdev_hw_pan(int fd, struct fbdev_hw *hw, unsigned int yoffset);
void fbdev_hw_close(int fd, struct fbdev_hw *hw);
