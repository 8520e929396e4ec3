#include "paddle_like/dist/dense_frame.h"

#include <grpc/slice.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "paddle_like/core/parallel_for.h"
#include "paddle_like/dist/bf16.h"
#include "paddle_like/dist/wire.h"

namespace pl {

// ------------------------------------------------------------------ FloatPieces

void FloatPieces::Append(const char* data, size_t n) {
  if (n == 0) return;
  pieces_.emplace_back(data, n);
  num_bytes_ += static_cast<int64_t>(n);
}

const float* FloatPieces::contiguous() const {
  if (pieces_.empty()) return nullptr;
  if (pieces_.size() != 1 || reinterpret_cast<uintptr_t>(pieces_[0].first) % alignof(float) != 0) return nullptr;
  return reinterpret_cast<const float*>(pieces_[0].first);
}

void FloatPieces::CopyBytes(int64_t begin, int64_t n, char* dst) const {
  int64_t skip = begin;
  for (const auto& [data, size] : pieces_) {
    if (n == 0) return;
    const int64_t len = static_cast<int64_t>(size);
    if (skip >= len) {
      skip -= len;
      continue;
    }
    const int64_t take = std::min(len - skip, n);
    std::memcpy(dst, data + skip, take);
    dst += take;
    n -= take;
    skip = 0;
  }
}

void FloatPieces::CopyTo(float* dst) const { CopyBytes(0, size() * 4, reinterpret_cast<char*>(dst)); }

float FloatPieces::At(int64_t i) const {
  float v;
  CopyBytes(i * 4, 4, reinterpret_cast<char*>(&v));
  return v;
}

int64_t FloatPieces::FirstNonFinite() const {
  // In place, piece by piece: only a float that straddles two pieces is stitched.
  char partial[4];
  int64_t partial_bytes = 0;
  int64_t index = 0;  // of the next float to test
  for (const auto& [data, size] : pieces_) {
    int64_t off = 0;
    const int64_t len = static_cast<int64_t>(size);
    if (partial_bytes > 0) {
      const int64_t take = std::min<int64_t>(4 - partial_bytes, len);
      std::memcpy(partial + partial_bytes, data, take);
      partial_bytes += take;
      off = take;
      if (partial_bytes < 4) continue;
      if (pl::FirstNonFiniteBytes(partial, 1) == 0) return index;
      ++index;
      partial_bytes = 0;
    }
    const int64_t whole = (len - off) / 4;
    const int64_t bad = pl::FirstNonFiniteBytes(data + off, whole);
    if (bad >= 0) return index + bad;
    index += whole;
    off += whole * 4;
    partial_bytes = len - off;
    std::memcpy(partial, data + off, partial_bytes);
  }
  return -1;
}

// ------------------------------------------------------------------ wire helpers

namespace {

constexpr int kWireVarint = 0;
constexpr int kWire64 = 1;
constexpr int kWireLen = 2;
constexpr int kWire32 = 5;

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Reads the received slices in order.
class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>& slices) : slices_(slices) { SkipEmpty(); }
  bool done() const { return i_ == slices_.size(); }
  int64_t position() const { return position_; }

  bool ReadByte(uint8_t* b) {
    if (done()) return false;
    *b = slices_[i_].begin()[off_];
    Advance(1);
    return true;
  }
  bool ReadVarint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!ReadByte(&b)) return false;
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }
  // Calls fn(data, len) for each piece of the next n bytes; false if fewer remain.
  template <typename Fn>
  bool Take(uint64_t n, Fn&& fn) {
    while (n > 0) {
      if (done()) return false;
      const size_t avail = slices_[i_].size() - off_;
      const size_t take = static_cast<size_t>(std::min<uint64_t>(avail, n));
      fn(reinterpret_cast<const char*>(slices_[i_].begin()) + off_, take);
      Advance(take);
      n -= take;
    }
    return true;
  }
  bool Append(uint64_t n, std::string* out) {
    return Take(n, [out](const char* p, size_t len) { out->append(p, len); });
  }

 private:
  void Advance(size_t n) {
    off_ += n;
    position_ += static_cast<int64_t>(n);
    if (off_ == slices_[i_].size()) {
      ++i_;
      off_ = 0;
      SkipEmpty();
    }
  }
  void SkipEmpty() {
    while (i_ < slices_.size() && slices_[i_].size() == 0) ++i_;
  }
  const std::vector<grpc::Slice>& slices_;
  size_t i_ = 0, off_ = 0;
  int64_t position_ = 0;
};

