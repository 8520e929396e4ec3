// DenseFrame: a PushRequest or PullResponse whose dense float payloads travel as
// their own gRPC slices instead of through protobuf's bytes fields.
//
// Why: protobuf copies a bytes field when it serialises (into the message buffer) and
// when it parses (into a std::string), and the caller copies again to and from its
// tensors. For a model of tens of MB per step those copies cost more than the kernel's
// own. Here a sender hands gRPC slices that point at the tensor (or at a buffer the
// pserver filled once), and a receiver reads the payload where gRPC received it.
//
// The bytes on the wire are exactly the protobuf encoding of the message
// (proto/pserver.proto): every field but `dense` is serialised by protobuf, each
// DenseBlock is written by hand as field `dense` (param, block, values). So a peer
// using the generated stubs reads and writes the same messages.
//
// Thread-safety: a frame is used by one thread at a time; const methods may be called
// concurrently. Received payloads stay valid while the frame lives.
#ifndef PADDLE_LIKE_DIST_DENSE_FRAME_H_
#define PADDLE_LIKE_DIST_DENSE_FRAME_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/container/inlined_vector.h"
#include "proto/pserver.grpc.pb.h"

namespace pl {

// A float32 payload spread over byte pieces (the slices it arrived in); pieces need
// not be 4-byte aligned and a float may straddle two of them.
class FloatPieces {
 public:
  void Append(const char* data, size_t n);
  int64_t num_bytes() const { return num_bytes_; }
  int64_t size() const { return num_bytes_ / 4; }
  // The floats in place when they are one 4-byte aligned piece, else nullptr.
  const float* contiguous() const;
  // Copies the first size() floats to dst.
  void CopyTo(float* dst) const;
  // Copies all num_bytes() bytes to dst, whatever they hold.
  void CopyAllBytes(char* dst) const { CopyBytes(0, num_bytes_, dst); }
  // Calls fn(offset, data, n) over consecutive runs of at most kChunk floats covering
  // [0, size()); data is aligned: in place when a run lies aligned inside one piece,
  // else gathered into a small buffer that stays in cache.
  static constexpr int64_t kChunk = 4096;
  template <typename Fn>
  void ForEachChunk(Fn&& fn) const;
  // fn(data, n) over the byte pieces in order (a sender that moves them itself).
  template <typename Fn>
  void ForEachPiece(Fn&& fn) const {
    for (const auto& [data, n] : pieces_) fn(data, n);
  }
  // Index of the first NaN/Inf, or -1.
  int64_t FirstNonFinite() const;
  float At(int64_t i) const;

 private:
  // Copies bytes [begin, begin + n) to dst.
  void CopyBytes(int64_t begin, int64_t n, char* dst) const;
  absl::InlinedVector<std::pair<const char*, size_t>, 2> pieces_;
  int64_t num_bytes_ = 0;
};

struct DenseFramePayload {
  std::string param;
  int32_t block = 0;
  // Received payloads always hold float32 here (bfloat16 ones are decoded on receipt).
  // A payload to send with bf16 set holds bfloat16 bytes instead: values.num_bytes()
  // is 2 bytes per value and only the wire reads it.
  FloatPieces values;
  bool bf16 = false;
  // Received as bfloat16 and decoded: every value is exactly a bfloat16's, so rounding
  // them to bfloat16 again gives back the bytes that came (a primary forwards such a
  // push to its backups in half the bytes, and they decode the same floats).
  bool exact_bf16 = false;
  // Set when the values lie in memory their sender can still write (a trainer's shared
  // region): a pserver copies them here (CopySharedPayloads; private memory of n
  // floats that outlives the frame) before it checks them, so that what it applies and
  // forwards is what it checked.
  float* copy_to = nullptr;
};

template <typename Header>
class DenseFrame {
 public:
  DenseFrame() = default;
  // Moves keep received payloads valid; a copy would not (small slices hold their
  // bytes inline), so there is none.
  DenseFrame(DenseFrame&&) = default;
  DenseFrame& operator=(DenseFrame&&) = default;
  DenseFrame(const DenseFrame&) = delete;
  DenseFrame& operator=(const DenseFrame&) = delete;

  // Header holds every field but `dense` (which stays empty there).
  Header& header() { return header_; }
  const Header& header() const { return header_; }
  const std::vector<DenseFramePayload>& dense() const { return dense_; }

  // Sends `n` floats at `values` without copying them; `owner` keeps that memory alive
  // until gRPC lets go of it. The caller must not change the floats until the call
  // that sends this frame has finished.
  void AddDenseRef(std::string param, int32_t block, const float* values, int64_t n,
                   std::shared_ptr<const void> owner);
  // A fresh payload of `n` floats for the caller to fill (e.g. under a block lock).
  float* AddDenseBuffer(std::string param, int32_t block, int64_t n);
  // Copies `n` floats into a fresh payload.
  void AddDenseCopy(std::string param, int32_t block, const float* values, int64_t n);
  // Rounds `n` floats to bfloat16 into a fresh payload (bf16.h), with error feedback
  // through `residual` (n floats) when given.
  void AddDenseBf16(std::string param, int32_t block, const float* values, int64_t n, float* residual = nullptr);
  // The last payload holds values decoded from bfloat16 (DenseFramePayload::exact_bf16).
  void MarkLastExactBf16() { dense_.back().exact_bf16 = true; }
  void MarkLastShared(float* copy_to) { dense_.back().copy_to = copy_to; }
  // Every payload marked shared is copied to its copy_to and read from there (on
  // several threads for a large push), and loses the mark.
  void CopySharedPayloads();
  // Every payload copied into memory of the frame's own, and every other hold let go (a
  // region, a received call's buffers): for a frame kept after the call that brought it
  // (a virtual trainer's micro-batch, summed at its step's end). Shared payloads are
  // read once, as CopySharedPayloads reads them.
  void OwnPayloads();
  // Sends `other`'s payloads too: without copying them when `other` was built to be sent
  // (their memory then lives while either frame does), copied from a received one.
  template <typename Other>
  void AddPayloadsOf(const DenseFrame<Other>& other);
  // A frame of `header` with `other`'s payloads, received or to send, moved (other keeps
  // its header and no payloads).
  template <typename Other>
  static DenseFrame WithPayloadsOf(Header header, DenseFrame<Other>&& other);
  void Clear();

