// Splitting the dense blocks of one push over a few threads (private to the shard).
//
// Thread-safety: ParallelFor may be called from many threads at once (one call at a
// time gets the helper threads, the others run on their caller alone); fn must be
// safe to call concurrently for different i.
#ifndef PSERVER_STORE_PARALLEL_FOR_H_
#define PSERVER_STORE_PARALLEL_FOR_H_

#include <cstdint>
#include <functional>

namespace pl::pserver {

// Runs fn(i) for every i in [0, n) on up to `threads` threads, this one included, and
// returns when all are done. Dense blocks are independent (each has its own lock), so
// a large push is scanned and applied on several cores while its trainer waits. The
// helpers are a few long-lived threads: starting threads per push cost more than the
// work they shared for a model of a few MB.
// `another_follows`: the caller will call again at once (a push's validation, then its
// update), so the helpers stay awake for it a moment instead of going to sleep.
void ParallelFor(int64_t n, int threads, const std::function<void(int64_t)>& fn, bool another_follows = false);

// One thread per MB of dense payload, up to the cores (at most 4).
int ThreadsForDense(int64_t floats);
// For a push's or pull's sparse rows (each row a hash lookup and a few cache misses
// besides its floats): one thread per 4096 rows, up to the cores (at most 4).
int ThreadsForRows(int64_t rows);

}  // namespace pl::pserver

#endif  // PSERVER_STORE_PARALLEL_FOR_H_
