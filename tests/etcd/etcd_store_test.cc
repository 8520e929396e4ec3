// The master's state and event log kept in a real etcd: values whole or in pieces,
// every write fenced by the leader's term, group commit, corruption named, never
// skipped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "paddle_like/etcd/etcd_record_log.h"
#include "paddle_like/etcd/etcd_state_store.h"
#include "tests/etcd/etcd_fixture.h"

namespace pl::etcd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The fence of a leader that holds `key` (created now).
Fence Lead(EtcdClient* client, const std::string& key) {
  etcdserverpb::TxnRequest txn;
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value("me");
  auto r = client->Txn(txn);
  EXPECT_TRUE(r.ok()) << r.status();
  return Fence{key, r.ok() ? r->header().revision() : -1};
}

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  uint32_t x = 2166136261u ^ static_cast<uint32_t>(seed);
  for (size_t i = 0; i < n; ++i) {
    x = x * 16777619u + 1;
    s[i] = static_cast<char>(x >> 24);
  }
  return s;
}

using EtcdStateStoreTest = EtcdFixture;

TEST_F(EtcdStateStoreTest, PutGetListDeleteRoundTrip) {
  EtcdStateStore store(client_.get(), prefix_, Lead(client_.get(), prefix_ + "/leader"));
  EXPECT_TRUE(absl::IsNotFound(store.Get("master/state").status()));
  ASSERT_TRUE(store.Put("master/state", "abc").ok());
  ASSERT_TRUE(store.Put("master/other", std::string("\0\1\2", 3)).ok());
  EXPECT_EQ(*store.Get("master/state"), "abc");
  EXPECT_EQ(*store.Get("master/other"), std::string("\0\1\2", 3));
  EXPECT_THAT(*store.List("master/"), ElementsAre("master/other", "master/state"));
  ASSERT_TRUE(store.Put("master/state", "").ok());
  EXPECT_EQ(*store.Get("master/state"), "");
  ASSERT_TRUE(store.Delete("master/state").ok());
  EXPECT_TRUE(absl::IsNotFound(store.Get("master/state").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store.Put("../escape", "x")));
}

TEST_F(EtcdStateStoreTest, ALargeValueGoesInPiecesAndItsOldPiecesAreDeleted) {
  EtcdStateStore store(client_.get(), prefix_, Lead(client_.get(), prefix_ + "/leader"));
  const std::string big = Pattern(3 * EtcdStateStore::kPieceBytes + 12345, 1);
  ASSERT_TRUE(store.Put("master/state", big).ok());
  EXPECT_EQ(*store.Get("master/state"), big);
  auto pieces = [&] {
    etcdserverpb::RangeRequest r;
    r.set_key(prefix_ + "/pieces/");
    r.set_range_end(EtcdClient::PrefixEnd(prefix_ + "/pieces/"));
    r.set_count_only(true);
    return client_->Range(r)->count();
  };
  EXPECT_EQ(pieces(), 4);
  const std::string bigger = Pattern(2 * EtcdStateStore::kPieceBytes + 1, 2);
  ASSERT_TRUE(store.Put("master/state", bigger).ok());
  EXPECT_EQ(*store.Get("master/state"), bigger);
  EXPECT_EQ(pieces(), 3);  // the first value's four are gone
  ASSERT_TRUE(store.Put("master/state", "small").ok());
  EXPECT_EQ(*store.Get("master/state"), "small");
  EXPECT_EQ(pieces(), 0);
}

TEST_F(EtcdStateStoreTest, ACorruptValueOrPieceIsDataLossNamingTheKey) {
  EtcdStateStore store(client_.get(), prefix_, Lead(client_.get(), prefix_ + "/leader"));
  ASSERT_TRUE(store.Put("master/state", "hello").ok());
  etcdserverpb::RangeRequest r;
  r.set_key(prefix_ + "/kv/master/state");
  std::string entry = client_->Range(r)->kvs(0).value();
  entry.back() ^= 1;
  RawPut(prefix_ + "/kv/master/state", entry);
  Status st = store.Get("master/state").status();
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr(prefix_ + "/kv/master/state"));
  EXPECT_THAT(st.message(), HasSubstr("CRC"));

  const std::string big = Pattern(EtcdStateStore::kPieceBytes + 10, 3);
  ASSERT_TRUE(store.Put("master/state", big).ok());
  etcdserverpb::RangeRequest p;
  p.set_key(prefix_ + "/pieces/");
  p.set_range_end(EtcdClient::PrefixEnd(prefix_ + "/pieces/"));
  auto listed = client_->Range(p);
  ASSERT_EQ(listed->kvs_size(), 2);
  // The second piece lost: named, not a short value.
  etcdserverpb::TxnRequest del;
  del.add_success()->mutable_request_delete_range()->set_key(listed->kvs(1).key());
  ASSERT_TRUE(client_->Txn(del).ok());
  st = store.Get("master/state").status();
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("piece"));
}

