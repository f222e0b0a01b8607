/* fault: named fault points the fault-injection tests arm with DEDUPD_FAULT (test builds only). */
#ifndef DEDUPD_FAULT_H
#define DEDUPD_FAULT_H

/*
 * DEDUPD_FAULT=NAME[:N[:ACTION]] makes the N-th time (default 1) the
 * pipeline passes point NAME do ACTION: "kill" (SIGKILL, the default) or
 * "stop" (SIGSTOP: a zombie holding whatever it holds). Points, in pipeline
 * order: after_poll, after_dlq, after_claim, in_handler, before_commit,
 * after_commit, after_ack. Compiled in only with the CMake option
 * DEDUPD_FAULT_POINTS=ON, which only the test suite's builds set: an
 * installed dedupd ignores DEDUPD_FAULT.
 */
#ifdef DEDUPD_FAULT_POINTS
void fault_point(const char *name);
#else
#define fault_point(name) ((void)0)
#endif

#endif
