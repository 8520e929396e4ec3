// Splitting independent pieces of one job (a push's dense blocks or row stripes on a
// pserver, a step's block copies on a trainer) over a few long-lived threads.
//
// Thread-safety: ParallelFor may be called from many threads at once (one call at a
// time gets the helper threads, the others run on their caller alone); fn must be
// safe to call concurrently for different i.
#ifndef PADDLE_LIKE_CORE_PARALLEL_FOR_H_
#define PADDLE_LIKE_CORE_PARALLEL_FOR_H_

#include <cstdint>
#include <functional>

namespace pl {

// Runs fn(i) for every i in [0, n) on up to `threads` threads, this one included, and
// returns when all are done. Dense blocks are independent (each has its own lock), so
// a large push is scanned and applied on several cores while its trainer waits. The
// helpers are a few long-lived threads: starting threads per push cost more than the
// work they shared for a model of a few MB.
// `another_follows`: the caller will call again at once (a push's validation, then its
// update), so the helpers stay awake for it a moment instead of going to sleep.
void ParallelFor(int64_t n, int threads, const std::function<void(int64_t)>& fn, bool another_follows = false);

// The most threads one call uses, this one included (pl-pserver --apply_threads; 0,
// the default: one per core). Process-wide: a pserver sets it once at start. Any count gives the same bits: the work is split by block (dense) or stripe
// (sparse), each updated by one thread exactly as a single thread would.
void SetApplyThreads(int threads);
int ApplyThreads();

// One thread per 512 KB of dense payload (two blocks), up to ApplyThreads().
int ThreadsForDense(int64_t floats);
// For a push's or pull's sparse rows (each row a hash lookup and a few cache misses
// besides its floats): one thread per 4096 rows, up to ApplyThreads().
int ThreadsForRows(int64_t rows);

}  // namespace pl

#endif  // PADDLE_LIKE_CORE_PARALLEL_FOR_H_
