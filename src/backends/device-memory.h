/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/*
 * Device memory mapped into the process (a DRM dumb buffer, a kernel
 * framebuffer) can vanish under it. Once a driver lets go of its device
 * (drm_dev_unplug()) the kernel removes every mapping of it, and where the
 * driver's buffers have no fault handler (the DMA helpers of most SoC
 * display drivers) the next access raises SIGBUS. A guarded mapping is
 * replaced by anonymous memory at its first such fault, so that a copy
 * under way completes, unseen, until the device's removal is handled.
 * Faults elsewhere go to the handler there was before, or kill as
 * always. For the thread that maps and unmaps device memory only.
 */

/* Guards [addr, addr + len). -ENOSPC when DEVICE_MEMORY_GUARDS are in use. */
#define DEVICE_MEMORY_GUARDS 64
int device_memory_guard(void *addr, size_t len);
/* Before addr is unmapped. */
void device_memory_unguard(void *addr);
