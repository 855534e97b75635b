/* SPDX-License-Identifier: MIT */
/*
 * Runs a command under a seccomp filter that fails the named system calls
 * with EPERM, as container runtimes' default filters may:
 *   seccomp-deny RULE[,RULE...] COMMAND [ARG...]
 * RULE: userfaultfd, process_vm_readv, pwrite64, or ioctl=REQUEST (only
 * ioctls with that request number, e.g. ioctl=0x4606).
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_RULES 4
/* Instructions per rule: load the number, compare, [load the request, compare,] refuse. */
#define RULE_LEN 5

static const struct {
	const char *name;
	int nr;
} known[] = {
	{ "userfaultfd", __NR_userfaultfd },
	{ "process_vm_readv", __NR_process_vm_readv },
	{ "pwrite64", __NR_pwrite64 },
	{ "ioctl", __NR_ioctl },
};

int main(int argc, char *argv[]) {
	struct sock_filter filter[3 + RULE_LEN * MAX_RULES + 1];
	struct sock_fprog prog = { .filter = filter };
	unsigned int n = 0, rules = 0;
	char *rule, *save = NULL;

	if (argc < 3) {
		fprintf(stderr, "usage: seccomp-deny RULE[,RULE...] COMMAND [ARG...]\n");
		return 2;
	}
	filter[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
	filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	for (rule = strtok_r(argv[1], ",", &save); rule; rule = strtok_r(NULL, ",", &save)) {
		char *request = strchr(rule, '='), *end = NULL;
		unsigned long value = 0;
		size_t i;

		if (request) {
			*request++ = '\0';
			value = strtoul(request, &end, 0);
		}
		for (i = 0; i < sizeof(known) / sizeof(known[0]) && strcmp(known[i].name, rule) != 0; i++)
			;
		if (i == sizeof(known) / sizeof(known[0]) || rules == MAX_RULES ||
		    (request && (known[i].nr != __NR_ioctl || !*request || *end || value > 0xffffffffUL))) {
			fprintf(stderr, "seccomp-deny: %s: not a rule this knows, or too many\n", rule);
			return 2;
		}
		filter[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
		if (request) {
			/* The request's lower 32 bits, as the kernel's ioctl() takes it. */
			filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned int)known[i].nr, 0, 3);
			filter[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
								   offsetof(struct seccomp_data, args[1]));
			filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned int)value, 0, 1);
		} else
			filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned int)known[i].nr, 0, 1);
		filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
		rules++;
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
