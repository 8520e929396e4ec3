#include "paddle_like/data/dataset.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "paddle_like/data/record_file.h"
#include "paddle_like/core/random.h"
#include "proto/data.pb.h"

namespace pl {
namespace {

// Fixes the layout's unknown dimensions from the first sample.
void CompleteLayout(const proto::Sample& s, SampleLayout* layout) {
  if (layout->kind == SampleLayout::Kind::kImage) {
    if (layout->channels == 0) layout->channels = s.channels() > 0 ? s.channels() : 1;
    if (layout->rows == 0) layout->rows = s.rows();
    if (layout->cols == 0) layout->cols = s.cols();
  } else {
    if (layout->num_fields == 0) layout->num_fields = s.sparse_ids_size();
    if (layout->num_dense == 0) layout->num_dense = s.dense_size();
  }
}

Examples Allocate(int64_t n, const SampleLayout& l) {
  Examples ex;
  ex.layout = l;
  if (l.kind == SampleLayout::Kind::kImage) {
    ex.features = Tensor({n, l.channels, l.rows, l.cols}, DType::kFloat32);
    ex.labels = Tensor({n}, DType::kInt64);
  } else {
    if (l.num_dense > 0) ex.features = Tensor({n, l.num_dense}, DType::kFloat32);
    ex.ids = Tensor({n, l.num_fields}, DType::kInt64);
    ex.labels = Tensor({n}, DType::kFloat32);
    ex.probabilities = Tensor({n}, DType::kFloat32);
  }
  return ex;
}

// Decodes sample `s` into row `i` of `ex`.
Status Store(const proto::Sample& s, int64_t i, Examples* ex) {
  const SampleLayout& l = ex->layout;
  if (l.kind == SampleLayout::Kind::kImage) {
    const int32_t c = s.channels() > 0 ? s.channels() : 1;
    const int64_t hw = int64_t{l.rows} * l.cols;
    if (c != l.channels || s.rows() != l.rows || s.cols() != l.cols ||
        static_cast<int64_t>(s.pixels().size()) != hw * c) {
      return absl::InvalidArgumentError(absl::StrCat(
          "image is ", c, "x", s.rows(), "x", s.cols(), " with ", s.pixels().size(),
          " pixel bytes; expected ", l.channels, "x", l.rows, "x", l.cols));
    }
    // Samples store (H, W, C); the tensor is (C, H, W).
    const uint8_t* px = reinterpret_cast<const uint8_t*>(s.pixels().data());
    float* out = ex->features.f32() + i * hw * c;
    for (int32_t ch = 0; ch < c; ++ch) {
      for (int64_t p = 0; p < hw; ++p) out[ch * hw + p] = px[p * c + ch] * (1.0f / 255.0f);
    }
    ex->labels.i64()[i] = s.label();
    return absl::OkStatus();
  }
  if (s.sparse_ids_size() != l.num_fields || s.dense_size() != l.num_dense) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sample has ", s.sparse_ids_size(), " sparse ids and ", s.dense_size(),
        " dense values; expected ", l.num_fields, " and ", l.num_dense));
  }
  std::memcpy(ex->ids.i64() + i * l.num_fields, s.sparse_ids().data(),
              l.num_fields * sizeof(int64_t));
  if (l.num_dense > 0) {
    std::memcpy(ex->features.f32() + i * l.num_dense, s.dense().data(), l.num_dense * sizeof(float));
  }
  ex->labels.f32()[i] = static_cast<float>(s.label());
  ex->probabilities.f32()[i] = s.probability();
  return absl::OkStatus();
}

// A batch buffer of `rows` x (trailing dims of `like`), reused when it already fits.
void EnsureBuffer(const Tensor& like, int64_t rows, Tensor* buf) {
  if (!like.defined()) {
    *buf = Tensor();
    return;
  }
  Shape shape = like.shape();
  shape[0] = rows;
  if (!buf->defined() || buf->shape() != shape || buf->dtype() != like.dtype()) {
    *buf = Tensor(shape, like.dtype());
  }
}

}  // namespace

StatusOr<Examples> LoadRecords(const std::vector<ChunkInfo>& chunks, const SampleLayout& layout) {
  int64_t total = 0;
  for (const ChunkInfo& c : chunks) total += c.num_records;
  SampleLayout l = layout;
  Examples ex;
  bool allocated = false;
  int64_t i = 0;
  RecordReader reader;
  std::string record;
  proto::Sample sample;
  for (const ChunkInfo& c : chunks) {
    PL_RETURN_IF_ERROR(reader.OpenChunk(c));
    for (int64_t j = 0;; ++j) {
      PL_ASSIGN_OR_RETURN(bool more, reader.Next(&record));
      if (!more) break;
      auto where = [&] {
        return absl::StrCat("'", c.path, "' chunk ", c.index, " record ", j);
      };
      if (i >= total) {
        return absl::DataLossError(absl::StrCat(where(), ": more records than the index lists"));
      }
      if (!sample.ParseFromString(record)) {
        return absl::DataLossError(absl::StrCat(where(), ": not a pl.proto.Sample"));
      }
      if (!allocated) {
        CompleteLayout(sample, &l);
        ex = Allocate(total, l);
        allocated = true;
      }
      PL_RETURN_IF_ERROR(Annotate(Store(sample, i, &ex), where()));
      ++i;
    }
  }
  if (!allocated) ex = Allocate(0, l);
  return ex;
}

