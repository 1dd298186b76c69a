/* SPDX-License-Identifier: MIT */
/*
 * log.h — hmmd's one log writer (log.c), for every daemon file: a line
 * on stderr (the journal under systemd), "hmmd: " first.  Any thread;
 * one write(2) per line, so lines of two threads never interleave.
 */
#ifndef HMMD_LOG_H
#define HMMD_LOG_H

void hmmd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* HMMD_LOG_H */
