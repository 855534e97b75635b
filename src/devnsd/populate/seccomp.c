/* SPDX-License-Identifier: MIT */
/*
 * The populate helper's system call filter. The helper works on a
 * container's files with the container's root's ids, and needs only file,
 * mount and namespace calls for that. Whatever a container planted there,
 * the helper runs no program (execve), makes no process or thread, opens
 * no socket and reaches no other process (ptrace, process_vm_*, pidfd
 * signals and descriptors), and loads nothing into the kernel: those calls
 * fail with EPERM. A list of what is refused, not of what is allowed, so
 * that a libc that makes its calls another way keeps working.
 */
#include <errno.h>
#include <seccomp.h>

#include "populate/populate-internal.h"

static const int refused[] = {
	SCMP_SYS(execve),	   SCMP_SYS(execveat),		SCMP_SYS(fork),		  SCMP_SYS(vfork),
	SCMP_SYS(clone),	   SCMP_SYS(clone3),		SCMP_SYS(ptrace),	  SCMP_SYS(process_vm_readv),
	SCMP_SYS(process_vm_writev), SCMP_SYS(pidfd_open),	SCMP_SYS(pidfd_getfd),	  SCMP_SYS(pidfd_send_signal),
	SCMP_SYS(kill),		   SCMP_SYS(tkill),		SCMP_SYS(socket),	  SCMP_SYS(socketpair),
	SCMP_SYS(connect),	   SCMP_SYS(bind),		SCMP_SYS(listen),	  SCMP_SYS(accept),
	SCMP_SYS(accept4),	   SCMP_SYS(unshare),		SCMP_SYS(chroot),	  SCMP_SYS(pivot_root),
	SCMP_SYS(bpf),		   SCMP_SYS(perf_event_open),	SCMP_SYS(userfaultfd),	  SCMP_SYS(io_uring_setup),
	SCMP_SYS(io_uring_enter),  SCMP_SYS(io_uring_register), SCMP_SYS(keyctl),	  SCMP_SYS(add_key),
	SCMP_SYS(request_key),	   SCMP_SYS(init_module),	SCMP_SYS(finit_module),	  SCMP_SYS(delete_module),
	SCMP_SYS(kexec_load),	   SCMP_SYS(kexec_file_load),	SCMP_SYS(reboot),	  SCMP_SYS(swapon),
	SCMP_SYS(swapoff),	   SCMP_SYS(acct),		SCMP_SYS(settimeofday),	  SCMP_SYS(clock_settime),
	SCMP_SYS(clock_adjtime),   SCMP_SYS(adjtimex),		SCMP_SYS(personality),	  SCMP_SYS(ioperm),
	SCMP_SYS(iopl),
};

int populate_helper_seccomp(void) {
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int r = 0;

	if (!ctx)
		return -ENOMEM;
	/* The kernel's native calls only: no other ABI's numbers for the same calls. */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	for (size_t i = 0; r >= 0 && i < ELEMENTSOF(refused); i++)
		if (refused[i] >= 0)
			r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), refused[i], 0);
	if (r >= 0)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	return r < 0 ? r : 0;
}
