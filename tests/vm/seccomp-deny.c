/* SPDX-License-Identifier: MIT */
/*
 * Runs a command under a seccomp filter that fails the named system calls
 * with EPERM, as container runtimes' default filters may:
 *   seccomp-deny NAME[,NAME...] COMMAND [ARG...]
 * NAME: userfaultfd, process_vm_readv.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_DENIED 4

static const struct {
	const char *name;
	int nr;
} known[] = {
	{ "userfaultfd", __NR_userfaultfd },
	{ "process_vm_readv", __NR_process_vm_readv },
};

int main(int argc, char *argv[]) {
	struct sock_filter filter[4 + 2 * MAX_DENIED + 1];
	struct sock_fprog prog = { .filter = filter };
	unsigned int n = 0, denied = 0;
	char *names, *name, *save = NULL;

	if (argc < 3) {
		fprintf(stderr, "usage: seccomp-deny NAME[,NAME...] COMMAND [ARG...]\n");
		return 2;
	}
	filter[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
	filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	filter[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	names = argv[1];
	for (name = strtok_r(names, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
		size_t i;

		for (i = 0; i < sizeof(known) / sizeof(known[0]) && strcmp(known[i].name, name) != 0; i++)
			;
		if (i == sizeof(known) / sizeof(known[0]) || denied == MAX_DENIED) {
			fprintf(stderr, "seccomp-deny: %s: not a system call this knows, or too many\n", name);
			return 2;
		}
		filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned int)known[i].nr, 0, 1);
		filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
		denied++;
	}
	filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	prog.len = (unsigned short)n;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) {
		perror("seccomp");
		return 1;
	}
	execvp(argv[2], argv + 2);
	perror(argv[2]);
	return 127;
}
