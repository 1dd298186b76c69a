// SPDX-License-Identifier: MIT
/*
 * fuzz_proto — libFuzzer target for the hmmd wire decoder
 * (libhmm/src/proto/proto.c).  Built by `make fuzz` with
 * -fsanitize=fuzzer,address,undefined; run by `make check` for 20 s over
 * the seed corpus tests/fuzz/corpus/fuzz_proto/ (one valid datagram per
 * message type, written by `build/tests/unit/test_proto --write-corpus`).
 *
 * Properties checked on every input, beyond "no crash, no sanitizer
 * report": a decode either returns a known type or one of -EMSGSIZE,
 * -EPROTO, -EINVAL with a detail; whatever decodes re-encodes to exactly
 * the input bytes; the typed decoder of the decoded type agrees.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "fz_must.h"
#include "proto.h"

/* Nothing of ours to remove at a finding. */
static void fz_finding(void)
{
}

/* The typed decoder of type agrees with the generic one. */
static void typed_agrees(const uint8_t *data, size_t size, unsigned type)
{
	struct hmm_proto_hdr h;
	union {
		struct hmm_proto_range range;
		struct hmm_proto_tensor tensor;
		struct hmm_proto_hello hello;
	} u;

	switch (type) {
	case HMM_PROTO_MAP:
		must(hmm_proto_map_decode(data, size, &h, &u.range) == 0,
		     "map_decode of a map");
		must(hmm_proto_unmap_decode(data, size, &h, &u.range) ==
		     -EPROTO, "unmap_decode of a map");
		break;
	case HMM_PROTO_TENSOR_NEW:
		must(hmm_proto_tensor_new_decode(data, size, &h,
						 &u.tensor) == 0,
		     "tensor_new_decode of a tensor_new");
		break;
	case HMM_PROTO_HELLO:
		must(hmm_proto_hello_decode(data, size, &h, &u.hello) == 0,
		     "hello_decode of a hello");
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t out[HMM_PROTO_MSG_MAX];
	struct hmm_proto_msg msg;
	int r, n;

	hmm_err(0, "%s", "");
	r = hmm_proto_decode(data, size, &msg);
	if (r < 0) {
		must(r == -EMSGSIZE || r == -EPROTO || r == -EINVAL,
		     "decode refused with %d", r);
		must(hmm_last_error()[0] != 0, "a refusal with no detail");
		return 0;
	}
	must(r == msg.hdr.type && size >= HMM_PROTO_HDR_SIZE,
	     "decode gave %d for %zu bytes", r, size);
	n = hmm_proto_encode(out, sizeof(out), r, msg.hdr.flags, msg.hdr.seq,
			     &msg.u);
	must(n >= 0 && (size_t)n == size && !memcmp(out, data, size),
	     "re-encoded as %d bytes of %zu, or other bytes", n, size);
	typed_agrees(data, size, r);
	return 0;
}