  // gRPC's codec (grpc::SerializationTraits below).
  grpc::Status ToByteBuffer(grpc::ByteBuffer* out) const;
  grpc::Status FromByteBuffer(grpc::ByteBuffer* in);

  // The whole message as the generated protobuf type (copies; for tests and tools).
  Header ToProto() const;
  static DenseFrame FromProtoRef(const Header& message);  // payloads point into `message`

 private:
  Header header_;
  std::vector<DenseFramePayload> dense_;
  std::vector<grpc::Slice> slices_;  // owned payload slices (sent) or received slices
  std::vector<size_t> payload_slice_;  // for a sent payload: its index in slices_
  std::vector<std::unique_ptr<float[]>> decoded_;  // received bfloat16 payloads, as floats

  template <typename>
  friend class DenseFrame;
};

using PushFrame = DenseFrame<proto::PushRequest>;  // dense = field 3
using PullFrame = DenseFrame<proto::PullResponse>;  // dense = field 1
using ReplicateFrame = DenseFrame<proto::ReplicateRequest>;  // dense = field 3

// Client calls of the ParameterServer service that send or receive frames (blocking,
// through gRPC's generic stub and the SerializationTraits below); the other methods
// go through the generated stub.
class PserverFrameStub {
 public:
  explicit PserverFrameStub(std::shared_ptr<grpc::Channel> channel);
  grpc::Status Push(grpc::ClientContext* context, const PushFrame& request, proto::PushResponse* response);
  grpc::Status Pull(grpc::ClientContext* context, const proto::PullRequest& request, PullFrame* response);
  // The replication stream (another process of the shard, never a trainer).
  grpc::Status Replicate(grpc::ClientContext* context, const ReplicateFrame& request,
                         proto::ReplicateResponse* response);

 private:
  grpc::TemplatedGenericStub<PushFrame, proto::PushResponse> push_;
  grpc::TemplatedGenericStub<proto::PullRequest, PullFrame> pull_;
  grpc::TemplatedGenericStub<ReplicateFrame, proto::ReplicateResponse> replicate_;
};

// "/pl.proto.ParameterServer/<method>".
std::string PserverMethodName(const char* method);

extern template class DenseFrame<proto::PushRequest>;
extern template class DenseFrame<proto::PullResponse>;
extern template class DenseFrame<proto::ReplicateRequest>;

template <typename Header>
template <typename Other>
void DenseFrame<Header>::AddPayloadsOf(const DenseFrame<Other>& other) {
  const bool sendable = other.payload_slice_.size() == other.dense_.size();
  for (size_t i = 0; i < other.dense_.size(); ++i) {
    const DenseFramePayload& d = other.dense_[i];
    if (!sendable) {  // received: its payloads may span several slices, so copied
      float* values = AddDenseBuffer(d.param, d.block, d.values.size());
      d.values.CopyTo(values);
      continue;
    }
    slices_.push_back(other.slices_[other.payload_slice_[i]]);  // a reference, not a copy
    payload_slice_.push_back(slices_.size() - 1);
    dense_.push_back(d);
  }
}

template <typename Header>
template <typename Other>
DenseFrame<Header> DenseFrame<Header>::WithPayloadsOf(Header header, DenseFrame<Other>&& other) {
  DenseFrame frame;
  frame.header_ = std::move(header);
  // Moving the vectors keeps their elements where they are, so the payloads' pointers
  // (into the slices, inlined ones included, and the decoded floats) stay valid.
  frame.dense_ = std::move(other.dense_);
  frame.slices_ = std::move(other.slices_);
  frame.payload_slice_ = std::move(other.payload_slice_);
  frame.decoded_ = std::move(other.decoded_);
  other.dense_.clear();  // its header stays
  other.slices_.clear();
  other.payload_slice_.clear();
  other.decoded_.clear();
  return frame;
}

template <typename Fn>
void FloatPieces::ForEachChunk(Fn&& fn) const {
  if (const float* p = contiguous()) {
    for (int64_t begin = 0; begin < size(); begin += kChunk) fn(begin, p + begin, std::min(kChunk, size() - begin));
    return;
  }
  alignas(64) float buf[kChunk];
  for (int64_t begin = 0; begin < size(); begin += kChunk) {
    const int64_t len = std::min(kChunk, size() - begin);
    CopyBytes(begin * 4, len * 4, reinterpret_cast<char*>(buf));
    fn(begin, static_cast<const float*>(buf), len);
  }
}

}  // namespace pl

namespace grpc {
template <typename Header>
class SerializationTraits<pl::DenseFrame<Header>, void> {
 public:
  static Status Serialize(const pl::DenseFrame<Header>& frame, ByteBuffer* buffer, bool* own_buffer) {
    *own_buffer = true;
    return frame.ToByteBuffer(buffer);
  }
  static Status Deserialize(ByteBuffer* buffer, pl::DenseFrame<Header>* frame) {
    Status s = frame->FromByteBuffer(buffer);
    buffer->Clear();
    return s;
  }
};
}  // namespace grpc

#endif  // PADDLE_LIKE_DIST_DENSE_FRAME_H_