grpc::Status Malformed(const std::string& what) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed parameter-server message: " + what);
}

// Copies the rest of a field whose tag was just read into `out`.
bool CopyField(SliceCursor& in, uint64_t tag, std::string* out) {
  PutVarint(tag, out);
  switch (tag & 7) {
    case kWireVarint: {
      uint64_t v;
      if (!in.ReadVarint(&v)) return false;
      PutVarint(v, out);
      return true;
    }
    case kWire64:
      return in.Append(8, out);
    case kWire32:
      return in.Append(4, out);
    case kWireLen: {
      uint64_t len;
      if (!in.ReadVarint(&len)) return false;
      PutVarint(len, out);
      return in.Append(len, out);
    }
    default:
      return false;  // groups are not used by this protocol
  }
}

// Parses one DenseBlock of `len` bytes; bfloat16 values are decoded into a buffer
// added to `decoded`.
grpc::Status ReadDenseBlock(SliceCursor& in, uint64_t len, DenseFramePayload* out,
                            std::vector<std::unique_ptr<float[]>>* decoded) {
  const int64_t end = in.position() + static_cast<int64_t>(len);
  while (in.position() < end) {
    uint64_t tag;
    if (!in.ReadVarint(&tag)) return Malformed("truncated dense block");
    const uint64_t field = tag >> 3;
    const int wire = static_cast<int>(tag & 7);
    if (field == proto::DenseBlock::kParamFieldNumber && wire == kWireLen) {
      uint64_t n;
      out->param.clear();
      if (!in.ReadVarint(&n) || !in.Append(n, &out->param)) return Malformed("truncated parameter name");
    } else if (field == proto::DenseBlock::kBlockFieldNumber && wire == kWireVarint) {
      uint64_t v;
      if (!in.ReadVarint(&v)) return Malformed("truncated block index");
      out->block = static_cast<int32_t>(v);
    } else if (field == proto::DenseBlock::kValuesFieldNumber && wire == kWireLen) {
      uint64_t n;
      if (!in.ReadVarint(&n)) return Malformed("truncated values");
      if (!in.Take(n, [out](const char* p, size_t k) { out->values.Append(p, k); })) {
        return Malformed(absl::StrCat("values of '", out->param, "' block ", out->block, " are truncated"));
      }
    } else if (field == proto::DenseBlock::kBf16ValuesFieldNumber && wire == kWireLen) {
      uint64_t n;
      std::string half;
      if (!in.ReadVarint(&n) || n % 2 != 0 || !in.Append(n, &half)) {
        return Malformed(absl::StrCat("bfloat16 values of '", out->param, "' block ", out->block,
                                      " are truncated or odd-sized"));
      }
      const int64_t count = static_cast<int64_t>(n / 2);
      decoded->emplace_back(new float[std::max<int64_t>(count, 1)]);
      DecodeBf16(half.data(), count, decoded->back().get());
      out->values.Append(reinterpret_cast<const char*>(decoded->back().get()), static_cast<size_t>(count) * 4);
      out->exact_bf16 = true;
    } else {
      std::string ignored;  // an unknown field (a newer peer): skip it
      if (!CopyField(in, tag, &ignored)) return Malformed("truncated field in a dense block");
    }
  }
  if (in.position() != end) return Malformed("a dense block overruns its length");
  return grpc::Status::OK;
}

template <typename Header>
constexpr uint32_t DenseField() {
  return Header::kDenseFieldNumber;
}

}  // namespace

// ------------------------------------------------------------------ DenseFrame

