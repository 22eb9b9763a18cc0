// SPDX-License-Identifier: MIT
/*
 * Writes a real, small segment to a file: the seed fuzz_segment starts from. The
 * validator accepts only inputs whose segment_size equals their length and whose
 * every field is consistent, which random bytes never are; starting from a real
 * segment lets the fuzzer spend its time past the validator.
 *
 * Two rings (one owned by this thread, one retired by a thread that exited), three
 * names and a few events of each kind that carries data.
 *
 * usage: make_seed FILE
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ringprof/ringprof.h>

static uint32_t ids[3];

static void *other_thread(void *arg)
{
	(void)arg;
	rp_async_begin(ids[1], 7, 1);
	rp_link(ids[2], RP_LINK_LAUNCH, 1, 42);
	rp_async_end(ids[1], 7, 1);
	return NULL;
}

static void produce(void)
{
	pthread_t th;

	ids[0] = rp_intern("decode", "LLM", "model.c", 42);
	ids[1] = rp_intern("request", "AGENT", NULL, 0);
	ids[2] = rp_intern("launch", "GPU", "kernel.cu", 7);
	rp_begin(ids[0]);
	rp_counter(ids[2], 1234);
	rp_instant(ids[1]);
	rp_end(ids[0]);
	if (pthread_create(&th, NULL, other_thread, NULL) == 0)
		pthread_join(th, NULL);
}

/* Copies this process's segment, as it is now, to `path`. */
static int dump(const char *path)
{
	struct stat st;
	void *p;
	FILE *f;
	int fd = shm_open(rp_segment_path(), O_RDONLY, 0);

	if (fd < 0 || fstat(fd, &st) < 0)
		return -1;
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -1;
	f = fopen(path, "wb");
	if (f == NULL || fwrite(p, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		if (f != NULL)
			fclose(f);
		return -1;
	}
	munmap(p, (size_t)st.st_size);
	return fclose(f) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s FILE\n", argv[0]);
		return 2;
	}
	setenv("RINGPROF_RING_EVENTS", "8", 1);
	setenv("RINGPROF_RINGS", "2", 1);
	setenv("RINGPROF_NAMES", "16", 1);
	setenv("RINGPROF_NAME_BYTES", "1024", 1);
	setenv("RINGPROF_SESSION", "fuzz_seed", 0);
	if (rp_init() != 0 || rp_segment_path() == NULL) {
		fprintf(stderr, "make_seed: rp_init failed\n");
		return 1;
	}
	produce();
	if (ids[0] == 0 || ids[1] == 0 || ids[2] == 0 || dump(argv[1]) != 0) {
		perror("make_seed");
		return 1;
	}
	return 0;
}
