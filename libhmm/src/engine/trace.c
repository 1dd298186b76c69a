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

/* Bytes of the UTF-8 sequence at s (1..4), or 0 when it is not one
 * (a stray continuation byte, a cut sequence, an overlong form, a
 * surrogate, past U+10FFFF). */
static int utf8_len(const unsigned char *s)
{
	int n = s[0] < 0x80 ? 1 : s[0] < 0xc2 ? 0 : s[0] < 0xe0 ? 2 :
		s[0] < 0xf0 ? 3 : s[0] < 0xf5 ? 4 : 0, i;

	for (i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) ||
	    (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
		return 0;
	return n;
}

/* A name into a JSON string: quotes and backslashes escaped, control
 * characters left out, and a byte that is no UTF-8 (names may hold
 * any byte from 0x80) as U+FFFD, so that the trace stays JSON. */
static void json_name(FILE *f, const char *name)
{
	const unsigned char *s = (const unsigned char *)name;
	int n;

	while (*s) {
		n = utf8_len(s);
		if (!n) {
			fputs("\\ufffd", f);
			s++;
			continue;
		}
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if (*s >= 0x20)
			fwrite(s, 1, n, f);
		s += n;
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