template <typename Header>
void DenseFrame<Header>::Clear() {
  header_.Clear();
  dense_.clear();
  slices_.clear();
  payload_slice_.clear();
  decoded_.clear();
}

template <typename Header>
void DenseFrame<Header>::AddDenseRef(std::string param, int32_t block, const float* values, int64_t n,
                                     std::shared_ptr<const void> owner) {
  auto* keep = new std::shared_ptr<const void>(std::move(owner));
  slices_.emplace_back(const_cast<float*>(values), static_cast<size_t>(n) * 4,
                       [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); }, keep);
  payload_slice_.push_back(slices_.size() - 1);
  DenseFramePayload& d = dense_.emplace_back();
  d.param = std::move(param);
  d.block = block;
  d.values.Append(reinterpret_cast<const char*>(values), static_cast<size_t>(n) * 4);
}

template <typename Header>
float* DenseFrame<Header>::AddDenseBuffer(std::string param, int32_t block, int64_t n) {
  // Never an inlined slice: the payload's address must not move with the vector.
  slices_.emplace_back(grpc_slice_malloc_large(static_cast<size_t>(std::max<int64_t>(n, 1)) * 4),
                       grpc::Slice::STEAL_REF);
  payload_slice_.push_back(slices_.size() - 1);
  char* data = reinterpret_cast<char*>(const_cast<uint8_t*>(slices_.back().begin()));
  DenseFramePayload& d = dense_.emplace_back();
  d.param = std::move(param);
  d.block = block;
  d.values.Append(data, static_cast<size_t>(n) * 4);
  return reinterpret_cast<float*>(data);
}

template <typename Header>
void DenseFrame<Header>::CopySharedPayloads() {
  std::vector<size_t> shared;
  int64_t floats = 0;
  for (size_t i = 0; i < dense_.size(); ++i) {
    if (dense_[i].copy_to == nullptr) continue;
    shared.push_back(i);
    floats += dense_[i].values.size();
  }
  if (shared.empty()) return;
  // A plain copy: one thread per 2 MB (waking a helper costs more than copying less).
  ParallelFor(static_cast<int64_t>(shared.size()), ThreadsForDense(floats / 4),
              [&](int64_t k) { dense_[shared[k]].values.CopyTo(dense_[shared[k]].copy_to); });
  for (size_t i : shared) {
    DenseFramePayload& d = dense_[i];
    FloatPieces own;
    own.Append(reinterpret_cast<const char*>(d.copy_to), static_cast<size_t>(d.values.size()) * 4);
    d.values = std::move(own);
    d.copy_to = nullptr;
  }
}

template <typename Header>
void DenseFrame<Header>::OwnPayloads() {
  std::vector<grpc::Slice> own;
  own.reserve(dense_.size());
  for (DenseFramePayload& d : dense_) {
    const size_t bytes = static_cast<size_t>(d.values.num_bytes());
    own.emplace_back(grpc_slice_malloc_large(std::max<size_t>(bytes, 4)), grpc::Slice::STEAL_REF);
    char* data = reinterpret_cast<char*>(const_cast<uint8_t*>(own.back().begin()));
    d.values.CopyAllBytes(data);
    FloatPieces pieces;
    pieces.Append(data, bytes);
    d.values = std::move(pieces);
    d.copy_to = nullptr;
  }
  slices_ = std::move(own);
  payload_slice_.resize(dense_.size());
  for (size_t i = 0; i < payload_slice_.size(); ++i) payload_slice_[i] = i;
  decoded_.clear();
}

template <typename Header>
void DenseFrame<Header>::AddDenseCopy(std::string param, int32_t block, const float* values, int64_t n) {
  float* dst = AddDenseBuffer(std::move(param), block, n);
  if (n > 0) std::memcpy(dst, values, static_cast<size_t>(n) * 4);
}

