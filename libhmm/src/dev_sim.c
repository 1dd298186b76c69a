// SPDX-License-Identifier: MIT
/*
 * dev_sim.c — the "sim" device: host memory posing as a device with its
 * own capacity (config.device_budget, default 256 MiB), its own copy
 * thread and a configurable bandwidth (config.sim_bandwidth bytes/s), so
 * that every device policy runs and is tested on a machine without a GPU.
 *
 * Device addresses are host addresses of an anonymous reservation per
 * tensor; depopulated chunks are MADV_DONTNEED'd.  Copies are queued to
 * the copy thread and done in order; with a bandwidth set the thread
 * sleeps so that bytes / elapsed never exceeds it.  s->lock protects the
 * queue and stop flag.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "ctx.h"
#include "dev.h"
#include "err.h"

struct sim_copy {
	struct sim_copy *next;
	int dir;
	uint64_t dev;
	void *host;
	uint64_t bytes;
	void (*done)(void *arg, int err);
	void *arg;
};

/* Allocated by sim_open, freed by sim_close. */
struct sim {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct sim_copy *head, *tail;	/* queue, under lock */
	int stop;
	pthread_t thr;
	uint64_t bw;
	double busy_until;		/* copy thread only */
};

static void sim_throttle(struct sim *s, uint64_t bytes)
{
	double now = hmm_now(), end;
	struct timespec ts;

	if (!s->bw)
		return;
	if (s->busy_until < now)
		s->busy_until = now;
	s->busy_until += (double)bytes / s->bw;
	end = s->busy_until;
	if (end <= now)
		return;
	ts.tv_sec = (time_t)end;
	ts.tv_nsec = (long)((end - ts.tv_sec) * 1e9);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
		;
}

static void *sim_main(void *arg)
{
	struct sim *s = arg;

	for (;;) {
		struct sim_copy *c;

		pthread_mutex_lock(&s->lock);
		while (!s->head && !s->stop)
			pthread_cond_wait(&s->cond, &s->lock);
		c = s->head;
		if (!c) {
			pthread_mutex_unlock(&s->lock);
			return NULL;
		}
		s->head = c->next;
		if (!s->head)
			s->tail = NULL;
		pthread_mutex_unlock(&s->lock);
		if (c->dir == HMM_H2D)
			memcpy((void *)(uintptr_t)c->dev, c->host, c->bytes);
		else
			memcpy(c->host, (void *)(uintptr_t)c->dev, c->bytes);
		sim_throttle(s, c->bytes);
		c->done(c->arg, 0);
		free(c);
	}
}

static int sim_open(const struct hmm_config *cfg, void **priv,
		    uint64_t *capacity, uint64_t *granularity)
{
	struct sim *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return hmm_err(-ENOMEM, "device sim: no memory");
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->bw = cfg->sim_bandwidth;
	r = pthread_create(&s->thr, NULL, sim_main, s);
	if (r) {
		free(s);
		return hmm_err(-r, "device sim: cannot start the copy thread");
	}
	*capacity = cfg->device_budget ? cfg->device_budget : 256ull << 20;
	*granularity = 4096;
	*priv = s;
	return 0;
}

static void sim_close(void *priv)
{
	struct sim *s = priv;

	pthread_mutex_lock(&s->lock);
	s->stop = 1;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thr, NULL);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static int sim_reserve(void *priv, uint64_t bytes, uint64_t *addr)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return -errno;
	*addr = (uintptr_t)p;
	return 0;
}

static void sim_release(void *priv, uint64_t addr, uint64_t bytes)
{
	munmap((void *)(uintptr_t)addr, bytes);
}

static int sim_populate(void *priv, uint64_t addr, uint64_t bytes)
{
	return 0;	/* anonymous memory appears on first touch */
}

static void sim_depopulate(void *priv, uint64_t addr, uint64_t bytes)
{
	madvise((void *)(uintptr_t)addr, bytes, MADV_DONTNEED);
}

static int sim_copy(void *priv, int dir, uint64_t dev, void *host,
		    uint64_t bytes, void (*done)(void *arg, int err),
		    void *arg)
{
	struct sim *s = priv;
	struct sim_copy *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->dir = dir;
	c->dev = dev;
	c->host = host;
	c->bytes = bytes;
	c->done = done;
	c->arg = arg;
	pthread_mutex_lock(&s->lock);
	if (s->tail)
		s->tail->next = c;
	else
		s->head = c;
	s->tail = c;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

const struct hmm_dev_ops hmm_dev_sim = {
	.name = "sim",
	.open = sim_open,
	.close = sim_close,
	.reserve = sim_reserve,
	.release = sim_release,
	.populate = sim_populate,
	.depopulate = sim_depopulate,
	.copy = sim_copy,
};