TEST_F(EtcdStateStoreTest, AReplacedLeadersWritesAreRefusedAndChangeNothing) {
  const std::string key = prefix_ + "/leader";
  EtcdStateStore old_leader(client_.get(), prefix_, Lead(client_.get(), key));
  ASSERT_TRUE(old_leader.Put("master/state", "before").ok());
  EtcdStateStore new_leader(client_.get(), prefix_, Lead(client_.get(), key + "x"));  // unrelated key: still fine
  // The election key created again: a new term.
  etcdserverpb::TxnRequest del;
  del.add_success()->mutable_request_delete_range()->set_key(key);
  ASSERT_TRUE(client_->Txn(del).ok());
  Fence now = Lead(client_.get(), key);
  EtcdStateStore leader(client_.get(), prefix_, now);
  Status st = old_leader.Put("master/state", "after");
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("no longer leads"));
  st = old_leader.Put("master/state", Pattern(EtcdStateStore::kPieceBytes * 2, 4));
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_TRUE(absl::IsFailedPrecondition(old_leader.Delete("master/state")));
  EXPECT_EQ(*leader.Get("master/state"), "before");
  ASSERT_TRUE(leader.Put("master/state", "new term").ok());
  EXPECT_EQ(*old_leader.Get("master/state"), "new term");  // reads are not fenced
}

using EtcdRecordLogTest = EtcdFixture;

TEST_F(EtcdRecordLogTest, CallsInFlightShareWritesAndALoadReadsEveryRecordInOrder) {
  const Fence fence = Lead(client_.get(), prefix_ + "/leader");
  EtcdRecordLog log(client_.get(), prefix_ + "/events/", fence);
  ASSERT_TRUE(log.Load().ok());
  constexpr int kThreads = 8, kEach = 40;
  std::mutex order_mu;  // Append in one order, as the master does under its lock
  std::vector<std::string> appended;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        int64_t ticket;
        {
          std::lock_guard<std::mutex> lock(order_mu);
          std::string r = absl::StrCat("event ", t, "/", i);
          ticket = *log.Append(r);
          appended.push_back(std::move(r));
        }
        if (!log.Sync(ticket).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  // Group commit: fewer etcd writes than records (8 threads in flight at once).
  EXPECT_LT(log.batches_written(), kThreads * kEach);
  EXPECT_GT(log.batches_written(), 0);
  EtcdRecordLog reader(client_.get(), prefix_ + "/events/", fence);
  auto loaded = reader.Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->records, appended);
  EXPECT_EQ(loaded->torn_bytes, 0);
  EXPECT_GT(reader.size(), 0);

  // A new log continues the numbering: its batches sort after the old ones.
  ASSERT_TRUE(reader.Sync(*reader.Append("after reload")).ok());
  EtcdRecordLog again(client_.get(), prefix_ + "/events/", fence);
  auto all = again.Load();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->records.size(), appended.size() + 1);
  EXPECT_EQ(all->records.back(), "after reload");

  ASSERT_TRUE(again.Reset().ok());
  EXPECT_EQ(again.size(), 0);
  EtcdRecordLog empty(client_.get(), prefix_ + "/events/", fence);
  EXPECT_TRUE(empty.Load()->records.empty());
}

TEST_F(EtcdRecordLogTest, ACorruptBatchStopsTheLoadNamingItsKey) {
  const Fence fence = Lead(client_.get(), prefix_ + "/leader");
  EtcdRecordLog log(client_.get(), prefix_ + "/events/", fence);
  ASSERT_TRUE(log.Load().ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(log.Sync(*log.Append(absl::StrCat("record ", i))).ok());
  etcdserverpb::RangeRequest r;
  r.set_key(prefix_ + "/events/");
  r.set_range_end(EtcdClient::PrefixEnd(prefix_ + "/events/"));
  auto batches = client_->Range(r);
  ASSERT_EQ(batches->kvs_size(), 3);
  const std::string middle = batches->kvs(1).key();
  std::string bytes = batches->kvs(1).value();
  bytes[bytes.size() - 1] ^= 0x40;  // the payload's last byte: its CRC fails
  RawPut(middle, bytes);
  Status st = EtcdRecordLog(client_.get(), prefix_ + "/events/", fence).Load().status();
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr(middle));
  // A batch cut short is corruption too: an etcd write is whole.
  RawPut(middle, batches->kvs(1).value().substr(0, 6));
  st = EtcdRecordLog(client_.get(), prefix_ + "/events/", fence).Load().status();
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr(middle));
}

TEST_F(EtcdRecordLogTest, AWriteRefusedByTheFenceFailsTheLogOnceAndForAll) {
  const std::string key = prefix_ + "/leader";
  const Fence fence = Lead(client_.get(), key);
  std::vector<std::string> reported;
  EtcdRecordLog log(client_.get(), prefix_ + "/events/", fence,
                    [&](const Status& st) { reported.push_back(std::string(st.message())); });
  ASSERT_TRUE(log.Load().ok());
  ASSERT_TRUE(log.Sync(*log.Append("kept")).ok());
  // A put of the key keeps the revision that created it: the same term.
  Lead(client_.get(), key);
  ASSERT_TRUE(log.Sync(*log.Append("same term")).ok());
  // A new term: the key deleted (a lease ran out) and created again.
  etcdserverpb::TxnRequest del;
  del.add_success()->mutable_request_delete_range()->set_key(key);
  ASSERT_TRUE(client_->Txn(del).ok());
  Lead(client_.get(), key);
  Status st = log.Sync(*log.Append("refused"));
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("no longer leads"));
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_FALSE(log.Append("after").ok());
  EXPECT_FALSE(log.Sync(100).ok());
  EXPECT_EQ(reported.size(), 1u);  // reported once
  auto loaded = EtcdRecordLog(client_.get(), prefix_ + "/events/", Fence{}).Load();
  ASSERT_TRUE(loaded.ok());
  EXPECT_THAT(loaded->records, ElementsAre("kept", "same term"));
}

}  // namespace
}  // namespace pl::etcd
