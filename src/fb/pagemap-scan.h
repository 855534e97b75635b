/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * PAGEMAP_SCAN (Linux 6.7, Documentation/admin-guide/mm/pagemap.rst) and
 * the userfaultfd features it works with, for headers older than the
 * kernels devns runs on. The values are the kernel's ABI.
 */
#include <linux/fs.h>
#include <linux/ioctl.h>
#include <linux/types.h>
#include <linux/userfaultfd.h>

#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif

#ifndef PAGEMAP_SCAN
#define PAGE_IS_WPALLOWED (1 << 0)
#define PAGE_IS_WRITTEN (1 << 1)

struct page_region {
	__u64 start;
	__u64 end;
	__u64 categories;
};

#define PM_SCAN_WP_MATCHING (1 << 0)
#define PM_SCAN_CHECK_WPASYNC (1 << 1)

struct pm_scan_arg {
	__u64 size;
	__u64 flags;
	__u64 start;
	__u64 end;
	__u64 walk_end;
	__u64 vec;
	__u64 vec_len;
	__u64 max_pages;
	__u64 category_inverted;
	__u64 category_mask;
	__u64 category_anyof_mask;
	__u64 return_mask;
};

#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#endif