template <typename Header>
void DenseFrame<Header>::AddDenseBf16(std::string param, int32_t block, const float* values, int64_t n,
                                      float* residual) {
  slices_.emplace_back(grpc_slice_malloc_large(static_cast<size_t>(std::max<int64_t>(n, 1)) * 2),
                       grpc::Slice::STEAL_REF);
  payload_slice_.push_back(slices_.size() - 1);
  char* data = reinterpret_cast<char*>(const_cast<uint8_t*>(slices_.back().begin()));
  EncodeBf16(values, n, reinterpret_cast<uint16_t*>(data), residual);
  DenseFramePayload& d = dense_.emplace_back();
  d.param = std::move(param);
  d.block = block;
  d.values.Append(data, static_cast<size_t>(n) * 2);
  d.bf16 = true;
}

template <typename Header>
grpc::Status DenseFrame<Header>::ToByteBuffer(grpc::ByteBuffer* out) const {
  if (header_.dense_size() != 0) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "DenseFrame: dense blocks belong in the frame, not the header");
  }
  if (payload_slice_.size() != dense_.size()) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "DenseFrame: a received frame cannot be sent again");
  }
  std::vector<grpc::Slice> slices;
  slices.reserve(1 + 2 * dense_.size());
  slices.emplace_back(header_.SerializeAsString());
  std::string prefix;
  for (size_t i = 0; i < dense_.size(); ++i) {
    const DenseFramePayload& d = dense_[i];
    const uint64_t nbytes = static_cast<uint64_t>(d.values.num_bytes());
    const uint64_t block = static_cast<uint64_t>(static_cast<int64_t>(d.block));  // int32: sign-extended
    const uint64_t inner = 1 + VarintSize(d.param.size()) + d.param.size() + 1 + VarintSize(block) + 1 +
                           VarintSize(nbytes) + nbytes;
    prefix.clear();
    PutVarint((DenseField<Header>() << 3) | kWireLen, &prefix);
    PutVarint(inner, &prefix);
    PutVarint((proto::DenseBlock::kParamFieldNumber << 3) | kWireLen, &prefix);
    PutVarint(d.param.size(), &prefix);
    prefix += d.param;
    PutVarint((proto::DenseBlock::kBlockFieldNumber << 3) | kWireVarint, &prefix);
    PutVarint(block, &prefix);
    const uint32_t values_field =
        d.bf16 ? proto::DenseBlock::kBf16ValuesFieldNumber : proto::DenseBlock::kValuesFieldNumber;
    PutVarint((values_field << 3) | kWireLen, &prefix);
    PutVarint(nbytes, &prefix);
    slices.emplace_back(prefix);
    const grpc::Slice& payload = slices_[payload_slice_[i]];
    slices.push_back(nbytes == payload.size() ? payload : payload.sub(0, nbytes));
  }
  *out = grpc::ByteBuffer(slices.data(), slices.size());
  return grpc::Status::OK;
}

template <typename Header>
grpc::Status DenseFrame<Header>::FromByteBuffer(grpc::ByteBuffer* in) {
  Clear();
  if (grpc::Status s = in->Dump(&slices_); !s.ok()) return s;
  SliceCursor cursor(slices_);
  std::string rest;  // every field but the dense blocks, for protobuf to parse
  while (!cursor.done()) {
    uint64_t tag;
    if (!cursor.ReadVarint(&tag)) return Malformed("truncated field tag");
    if ((tag >> 3) == DenseField<Header>() && (tag & 7) == kWireLen) {
      uint64_t len;
      if (!cursor.ReadVarint(&len)) return Malformed("truncated dense block length");
      if (grpc::Status s = ReadDenseBlock(cursor, len, &dense_.emplace_back(), &decoded_); !s.ok()) return s;
    } else if (!CopyField(cursor, tag, &rest)) {
      return Malformed(absl::StrCat("truncated or invalid field ", tag >> 3));
    }
  }
  if (!header_.ParseFromString(rest)) return Malformed("the message's other fields do not parse");
  return grpc::Status::OK;
}

