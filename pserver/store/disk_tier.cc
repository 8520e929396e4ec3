#include "pserver/store/disk_tier.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "paddle_like/core/log.h"
#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/options.h"
#include "rocksdb/table.h"

namespace pl::pserver {

namespace {

std::string Key(const std::string& table, int64_t id) {
  std::string key = table;
  key.push_back('\0');
  const uint64_t u = static_cast<uint64_t>(id);
  for (int shift = 56; shift >= 0; shift -= 8) key.push_back(static_cast<char>((u >> shift) & 0xff));
  return key;
}

int64_t IdOf(const rocksdb::Slice& key) {
  uint64_t u = 0;
  for (size_t i = key.size() - 8; i < key.size(); ++i) u = (u << 8) | static_cast<uint8_t>(key[i]);
  return static_cast<int64_t>(u);
}

Status FromRocks(const rocksdb::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("disk tier: ", what, ": ", s.ToString()));
}

// Durability comes from checkpoints, not from this directory: no write-ahead log.
rocksdb::WriteOptions NoWal() {
  rocksdb::WriteOptions w;
  w.disableWAL = true;
  return w;
}

}  // namespace

StatusOr<std::unique_ptr<DiskTier>> DiskTier::Open(const std::string& dir, int64_t memory_bytes) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("disk tier: cannot create ", dir, ": ", ec.message()));
  rocksdb::Options options;
  options.create_if_missing = true;
  options.compression = rocksdb::kNoCompression;  // floats hardly compress; it would only cost CPU
  const int64_t budget = std::max<int64_t>(memory_bytes, 32 << 20);
  options.write_buffer_size = static_cast<size_t>(std::clamp<int64_t>(budget / 8, 4 << 20, 64 << 20));
  options.max_write_buffer_number = 2;
  options.max_open_files = 256;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(static_cast<size_t>(std::clamp<int64_t>(budget / 8, 8 << 20, 256 << 20)));
  // A new id (most misses in a click log) costs no read. The filters stay out of the
  // block cache: evicted there, every miss would read them back (10 bits a row, about
  // 1% of a row's record).
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.cache_index_and_filter_blocks = false;
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  rocksdb::DB* db = nullptr;
  PL_RETURN_IF_ERROR(FromRocks(rocksdb::DB::Open(options, dir, &db), absl::StrCat("open ", dir)));
  return std::unique_ptr<DiskTier>(new DiskTier(dir, std::unique_ptr<rocksdb::DB>(db)));
}

DiskTier::DiskTier(std::string dir, std::unique_ptr<rocksdb::DB> db) : dir_(std::move(dir)), db_(std::move(db)) {}

DiskTier::~DiskTier() {
  db_.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);  // scratch: the checkpoints hold the rows
}

Status DiskTier::Put(const std::string& table, int64_t id, absl::Span<const float> record) {
  const rocksdb::Slice value(reinterpret_cast<const char*>(record.data()), record.size() * sizeof(float));
  PL_RETURN_IF_ERROR(FromRocks(db_->Put(NoWal(), Key(table, id), value), "put"));
  Count(table, +1);
  return absl::OkStatus();
}

StatusOr<bool> DiskTier::Take(const std::string& table, int64_t id, absl::Span<float> record) {
  const std::string key = Key(table, id);
  rocksdb::PinnableSlice value;
  const rocksdb::Status got = db_->Get(rocksdb::ReadOptions(), db_->DefaultColumnFamily(), key, &value);
  if (got.IsNotFound()) return false;
  PL_RETURN_IF_ERROR(FromRocks(got, "get"));
  if (value.size() != record.size() * sizeof(float)) {
    return absl::DataLossError(absl::StrCat("disk tier: row ", id, " of table '", table, "' has ", value.size(),
                                            " bytes, a record has ", record.size() * sizeof(float)));
  }
  std::memcpy(record.data(), value.data(), value.size());
  PL_RETURN_IF_ERROR(FromRocks(db_->Delete(NoWal(), key), "delete"));
  Count(table, -1);
  return true;
}

Status DiskTier::ForEach(const std::string& table, int64_t record_floats,
                         const std::function<Status(int64_t id, absl::Span<const float> record)>& fn) const {
  std::string prefix = table;
  prefix.push_back('\0');
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  std::vector<float> record(static_cast<size_t>(record_floats));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    if (it->key().size() != prefix.size() + 8 || it->value().size() != record.size() * sizeof(float)) {
      return absl::DataLossError(absl::StrCat("disk tier: a malformed row of table '", table, "'"));
    }
    std::memcpy(record.data(), it->value().data(), it->value().size());
    PL_RETURN_IF_ERROR(fn(IdOf(it->key()), record));
  }
  return FromRocks(it->status(), "iterate");
}

void DiskTier::StopOnFailure(const Status& s) {
  log::Error(absl::StrCat("the sparse disk tier failed: ", s.message(), "; stopping"));
  std::_Exit(1);
}

void DiskTier::Count(const std::string& table, int64_t delta) {
  rows_.fetch_add(delta, std::memory_order_relaxed);
  absl::MutexLock l(&counts_mu_);
  table_rows_[table] += delta;
}

int64_t DiskTier::rows(const std::string& table) const {
  absl::MutexLock l(&counts_mu_);
  auto it = table_rows_.find(table);
  return it == table_rows_.end() ? 0 : it->second;
}

int64_t DiskTier::bytes_on_disk() const {
  uint64_t bytes = 0;
  db_->GetIntProperty("rocksdb.total-sst-files-size", &bytes);
  uint64_t memtables = 0;
  db_->GetIntProperty("rocksdb.cur-size-all-mem-tables", &memtables);
  return static_cast<int64_t>(bytes + memtables);
}

}  // namespace pl::pserver
