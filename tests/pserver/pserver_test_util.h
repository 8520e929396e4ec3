// Helpers for the pserver tests: specs, requests, and a byte dump of a shard.
#ifndef TESTS_PSERVER_PSERVER_TEST_UTIL_H_
#define TESTS_PSERVER_PSERVER_TEST_UTIL_H_

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "paddle_like/dist/sharding.h"
#include "paddle_like/dist/wire.h"
#include "pserver/store/shard.h"

namespace pl::pserver::testing {

inline proto::ParamSpec DenseSpec(const std::string& name, std::vector<int64_t> shape, int64_t block_size,
                                  InitSpec init = InitSpec::Uniform(0.5f)) {
  proto::ParamSpec s;
  s.set_name(name);
  s.set_kind(proto::ParamSpec::DENSE);
  for (int64_t d : shape) s.add_shape(d);
  s.set_block_size(block_size);
  s.set_init_kind(static_cast<int>(init.kind));
  s.set_init_scale(init.scale);
  return s;
}

inline proto::ParamSpec SparseSpec(const std::string& name, int64_t dim, int64_t num_rows = 0,
                                   InitSpec init = InitSpec::Uniform(0.5f)) {
  proto::ParamSpec s;
  s.set_name(name);
  s.set_kind(proto::ParamSpec::SPARSE);
  s.set_dim(dim);
  s.set_num_rows(num_rows);
  s.set_init_kind(static_cast<int>(init.kind));
  s.set_init_scale(init.scale);
  return s;
}

inline proto::InitRequest MakeInit(std::vector<proto::ParamSpec> specs, OptimizerSpec opt, uint64_t seed = 7,
                                   bool sync = false) {
  proto::InitRequest r;
  for (auto& s : specs) *r.add_params() = s;
  *r.mutable_optimizer() = OptimizerToProto(opt);
  r.set_seed(seed);
  r.set_sync(sync);
  return r;
}

inline OptimizerSpec Sgd(float lr) {
  OptimizerSpec o;
  o.kind = OptimizerKind::kSGD;
  o.learning_rate = lr;
  return o;
}

inline void AddDense(proto::PushRequest* r, const std::string& param, int block, const std::vector<float>& g) {
  proto::DenseBlock* b = r->add_dense();
  b->set_param(param);
  b->set_block(block);
  SetFloats(b->mutable_values(), g.data(), static_cast<int64_t>(g.size()));
}

inline void AddRows(proto::PushRequest* r, const std::string& table, int64_t dim, const std::vector<int64_t>& ids,
                    const std::vector<float>& g) {
  proto::SparseRowsMsg* m = r->add_sparse();
  m->set_table(table);
  m->set_dim(dim);
  for (int64_t id : ids) m->add_ids(id);
  SetFloats(m->mutable_values(), g.data(), static_cast<int64_t>(g.size()));
}

inline std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

// Values of one dense block, pulled.
inline std::vector<float> PullBlock(ParameterShard& shard, const std::string& param, int block) {
  proto::PullRequest req;
  proto::DenseBlock* b = req.add_dense();
  b->set_param(param);
  b->set_block(block);
  proto::PullResponse resp;
  Status s = shard.Pull(req, absl::InfiniteFuture(), &resp);
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() ? Floats(resp.dense(0).values()) : std::vector<float>();
}

inline std::vector<float> PullRows(ParameterShard& shard, const std::string& table, const std::vector<int64_t>& ids) {
  proto::PullRequest req;
  proto::SparseRowsMsg* m = req.add_sparse();
  m->set_table(table);
  for (int64_t id : ids) m->add_ids(id);
  proto::PullResponse resp;
  Status s = shard.Pull(req, absl::InfiniteFuture(), &resp);
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() ? Floats(resp.sparse(0).values()) : std::vector<float>();
}

// The shard's whole state, byte for byte.
inline std::string Dump(const ParameterShard& shard) {
  std::string out;
  Status s = shard.SaveState([&](const void* d, size_t n) {
    out.append(static_cast<const char*>(d), n);
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// Loads `state` (Dump's bytes) into a fresh shard.
inline Status LoadDump(ParameterShard& shard, const std::string& state) {
  size_t pos = 0;
  return shard.LoadState([&](void* d, size_t n) {
    if (pos + n > state.size()) return absl::DataLossError("short");
    std::memcpy(d, state.data() + pos, n);
    pos += n;
    return absl::OkStatus();
  });
}

// Ids in [0, limit) that shard `index` of `num_shards` owns.
inline std::vector<int64_t> OwnedIds(int index, int num_shards, int count, int64_t start = 0) {
  std::vector<int64_t> ids;
  for (int64_t id = start; static_cast<int>(ids.size()) < count; ++id) {
    if (ShardOfRow(id, num_shards) == index) ids.push_back(id);
  }
  return ids;
}

}  // namespace pl::pserver::testing

#endif  // TESTS_PSERVER_PSERVER_TEST_UTIL_H_
