// The dense channels' own work, without a pserver: what Prepare makes of a push (zero
// copy, own copies, bfloat16 with error feedback, a region's slots), and the push a
// failed region channel hands back for gRPC; how a replication stream's call packs its
// entries' blocks into a region, and what a replica's region refuses.
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "paddle_like/client/dense_channel.h"
#include "paddle_like/client/grpc_dense_channel.h"
#include "paddle_like/client/region_dense_channel.h"
#include "paddle_like/dist/bf16.h"
#include "paddle_like/dist/shared_region.h"
#include "paddle_like/dist/sharding.h"

namespace pl {
namespace {

std::vector<float> Values(const FloatPieces& p) {
  std::vector<float> v(p.size());
  p.CopyTo(v.data());
  return v;
}

float Bf16Of(float x) {
  uint16_t h = 0;
  EncodeBf16(&x, 1, &h);
  float back = 0;
  DecodeBf16(&h, 1, &back);
  return back;
}

TEST(GrpcDenseChannel, SendsTheGradientsInPlaceOrItsOwnCopies) {
  PreparedPush prepared;
  std::vector<float> grads = {1, 2, 3};
  auto owner = std::make_shared<int>(0);
  Bf16Residuals residuals;
  GrpcDenseChannel channel(WireDtype::kFloat32, &residuals);

  PushFrame in_place;
  in_place.header().set_step(7);
  in_place.AddDenseRef("w", 0, grads.data(), 3, owner);
  ASSERT_TRUE(channel.Prepare(in_place, /*own_copies=*/false, &prepared));
  EXPECT_EQ(in_place.dense()[0].values.contiguous(), grads.data());

  PushFrame copied;
  copied.header().set_step(7);
  copied.AddDenseRef("w", 0, grads.data(), 3, owner);
  ASSERT_TRUE(channel.Prepare(copied, /*own_copies=*/true, &prepared));
  grads[0] = 100;  // the tensor changes once Prepare returned
  EXPECT_EQ(copied.header().step(), 7);
  EXPECT_EQ(Values(copied.dense()[0].values), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(channel.WireBytes(3), 12);
}

// 1.001 is not a bfloat16 (steps of 2^-7 near 1): each push rounds it down to 1 and
// carries the rest, until the carried part tips a push up to 1.0078125. Over k pushes
// the values sent add up to k * 1.001 within one rounding.
TEST(GrpcDenseChannel, RoundsToBfloat16AndCarriesWhatRoundingDropped) {
  PreparedPush prepared;
  Bf16Residuals residuals;
  GrpcDenseChannel channel(WireDtype::kBfloat16, &residuals);
  EXPECT_EQ(channel.WireBytes(3), 6);
  const float g = 1.001f;
  double sent = 0;
  for (int k = 1; k <= 20; ++k) {
    std::vector<float> grads = {g};
    PushFrame push;
    push.AddDenseRef("w", 0, grads.data(), 1, nullptr);
    ASSERT_TRUE(channel.Prepare(push, false, &prepared));
    ASSERT_TRUE(push.dense()[0].bf16);
    ASSERT_EQ(push.dense()[0].values.num_bytes(), 2);
    float value = 0;
    push.dense()[0].values.ForEachPiece([&](const char* data, size_t) { DecodeBf16(data, 1, &value); });
    EXPECT_EQ(value, Bf16Of(value));
    sent += value;
    EXPECT_LE(std::abs(sent - k * double{g}), 1.0 / 128) << "after push " << k;
  }
  EXPECT_GT(sent, 20.0) << "the carried part never went out";
}

// A region of two blocks of one parameter ("w": 4 + 2 floats) laid out as the client does.
struct TwoSlots {
  TwoSlots() {
    slots = {{"w", 0, 4, 0, 0}, {"w", 1, 2, 64, 0}};
    const int64_t area = 128;
    for (DenseSlot& s : slots) s.value_offset = area + s.grad_offset;
    region = *SharedRegion::CreatePrivate(2 * area);
  }
  PushFrame Push(const std::vector<float>& a, const std::vector<float>& b) {
    PushFrame p;
    p.header().set_step(3);
    p.AddDenseRef("w", 0, a.data(), 4, nullptr);
    p.AddDenseRef("w", 1, b.data(), 2, nullptr);
    return p;
  }
  std::vector<DenseSlot> slots;
  std::shared_ptr<SharedRegion> region;
};

TEST(ShmDenseChannel, CopiesThePushIntoItsSlotsAndHandsItBackForGrpc) {
  PreparedPush prepared;
  TwoSlots t;
  ShmDenseChannel channel(t.slots, t.region, /*region_id=*/9);
  std::vector<float> a = {1, 2, 3, 4}, b = {5, 6};
  PushFrame push = t.Push(a, b);
  ASSERT_TRUE(channel.Prepare(push, /*own_copies=*/false, &prepared));
  const float* in_region = reinterpret_cast<const float*>(t.region->payload());
  EXPECT_EQ(std::vector<float>(in_region, in_region + 4), a);
  EXPECT_EQ(std::vector<float>(in_region + 16, in_region + 18), b);

  a[0] = -1;  // the tensors may change: the push is in the region
  channel.TakePushForGrpc(push, prepared);
  ASSERT_EQ(push.dense().size(), 2u);
  EXPECT_EQ(push.header().step(), 3);
  EXPECT_EQ(Values(push.dense()[0].values), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(Values(push.dense()[1].values), (std::vector<float>{5, 6}));
}

TEST(ShmDenseChannel, RefusesAPushThatDoesNotMatchItsSlots) {
  PreparedPush prepared;
  TwoSlots t;
  ShmDenseChannel channel(t.slots, t.region, 9);
  std::vector<float> a = {1, 2, 3, 4}, b = {5, 6, 7};
  PushFrame wrong_size;
  wrong_size.AddDenseRef("w", 0, a.data(), 4, nullptr);
  wrong_size.AddDenseRef("w", 1, b.data(), 3, nullptr);
  EXPECT_FALSE(channel.Prepare(wrong_size, false, &prepared));
  PushFrame unknown;
  unknown.AddDenseRef("v", 0, a.data(), 4, nullptr);
  EXPECT_FALSE(channel.Prepare(unknown, false, &prepared));
}

// A push of some blocks (a layer's, a key's) goes through the region all the same, in
// its own order; taking it back for gRPC gives those blocks only.
TEST(ShmDenseChannel, TakesAPushOfSomeBlocksInAnyOrder) {
  PreparedPush prepared;
  TwoSlots t;
  ShmDenseChannel channel(t.slots, t.region, 9);
  std::vector<float> b = {5, 6};
  PushFrame push;
  push.header().set_step(4);
  push.AddDenseRef("w", 1, b.data(), 2, nullptr);
  ASSERT_TRUE(channel.Prepare(push, false, &prepared));
  const float* in_region = reinterpret_cast<const float*>(t.region->payload());
  EXPECT_EQ(std::vector<float>(in_region + 16, in_region + 18), b);  // slot 1's place
  channel.TakePushForGrpc(push, prepared);
  ASSERT_EQ(push.dense().size(), 1u);
  EXPECT_EQ(push.dense()[0].block, 1);
  EXPECT_EQ(Values(push.dense()[0].values), b);
  EXPECT_EQ(push.header().step(), 4);
}

// Two pushes prepared on one channel (a layer's blocks, then another's) keep apart: each
// is what its own PreparedPush says, so both may be in flight at once.
TEST(ShmDenseChannel, TwoPreparedPushesOfDifferentBlocksKeepApart) {
  TwoSlots t;
  ShmDenseChannel channel(t.slots, t.region, 9);
  std::vector<float> a = {1, 2, 3, 4}, b = {5, 6};
  PushFrame first, second;
  first.AddDenseRef("w", 0, a.data(), 4, nullptr);
  second.AddDenseRef("w", 1, b.data(), 2, nullptr);
  PreparedPush one, two;
  ASSERT_TRUE(channel.Prepare(first, false, &one));
  ASSERT_TRUE(channel.Prepare(second, false, &two));
  EXPECT_EQ(one.slots, std::vector<int>{0});
  EXPECT_EQ(two.slots, std::vector<int>{1});
  channel.TakePushForGrpc(second, two);
  channel.TakePushForGrpc(first, one);
  ASSERT_EQ(first.dense().size(), 1u);
  ASSERT_EQ(second.dense().size(), 1u);
  EXPECT_EQ(Values(first.dense()[0].values), a);
  EXPECT_EQ(Values(second.dense()[0].values), b);
}

// A region holding bfloat16 (a link's wire dtype), without the link.
class Bf16Region final : public RegionDenseChannel {
 public:
  Bf16Region(std::vector<DenseSlot> slots, std::shared_ptr<SharedRegion> region, Bf16Residuals* residuals)
      : RegionDenseChannel(std::move(slots), std::move(region), 9) {
    residuals_ = residuals;
  }
  std::string Describe() const override { return "test"; }
  int64_t WireBytes(int64_t values) const override { return 2 * values; }
  bool duplex() const override { return true; }
  bool push_brings_values() const override { return false; }
  Status Push(PserverFrameStub&, grpc::ClientContext*, PushFrame&, const PreparedPush&, bool, proto::PushResponse*,
              PullFrame*) override {
    return absl::FailedPreconditionError("this test has no pserver");
  }
  Status Pull(PserverFrameStub&, grpc::ClientContext*, const proto::PullRequest&, PullFrame*) override {
    return absl::FailedPreconditionError("this test has no pserver");
  }
  Status Replicate(PserverFrameStub&, grpc::ClientContext*, ReplicateFrame&, const std::vector<const PushFrame*>&,
                   proto::ReplicateResponse*) override {
    return absl::FailedPreconditionError("this test has no pserver");
  }
  Status SendSnapshot(const SnapshotTransfer&) override { return absl::UnimplementedError("no snapshot here"); }

 protected:
  bool bf16() const override { return true; }
};

TEST(RegionDenseChannel, ABfloat16RegionRoundsWithFeedbackAndWidensExactlyForGrpc) {
  PreparedPush prepared;
  TwoSlots t;
  Bf16Residuals residuals;
  Bf16Region channel(t.slots, t.region, &residuals);
  std::vector<float> a = {1.001f, 2.0f, 3.0f, 4.0f}, b = {5.0f, 6.003f};
  PushFrame push = t.Push(a, b);
  ASSERT_TRUE(channel.Prepare(push, false, &prepared));
  channel.TakePushForGrpc(push, prepared);
  const std::vector<float> got_a = Values(push.dense()[0].values), got_b = Values(push.dense()[1].values);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got_a[i], Bf16Of(a[i])) << i;
  for (int i = 0; i < 2; ++i) EXPECT_EQ(got_b[i], Bf16Of(b[i])) << i;
  // What rounding dropped waits for the next push (block 1 starts at kDefaultBlockSize).
  EXPECT_FLOAT_EQ(residuals.For("w", 0, 1)[0], a[0] - got_a[0]);
  EXPECT_FLOAT_EQ(residuals.For("w", kDefaultBlockSize + 1, 1)[0], b[1] - got_b[1]);
}

// A stub whose calls fail at once (nothing listens on port 1): the channel's own work is
// done by then.
PserverFrameStub NowhereStub() {
  return PserverFrameStub(grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()));
}

std::unique_ptr<grpc::ClientContext> ShortCall() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return context;
}

proto::ReplicaEntry PushEntry(int64_t position, const PushFrame& push) {
  proto::ReplicaEntry e;
  e.set_position(position);
  *e.mutable_push() = push.header();
  return e;
}

TEST(ShmDenseChannel, AStreamCallPacksItsPushesBlocksAlignedWhereItNamesThem) {
  std::shared_ptr<SharedRegion> region = *SharedRegion::CreatePrivate(4096);
  ShmDenseChannel channel({}, region, 7);
  channel.SetStreamAbilities({/*batches=*/true, /*bf16=*/true});
  PushFrame first, second;
  const std::vector<float> a = {1, 2, 3}, b = {4, 5}, c = {6};
  first.AddDenseCopy("w", 0, a.data(), 3);
  const float half_in[2] = {1.5f, -2.25f};  // exact in bfloat16
  first.AddDenseBf16("h", 0, half_in, 2);   // 4 bytes: the next block starts aligned
  second.AddDenseCopy("w", 1, b.data(), 2);
  second.AddDenseCopy("v", 0, c.data(), 1);
  ReplicateFrame call;
  call.header().set_epoch(3);
  *call.header().add_entries() = PushEntry(1, first);
  call.header().add_entries()->set_step_end(2);
  *call.header().add_entries() = PushEntry(3, second);
  PserverFrameStub stub = NowhereStub();
  proto::ReplicateResponse response;
  const Status s = channel.Replicate(stub, ShortCall().get(), call, {&first, &second}, &response);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;  // the call found no replica; the blocks are in place

  const proto::ReplicateRequest& sent = call.header();
  EXPECT_EQ(sent.region(), 7u);
  EXPECT_EQ(sent.entries(1).push().shm_dense_size(), 0);
  ASSERT_EQ(sent.entries(0).push().shm_dense_size(), 2);
  ASSERT_EQ(sent.entries(2).push().shm_dense_size(), 2);
  const proto::ShmBlock& w0 = sent.entries(0).push().shm_dense(0);
  const proto::ShmBlock& h0 = sent.entries(0).push().shm_dense(1);
  const proto::ShmBlock& w1 = sent.entries(2).push().shm_dense(0);
  const proto::ShmBlock& v0 = sent.entries(2).push().shm_dense(1);
  EXPECT_EQ(w0.offset(), 0);
  EXPECT_EQ(w0.count(), 3);
  EXPECT_EQ(h0.offset(), 12);
  EXPECT_EQ(h0.count(), 2);
  EXPECT_TRUE(h0.bf16());
  EXPECT_EQ(w1.offset(), 16);
  EXPECT_EQ(w1.param(), "w");
  EXPECT_EQ(w1.block(), 1);
  EXPECT_EQ(v0.offset(), 24);
  auto floats_at = [&](const proto::ShmBlock& blk) {
    const float* p = *region->Floats(blk.offset(), blk.count());
    return std::vector<float>(p, p + blk.count());
  };
  EXPECT_EQ(floats_at(w0), a);
  EXPECT_EQ(floats_at(w1), b);
  EXPECT_EQ(floats_at(v0), c);
  float decoded[2];
  DecodeBf16(*region->Halves(h0.offset(), 2), 2, decoded);
  EXPECT_EQ(decoded[0], half_in[0]);
  EXPECT_EQ(decoded[1], half_in[1]);
}

TEST(ShmDenseChannel, AStreamCallARegionCannotTakeIsRefusedBeforeAnythingIsWritten) {
  std::shared_ptr<SharedRegion> region = *SharedRegion::CreatePrivate(64);
  ShmDenseChannel channel({}, region, 7);
  PserverFrameStub stub = NowhereStub();
  proto::ReplicateResponse response;
  PushFrame one, two, half, big;
  const std::vector<float> v(4, 1.0f), large(64, 2.0f);
  one.AddDenseCopy("w", 0, v.data(), 4);
  two.AddDenseCopy("w", 0, v.data(), 4);
  half.AddDenseBf16("w", 0, v.data(), 4);
  big.AddDenseCopy("w", 0, large.data(), 64);

  ReplicateFrame batch;
  *batch.header().add_entries() = PushEntry(1, one);
  *batch.header().add_entries() = PushEntry(2, two);
  // A replica that takes one entry a call, and reads no bfloat16 from a region.
  Status s = channel.Replicate(stub, ShortCall().get(), batch, {&one, &two}, &response);
  EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
  EXPECT_THAT(s.message(), ::testing::HasSubstr("one entry a call"));
  ReplicateFrame rounded;
  *rounded.header().add_entries() = PushEntry(1, half);
  s = channel.Replicate(stub, ShortCall().get(), rounded, {&half}, &response);
  EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
  EXPECT_THAT(s.message(), ::testing::HasSubstr("float32"));
  ReplicateFrame large_call;
  *large_call.header().add_entries() = PushEntry(1, big);
  s = channel.Replicate(stub, ShortCall().get(), large_call, {&big}, &response);
  EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
  EXPECT_THAT(s.message(), ::testing::HasSubstr("do not fit"));
  // Nothing of them was named or written.
  EXPECT_EQ(batch.header().region(), 0u);
  EXPECT_EQ(large_call.header().entries(0).push().shm_dense_size(), 0);
  EXPECT_EQ((*region->Floats(0, 1))[0], 0.0f);
}

TEST(GrpcDenseChannel, AStreamCallCarriesOnePushEntrysBlocksInline) {
  GrpcDenseChannel channel(WireDtype::kFloat32, nullptr);
  PserverFrameStub stub = NowhereStub();
  proto::ReplicateResponse response;
  PushFrame one, two;
  const std::vector<float> v = {1, 2};
  one.AddDenseCopy("w", 0, v.data(), 2);
  two.AddDenseCopy("w", 1, v.data(), 2);
  ReplicateFrame call;
  *call.header().add_entries() = PushEntry(1, one);
  Status s = channel.Replicate(stub, ShortCall().get(), call, {&one}, &response);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  ASSERT_EQ(call.dense().size(), 1u);
  EXPECT_EQ(call.dense()[0].param, "w");
  EXPECT_EQ(Values(call.dense()[0].values), v);
  EXPECT_EQ(call.dense()[0].values.contiguous(), one.dense()[0].values.contiguous());  // referenced, not copied
  ReplicateFrame batch;
  *batch.header().add_entries() = PushEntry(1, one);
  *batch.header().add_entries() = PushEntry(2, two);
  s = channel.Replicate(stub, ShortCall().get(), batch, {&one, &two}, &response);
  EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
}

}  // namespace
}  // namespace pl
