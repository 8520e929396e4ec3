// ShardVisitor: what a saver sees of a shard's store (ShardStore::Visit), in a stable
// order: the configuration; each dense parameter and its blocks, each block under its
// lock; each table and its rows stripe by stripe, each stripe under its lock. An error
// from the visitor stops the visit and is returned.
//
// Thread-safety: called on the visiting thread only.
#ifndef PSERVER_STORE_SHARD_VISITOR_H_
#define PSERVER_STORE_SHARD_VISITOR_H_

#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"
#include "paddle_like/core/status.h"
#include "proto/pserver.pb.h"

namespace pl::pserver {

class ShardVisitor {
 public:
  virtual ~ShardVisitor() = default;
  virtual Status Config(const proto::OptimizerConfig& optimizer, uint64_t seed, bool sync, size_t dense_params) = 0;
  virtual Status Param(const proto::ParamSpec& spec, size_t blocks) = 0;
  // data: value (n) then S slots of n. step_record: DenseStore::StepRecord.
  virtual Status Block(int64_t block, int64_t n, int64_t step_record, absl::Span<const float> data) = 0;
  virtual Status Tables(size_t tables) = 0;
  virtual Status Table(const proto::ParamSpec& spec, int stripes) = 0;
  virtual Status Stripe(size_t rows) = 0;
  virtual Status Row(int64_t id, absl::Span<const float> record) = 0;
  // Before a stripe's rows in an incremental visit: the rows evicted since the marks
  // were last taken (an id may also be among the rows, if it came back since).
  virtual Status Evicted(absl::Span<const int64_t> ids) = 0;
  // After a stripe's rows, for a table with admission (admit_after > 1): its sighting
  // counters (kSketchDepth x kSketchWidth, zeros when none yet).
  virtual Status Sightings(absl::Span<const uint16_t> counters) = 0;
};

// Which rows a visit shows: all of them; all, taking the change marks (a full
// checkpoint); or only the rows changed since the marks were last taken (an
// incremental one). Taking the marks clears them stripe by stripe as it goes.
enum class VisitRows { kAll, kAllTakingChanges, kChangedTakingChanges };

}  // namespace pl::pserver

#endif  // PSERVER_STORE_SHARD_VISITOR_H_
