// SPDX-License-Identifier: MIT
/*
 * dev_common.c — what the device backends share: the copy queue and the
 * one thread that drains it in order (struct hmm_dev_queue, dev.h).
 *
 * copy() appends a request under q->lock and signals; the thread takes
 * requests from the head, runs the backend's q->run without the lock,
 * then calls the request's done() with what run returned.  Stopping lets
 * the thread drain what is queued before it exits.
 */
#include <errno.h>
#include <stdlib.h>

#include "dev.h"

static void *dev_queue_main(void *arg)
{
	struct hmm_dev_queue *q = arg;

	if (q->enter)
		q->enter(q->owner);
	for (;;) {
		struct hmm_dev_copy *c;

		pthread_mutex_lock(&q->lock);
		while (!q->head && !q->stop)
			pthread_cond_wait(&q->cond, &q->lock);
		c = q->head;
		if (!c) {
			pthread_mutex_unlock(&q->lock);
			return NULL;
		}
		q->head = c->next;
		if (!q->head)
			q->tail = NULL;
		pthread_mutex_unlock(&q->lock);
		c->done(c->arg, q->run(q->owner, c));
		free(c);
	}
}

int hmm_dev_queue_start(struct hmm_dev_queue *q, void *owner,
			void (*enter)(void *owner),
			int (*run)(void *owner, const struct hmm_dev_copy *c))
{
	int r;

	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	q->head = q->tail = NULL;
	q->stop = 0;
	q->owner = owner;
	q->enter = enter;
	q->run = run;
	r = pthread_create(&q->thr, NULL, dev_queue_main, q);
	if (r) {
		pthread_cond_destroy(&q->cond);
		pthread_mutex_destroy(&q->lock);
		return -r;
	}
	return 0;
}

void hmm_dev_queue_stop(struct hmm_dev_queue *q)
{
	pthread_mutex_lock(&q->lock);
	q->stop = 1;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
	pthread_join(q->thr, NULL);
	pthread_cond_destroy(&q->cond);
	pthread_mutex_destroy(&q->lock);
}

int hmm_dev_queue_copy(void *priv, int dir, uint64_t dev, void *host,
		       uint64_t bytes, void (*done)(void *arg, int err),
		       void *arg)
{
	struct hmm_dev_queue *q = priv;	/* the backend's first member */
	struct hmm_dev_copy *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	*c = (struct hmm_dev_copy){ NULL, dir, dev, host, bytes, done, arg };
	pthread_mutex_lock(&q->lock);
	if (q->tail)
		q->tail->next = c;
	else
		q->head = c;
	q->tail = c;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
	return 0;
}
