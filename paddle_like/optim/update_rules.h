// Optimizer update rules as plain functions over (parameter, gradient, state), so
// the single-process optimizer and the parameter server apply exactly the same code.
// The rules themselves are registered definitions (optimizer_registry.h, one file per
// optimizer: sgd.cc, momentum.cc, adagrad.cc, adam.cc); these functions find the
// spec's kind there. A caller applying many updates with one spec resolves it once
// (UpdateRule::Create) instead.
//
// State is `NumSlots(kind)` float slots per element, slot-major: slot k of an n-element
// block starts at state + k*n. Sparse rows use the same functions row by row with a
// per-row step count, which gives lazy updates: a row untouched by a batch keeps its
// value and its state.
//
// Thread-safety: as the registry's (optimizer_registry.h): safe from any thread once
// every optimizer is registered.
#ifndef PADDLE_LIKE_OPTIM_UPDATE_RULES_H_
#define PADDLE_LIKE_OPTIM_UPDATE_RULES_H_

#include <cstdint>
#include <string>

#include "paddle_like/core/status.h"
#include "paddle_like/optim/optimizer_registry.h"
#include "paddle_like/optim/optimizer_spec.h"

namespace pl {

const char* OptimizerName(OptimizerKind kind);
// A registered optimizer's kind by name (case-insensitive); INVALID_ARGUMENT naming the
// registered ones otherwise.
StatusOr<OptimizerKind> ParseOptimizerKind(const std::string& name);
// Checks the kind is registered, every hyper-parameter set is one of its own, and the
// ranges (lr > 0, 0 <= betas < 1, ...); the error names the field.
Status ValidateOptimizerSpec(const OptimizerSpec& spec);

// "beta2=0.99,epsilon=1e-6" (the --optimizer_args form) into spec->hyper: INVALID_ARGUMENT
// for an entry that is not name=number. Whether the kind has such hyper-parameters is
// ValidateOptimizerSpec's to check.
Status ParseHyperParams(const std::string& text, OptimizerSpec* spec);

// 0 for a kind that is not registered.
int NumSlots(OptimizerKind kind);
// Initial state values for `n` elements (Adagrad's accumulator is not zero).
// `spec` must name a registered kind and its own hyper-parameters (else a no-op).
void InitSlots(const OptimizerSpec& spec, float* state, int64_t n);

// One update of n elements. `step` is the 1-based number of updates these elements
// have received including this one (Adam's bias correction uses it). `spec` must name
// a registered kind and its own hyper-parameters (else nothing changes).
void ApplyUpdate(const OptimizerSpec& spec, float* param, const float* grad, float* state,
                 int64_t n, int64_t step);
// The same over part of a larger array: slot k of element i is state[k * state_stride + i].
// Updates are elementwise, so a block updated in parts equals the block updated whole.
void ApplyUpdate(const OptimizerSpec& spec, float* param, const float* grad, float* state,
                 int64_t n, int64_t step, int64_t state_stride);

}  // namespace pl

#endif  // PADDLE_LIKE_OPTIM_UPDATE_RULES_H_
