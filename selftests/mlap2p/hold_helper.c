// SPDX-License-Identifier: GPL-2.0
/*
 * hold_helper: not a test; rmmod.sh's accomplice.  Maps a region of
 * /dev/mlap2p, closes every descriptor of the device, creates the file
 * named by argv[1] to say so, then sleeps until killed.  Only the mapping
 * (through its vm_file) keeps the module busy.
 */
#include "mlap2p_util.h"

int main(int argc, char **argv)
{
	struct mlap2p_mem_alloc a;
	struct mlap2p_info info;
	size_t len = kt_page_size();
	int fd, ready;
	char *p;

	if (argc != 2) {
		fprintf(stderr, "usage: %s READY_FILE\n", argv[0]);
		return 2;
	}
	fd = kt_dev_open();
	if (fd < 0 || kt_get_info(fd, &info) ||
	    kt_alloc(fd, len, kt_local_mla(&info), &a)) {
		perror("hold_helper: " MLAP2P_DEVICE_PATH);
		return 1;
	}
	p = kt_map(fd, a.mmap_cookie, len, PROT_READ | PROT_WRITE);
	if (p == MAP_FAILED) {
		perror("hold_helper: mmap");
		return 1;
	}
	close(fd);
	p[0] = 1;
	ready = open(argv[1], O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (ready < 0) {
		perror("hold_helper: ready file");
		return 1;
	}
	close(ready);
	for (;;)
		pause();
}
