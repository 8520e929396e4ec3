// DenseFrame is the codec of every dense push and pull: what it writes must be the
// protobuf encoding of the message, and what it reads must survive any slicing gRPC
// applies to the received bytes.
#include "paddle_like/dist/dense_frame.h"

#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "paddle_like/dist/wire.h"

namespace pl {
namespace {

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// `bytes` cut into slices of `piece` bytes, as a receiver might get them.
grpc::ByteBuffer Sliced(const std::string& bytes, size_t piece) {
  std::vector<grpc::Slice> slices;
  for (size_t i = 0; i < bytes.size(); i += piece) {
    slices.emplace_back(bytes.data() + i, std::min(piece, bytes.size() - i));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::vector<float> Ramp(int64_t n, float scale) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i) - 3.0f;
  return v;
}

TEST(DenseFrameTest, WritesTheProtobufEncodingOfTheMessage) {
  const std::vector<float> a = Ramp(1000, 0.5f), b = Ramp(3, -2.0f);
  auto owner = std::make_shared<std::vector<float>>(a);
  PushFrame frame;
  frame.header().set_trainer_id(7);
  frame.header().set_step(-1);  // negative varints too
  frame.header().set_num_samples(64);
  proto::SparseRowsMsg* rows = frame.header().add_sparse();
  rows->set_table("emb");
  rows->set_dim(2);
  rows->add_ids(5);
  rows->mutable_values()->assign(8, '\1');
  frame.AddDenseRef("fc.weight", 3, owner->data(), 1000, owner);
  frame.AddDenseCopy("fc.bias", -2, b.data(), 3);
  frame.AddDenseBuffer("empty", 0, 0);

  grpc::ByteBuffer buffer;
  ASSERT_TRUE(frame.ToByteBuffer(&buffer).ok());
  proto::PushRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(buffer)));
  EXPECT_EQ(parsed.trainer_id(), 7);
  EXPECT_EQ(parsed.step(), -1);
  EXPECT_EQ(parsed.num_samples(), 64);
  ASSERT_EQ(parsed.sparse_size(), 1);
  EXPECT_EQ(parsed.sparse(0).ids(0), 5);
  ASSERT_EQ(parsed.dense_size(), 3);
  EXPECT_EQ(parsed.dense(0).param(), "fc.weight");
  EXPECT_EQ(parsed.dense(0).block(), 3);
  ASSERT_EQ(parsed.dense(0).values().size(), 4000u);
  EXPECT_EQ(std::memcmp(parsed.dense(0).values().data(), a.data(), 4000), 0);
  EXPECT_EQ(parsed.dense(1).block(), -2);
  EXPECT_EQ(std::memcmp(parsed.dense(1).values().data(), b.data(), 12), 0);
  EXPECT_EQ(parsed.dense(2).values().size(), 0u);
}

TEST(DenseFrameTest, ReadsAProtobufMessageWhateverItsSlicing) {
  proto::PullResponse message;
  message.set_version(42);
  const std::vector<float> a = Ramp(777, 0.25f), b = Ramp(5, 3.0f);
  proto::DenseBlock* d = message.add_dense();
  d->set_param("w");
  d->set_block(1);
  d->set_values(std::string(reinterpret_cast<const char*>(a.data()), a.size() * 4));
  proto::SparseRowsMsg* rows = message.add_sparse();
  rows->set_table("emb");
  rows->add_ids(9);
  d = message.add_dense();
  d->set_param("b");
  d->set_values(std::string(reinterpret_cast<const char*>(b.data()), b.size() * 4));
  const std::string bytes = message.SerializeAsString();

  for (size_t piece : {size_t{1}, size_t{3}, size_t{7}, size_t{4096}, bytes.size()}) {
    SCOPED_TRACE("slices of " + std::to_string(piece) + " bytes");
    grpc::ByteBuffer buffer = Sliced(bytes, piece);
    PullFrame frame;
    ASSERT_TRUE(frame.FromByteBuffer(&buffer).ok());
    EXPECT_EQ(frame.header().version(), 42);
    EXPECT_EQ(frame.header().dense_size(), 0);
    ASSERT_EQ(frame.header().sparse_size(), 1);
    EXPECT_EQ(frame.header().sparse(0).ids(0), 9);
    ASSERT_EQ(frame.dense().size(), 2u);
    EXPECT_EQ(frame.dense()[0].param, "w");
    EXPECT_EQ(frame.dense()[0].block, 1);
    std::vector<float> got(777);
    ASSERT_EQ(frame.dense()[0].values.size(), 777);
    frame.dense()[0].values.CopyTo(got.data());
    EXPECT_EQ(got, a);
    EXPECT_EQ(frame.dense()[1].param, "b");
    EXPECT_EQ(frame.dense()[1].block, 0);
    EXPECT_EQ(frame.dense()[1].values.At(4), b[4]);
    // And back: the same message.
    EXPECT_EQ(frame.ToProto().SerializeAsString(), bytes);
  }
}

TEST(DenseFrameTest, ATruncatedMessageIsRefusedClearly) {
  proto::PushRequest message;
  proto::DenseBlock* d = message.add_dense();
  d->set_param("w");
  d->set_values(std::string(400, '\0'));
  const std::string bytes = message.SerializeAsString();
  for (size_t cut : {size_t{1}, size_t{5}, bytes.size() - 1}) {
    grpc::ByteBuffer buffer = Sliced(bytes.substr(0, cut), 16);
    PushFrame frame;
    grpc::Status s = frame.FromByteBuffer(&buffer);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << cut;
    EXPECT_NE(s.error_message().find("malformed parameter-server message"), std::string::npos) << s.error_message();
  }
}

