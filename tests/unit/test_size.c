// SPDX-License-Identifier: MIT
/* test_size.c — hmm_size_parse: every accepted spelling, every refusal.
 * K, M, G, T are powers of 1024, "KiB" the same; "KB", "MB" are refused,
 * not read as powers of 1024: MB is 10^6 bytes wherever hmm prints it. */
#include "hmm.h"
#include "t.h"

static void ok_size(const char *s, uint64_t want)
{
	uint64_t v = 12345;

	t_eq(hmm_size_parse(s, &v), 0, "'%s' parses", s);
	t_ok(v == want, "'%s' is %llu (got %llu)", s,
	     (unsigned long long)want, (unsigned long long)v);
}

static void bad_size(const char *s, int err)
{
	uint64_t v = 12345;

	t_eq(hmm_size_parse(s, &v), err, "'%s' is refused", s);
	t_eq(v, 12345, "'%s' leaves *out alone", s);
}

int main(void)
{
	ok_size("0", 0);
	ok_size("4096", 4096);
	ok_size("64K", 64ull << 10);
	ok_size("64k", 64ull << 10);
	ok_size("2M", 2ull << 20);
	ok_size("2MiB", 2ull << 20);
	ok_size("2mib", 2ull << 20);
	ok_size("512B", 512);
	ok_size("1G", 1ull << 30);
	ok_size("3t", 3ull << 40);
	ok_size("16777215T", 16777215ull << 40);
	bad_size("", -EINVAL);
	bad_size("-1", -EINVAL);
	bad_size(" 1", -EINVAL);
	bad_size("K", -EINVAL);
	bad_size("12Q", -EINVAL);
	bad_size("1iB", -EINVAL);
	bad_size("1G ", -EINVAL);
	bad_size("2MB", -EINVAL);
	bad_size("2mb", -EINVAL);
	bad_size("2Mb", -EINVAL);
	bad_size("4KB", -EINVAL);
	bad_size("1GB", -EINVAL);
	bad_size("1TB", -EINVAL);
	bad_size("2MiBB", -EINVAL);
	bad_size("2Mx", -EINVAL);
	bad_size("1.5G", -EINVAL);
	bad_size("16777216T", -ERANGE);
	bad_size("99999999999999999999", -ERANGE);
	t_eq(hmm_size_parse(NULL, NULL), -EINVAL, "NULL is refused");
	return t_done();
}
