// SPDX-License-Identifier: MIT
/*
 * trace.c — HMM_TRACE=file: every copy, eviction and stall as a Chrome
 * trace event ("ph":"X", microseconds since hmm_open), one JSON array
 * that ui.perfetto.dev and chrome://tracing open.  Thread ids name the
 * lanes: 0 maps (stalls), 1 store I/O, 2 device copies, 3 evictions,
 * 4 region faults.  h->trace_lock protects the file; events are written
 * as they happen and the array is closed by hmm_close.
 */
#include <errno.h>
#include <string.h>

#include "ctx.h"
#include "err.h"

int hmm_trace_open(struct hmm *h, const char *path)
{
	h->trace = fopen(path, "w");
	if (!h->trace)
		return hmm_err(-errno, "trace %s: cannot create: %s", path,
			       strerror(errno));
	fputs("[\n", h->trace);
	fprintf(h->trace, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,"
		"\"args\":{\"name\":\"libhmm\"}}");
	static const char *const lanes[] = {
		"maps (stalls)", "store I/O", "device copies", "evictions",
		"region faults",
	};
	for (int i = 0; i < 5; i++)
		fprintf(h->trace, ",\n{\"name\":\"thread_name\",\"ph\":\"M\","
			"\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", i,
			lanes[i]);
	return 0;
}

void hmm_trace_close(struct hmm *h)
{
	if (!h->trace)
		return;
	fputs("\n]\n", h->trace);
	fclose(h->trace);
	h->trace = NULL;
}

static void json_name(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if ((unsigned char)*s >= 0x20)
			fputc(*s, f);
	}
}

void hmm_trace_event(struct hmm *h, const char *cat, const char *name,
		     const char *tensor, uint32_t chunk, uint64_t bytes,
		     double t0, double t1, int tid)
{
	if (!h->trace)
		return;
	pthread_mutex_lock(&h->trace_lock);
	fprintf(h->trace, ",\n{\"name\":\"%s ", name);
	json_name(h->trace, tensor);
	fprintf(h->trace, "[%u]\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":1,"
		"\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"tensor\":\"",
		chunk, cat, tid, (t0 - h->t_open) * 1e6, (t1 - t0) * 1e6);
	json_name(h->trace, tensor);
	fprintf(h->trace, "\",\"chunk\":%u,\"bytes\":%llu}}", chunk,
		(unsigned long long)bytes);
	pthread_mutex_unlock(&h->trace_lock);
}