TEST(DenseFrameTest, ScatteredPayloadsAreScannedAndChunkedExactly) {
  const int64_t n = 3 * FloatPieces::kChunk + 17;
  std::vector<float> v = Ramp(n, 1e-3f);
  const int64_t nan_at = FloatPieces::kChunk + 5;
  v[nan_at] = std::numeric_limits<float>::quiet_NaN();
  const std::string bytes(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  // Pieces of 4099 bytes: misaligned, and floats straddle every boundary.
  FloatPieces pieces;
  for (size_t i = 0; i < bytes.size(); i += 4099) pieces.Append(bytes.data() + i, std::min<size_t>(4099, bytes.size() - i));
  EXPECT_EQ(pieces.contiguous(), nullptr);
  EXPECT_EQ(pieces.size(), n);
  EXPECT_EQ(pieces.FirstNonFinite(), nan_at);
  int64_t covered = 0;
  pieces.ForEachChunk([&](int64_t offset, const float* data, int64_t len) {
    EXPECT_EQ(offset, covered);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % alignof(float), 0u);
    for (int64_t i = 0; i < len; ++i) {
      if (offset + i == nan_at) {
        EXPECT_TRUE(std::isnan(data[i]));
      } else {
        ASSERT_EQ(data[i], v[offset + i]) << offset + i;
      }
    }
    covered += len;
  });
  EXPECT_EQ(covered, n);
  // A NaN whose bytes straddle two pieces: float 1024 has 3 bytes in piece 0.
  v[nan_at] = 1.0f;
  v[1024] = -std::numeric_limits<float>::infinity();
  const std::string straddling(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  FloatPieces cut;
  for (size_t i = 0; i < straddling.size(); i += 4099) {
    cut.Append(straddling.data() + i, std::min<size_t>(4099, straddling.size() - i));
  }
  EXPECT_EQ(cut.FirstNonFinite(), 1024);
  v[1024] = 1.0f;
  FloatPieces whole;
  whole.Append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  EXPECT_EQ(whole.contiguous(), v.data());
  EXPECT_EQ(whole.FirstNonFinite(), -1);
}

TEST(DenseFrameTest, SumOfSquaresIsTheNormSquaredAndNotFiniteExactlyWhenAValueIsNot) {
  // Lengths around the lane count, with a tail; against a plain double loop.
  for (int64_t n : std::vector<int64_t>{0, 1, 15, 16, 17, 1000, 3 * FloatPieces::kChunk + 5}) {
    std::vector<float> v = Ramp(n, 1e-3f);
    for (int64_t i = 0; i < n; i += 7) v[i] = -v[i];
    double want = 0;
    for (float x : v) want += static_cast<double>(x) * x;
    EXPECT_NEAR(SumOfSquares(v.data(), n), want, 1e-12 * std::max(1.0, want)) << n;
  }
  // The largest finite floats: squares near 2^256, and their sum stays finite.
  std::vector<float> big(1 << 16, std::numeric_limits<float>::max());
  EXPECT_TRUE(std::isfinite(SumOfSquares(big.data(), static_cast<int64_t>(big.size()))));
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::vector<float> v = Ramp(100, 1.0f);
    v[37] = bad;
    EXPECT_FALSE(std::isfinite(SumOfSquares(v.data(), 100))) << bad;
  }
}

TEST(DenseFrameTest, ASentPayloadKeepsItsOwnerAliveUntilGrpcLetsGo) {
  auto owner = std::make_shared<std::vector<float>>(Ramp(64, 1.0f));
  std::weak_ptr<std::vector<float>> watch = owner;
  grpc::ByteBuffer buffer;
  {
    PushFrame frame;
    frame.AddDenseRef("w", 0, owner->data(), 64, owner);
    owner.reset();
    ASSERT_TRUE(frame.ToByteBuffer(&buffer).ok());
  }
  EXPECT_FALSE(watch.expired());  // the buffer still refers to the floats
  proto::PushRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(buffer)));
  EXPECT_EQ(parsed.dense(0).values().size(), 256u);
  buffer.Clear();
  EXPECT_TRUE(watch.expired());
}

}  // namespace
}  // namespace pl

namespace pl {
namespace {

// Issue 40: a push whose floats lie in a trainer's shared region is copied out before
// the pserver checks it, so that a value the trainer flips to NaN afterwards reaches
// neither the update nor the backups: the frame holds what was checked.
TEST(DenseFrameTest, SharedPayloadsBecomePrivateCopiesThatLaterWritesDoNotReach) {
  std::vector<float> region(300000, 0.25f), other(8, 1.0f), shadow(300000);
  PushFrame frame;
  frame.AddDenseRef("w", 0, region.data(), static_cast<int64_t>(region.size()), nullptr);
  frame.MarkLastShared(shadow.data());
  frame.AddDenseRef("b", 0, other.data(), static_cast<int64_t>(other.size()), nullptr);  // not shared
  frame.CopySharedPayloads();
  region[1234] = std::nanf("");
  other[3] = 7.0f;
  EXPECT_EQ(frame.dense()[0].copy_to, nullptr);
  EXPECT_EQ(frame.dense()[0].values.contiguous(), shadow.data());
  EXPECT_EQ(frame.dense()[0].values.At(1234), 0.25f);
  EXPECT_EQ(frame.dense()[0].values.FirstNonFinite(), -1);
  EXPECT_EQ(frame.dense()[1].values.At(3), 7.0f) << "a payload not marked shared stays in place";
}

}  // namespace
}  // namespace pl