StatusOr<Examples> LoadRecordsFrom(const std::string& dir_or_file, const SampleLayout& layout) {
  PL_ASSIGN_OR_RETURN(std::vector<ChunkInfo> chunks, ListChunks(dir_or_file));
  return LoadRecords(chunks, layout);
}

Status GatherRows(const Tensor& src, const std::vector<int64_t>& indices, const Tensor& dst) {
  if (src.rank() < 1 || dst.rank() != src.rank() || dst.dtype() != src.dtype() ||
      dst.dim(0) < static_cast<int64_t>(indices.size()) ||
      !std::equal(src.shape().begin() + 1, src.shape().end(), dst.shape().begin() + 1)) {
    return absl::InvalidArgumentError(absl::StrCat("GatherRows: cannot gather ", indices.size(),
                                                   " rows of ", src.ShapeString(), " into ",
                                                   dst.ShapeString()));
  }
  const int64_t n = src.dim(0);
  const size_t row_bytes = n > 0 ? src.bytes() / n : 0;
  const char* from = static_cast<const char*>(src.raw_data());
  char* to = static_cast<char*>(dst.raw_data());
  for (size_t k = 0; k < indices.size(); ++k) {
    if (indices[k] < 0 || indices[k] >= n) {
      return absl::OutOfRangeError(
          absl::StrCat("GatherRows: index ", indices[k], " outside [0, ", n, ")"));
    }
    std::memcpy(to + k * row_bytes, from + indices[k] * row_bytes, row_bytes);
  }
  return absl::OkStatus();
}

BatchIterator::BatchIterator(const Examples* data, int64_t batch_size, uint64_t seed, bool shuffle,
                             bool drop_last)
    : data_(data),
      batch_size_(batch_size < 1 ? 1 : batch_size),
      seed_(seed),
      shuffle_(shuffle),
      drop_last_(drop_last) {
  pass_ = -1;
  NewPass();
}

void BatchIterator::NewPass() {
  ++pass_;
  cursor_ = 0;
  const int64_t n = data_->size();
  order_.resize(n);
  for (int64_t i = 0; i < n; ++i) order_[i] = i;
  if (!shuffle_) return;
  // Fisher-Yates driven by a counter-based stream, so the order depends only on
  // (seed, pass) and not on the standard library.
  const uint64_t stream = MixSeed(seed_, static_cast<uint64_t>(pass_));
  for (int64_t i = n - 1; i > 0; --i) {
    const uint64_t r = MixSeed(stream, static_cast<uint64_t>(i));
    std::swap(order_[i], order_[r % static_cast<uint64_t>(i + 1)]);
  }
}

int64_t BatchIterator::batches_per_pass() const {
  const int64_t n = data_->size();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

bool BatchIterator::Next(Batch* batch) {
  const int64_t n = data_->size();
  const int64_t take = std::min(batch_size_, n - cursor_);
  if (take <= 0 || (drop_last_ && take < batch_size_)) return false;
  batch->indices.assign(order_.begin() + cursor_, order_.begin() + cursor_ + take);
  cursor_ += take;
  batch->size = take;
  Batch::Buffers& b = batch->buffers;
  EnsureBuffer(data_->features, batch_size_, &b.features);
  EnsureBuffer(data_->ids, batch_size_, &b.ids);
  EnsureBuffer(data_->labels, batch_size_, &b.labels);
  EnsureBuffer(data_->probabilities, batch_size_, &b.probabilities);
  auto fill = [&](const Tensor& src, const Tensor& buf, Tensor* view) {
    if (!src.defined()) {
      *view = Tensor();
      return;
    }
    // Shapes match by construction and indices come from order_, so this cannot fail.
    (void)GatherRows(src, batch->indices, buf);
    *view = take == batch_size_ ? buf : buf.Slice(0, take);
  };
  fill(data_->features, b.features, &batch->features);
  fill(data_->ids, b.ids, &batch->ids);
  fill(data_->labels, b.labels, &batch->labels);
  fill(data_->probabilities, b.probabilities, &batch->probabilities);
  return true;
}

}  // namespace pl
