// The "grad enabled" switch: while it is off on a thread, ops on that thread record
// no graph (Variable::FromOp, and the ops that build their graph by hand such as
// Embedding, return outputs that need no gradient and keep no inputs alive). It is
// what NoGradScope (variable.h) turns off for a C++ scope, and what Python's
// paddle_like.no_grad() / inference_mode() turn off, which cannot hold a C++ scope
// object across calls and so set and restore it with SetGradEnabled.
//
// Thread-safety: the switch is thread_local: each thread has its own, on at thread
// start; reading or setting it affects only the calling thread and needs no lock.
// An op that hands work to other threads (OpenMP) builds its graph on the calling
// thread, so the caller's switch is the one that counts.
#ifndef PADDLE_LIKE_CORE_GRAD_MODE_H_
#define PADDLE_LIKE_CORE_GRAD_MODE_H_

namespace pl {

// Whether ops on the calling thread record a graph.
bool GradEnabled();

// Sets the calling thread's switch and returns its previous value, which the caller
// restores when its region ends (also on errors).
bool SetGradEnabled(bool enabled);

}  // namespace pl

#endif  // PADDLE_LIKE_CORE_GRAD_MODE_H_