template <typename Header>
Header DenseFrame<Header>::ToProto() const {
  Header m = header_;
  for (const DenseFramePayload& d : dense_) {
    proto::DenseBlock* b = m.add_dense();
    b->set_param(d.param);
    b->set_block(d.block);
    if (d.bf16) {
      std::string* h = b->mutable_bf16_values();
      h->resize(static_cast<size_t>(d.values.num_bytes()));
      d.values.CopyAllBytes(h->data());
      continue;
    }
    std::string* v = b->mutable_values();
    v->resize(static_cast<size_t>(d.values.num_bytes()));
    d.values.CopyTo(reinterpret_cast<float*>(v->data()));
    if (d.values.num_bytes() % 4 != 0) v->resize(static_cast<size_t>(d.values.size()) * 4);
  }
  return m;
}

template <typename Header>
DenseFrame<Header> DenseFrame<Header>::FromProtoRef(const Header& message) {
  DenseFrame frame;
  frame.header_ = message;
  frame.header_.clear_dense();
  for (const proto::DenseBlock& b : message.dense()) {
    DenseFramePayload& d = frame.dense_.emplace_back();
    d.param = b.param();
    d.block = b.block();
    if (!b.bf16_values().empty()) {
      const int64_t count = static_cast<int64_t>(b.bf16_values().size() / 2);
      frame.decoded_.emplace_back(new float[std::max<int64_t>(count, 1)]);
      DecodeBf16(b.bf16_values().data(), count, frame.decoded_.back().get());
      d.values.Append(reinterpret_cast<const char*>(frame.decoded_.back().get()), static_cast<size_t>(count) * 4);
      d.exact_bf16 = true;
      continue;
    }
    d.values.Append(b.values().data(), b.values().size());
  }
  return frame;
}

template class DenseFrame<proto::PushRequest>;
template class DenseFrame<proto::PullResponse>;
template class DenseFrame<proto::ReplicateRequest>;

// ------------------------------------------------------------------ client stub

std::string PserverMethodName(const char* method) {
  return absl::StrCat("/", proto::ParameterServer::service_full_name(), "/", method);
}

namespace {
// One blocking unary call on its own completion queue (as gRPC's generated stubs do).
template <typename Request, typename Response>
grpc::Status BlockingCall(grpc::TemplatedGenericStub<Request, Response>& stub, const std::string& method,
                          grpc::ClientContext* context, const Request& request, Response* response) {
  grpc::CompletionQueue cq;
  grpc::Status status;
  {
    std::unique_ptr<grpc::ClientAsyncResponseReader<Response>> call =
        stub.PrepareUnaryCall(context, method, request, &cq);
    call->StartCall();
    call->Finish(response, &status, &status);
    void* tag = nullptr;
    bool ok = false;
    if (!cq.Next(&tag, &ok) || tag != &status || !ok) {
      status = grpc::Status(grpc::StatusCode::INTERNAL, "parameter-server call: completion queue failed");
    }
  }
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

const std::string& PushMethod() {
  static const std::string* name = new std::string(PserverMethodName("Push"));
  return *name;
}
const std::string& PullMethod() {
  static const std::string* name = new std::string(PserverMethodName("Pull"));
  return *name;
}
const std::string& ReplicateMethod() {
  static const std::string* name = new std::string(PserverMethodName("Replicate"));
  return *name;
}
}  // namespace

PserverFrameStub::PserverFrameStub(std::shared_ptr<grpc::Channel> channel)
    : push_(channel), pull_(channel), replicate_(channel) {}

grpc::Status PserverFrameStub::Push(grpc::ClientContext* context, const PushFrame& request,
                                    proto::PushResponse* response) {
  return BlockingCall(push_, PushMethod(), context, request, response);
}

grpc::Status PserverFrameStub::Pull(grpc::ClientContext* context, const proto::PullRequest& request,
                                    PullFrame* response) {
  return BlockingCall(pull_, PullMethod(), context, request, response);
}

grpc::Status PserverFrameStub::Replicate(grpc::ClientContext* context, const ReplicateFrame& request,
                                         proto::ReplicateResponse* response) {
  return BlockingCall(replicate_, ReplicateMethod(), context, request, response);
}

}  // namespace pl
