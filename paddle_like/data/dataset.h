// In-memory datasets decoded from record files of pl::proto::Sample, and a batch
// iterator that gathers shuffled batches into preallocated tensors.
//
// Legend: N = samples, C/H/W = image channels/rows/cols, F = sparse fields,
// D = dense features, B = batch size.
//
//   PL_ASSIGN_OR_RETURN(Examples train, LoadRecordsFrom("data/train.plrec", SampleLayout::Image()));
//   BatchIterator it(&train, /*batch_size=*/64, /*seed=*/1);
//   Batch b;
//   while (it.Next(&b)) { ... b.features (B, C, H, W), b.labels (B) ... }
//
// Thread-safety: Examples is a read-only value once loaded and may be shared; a
// BatchIterator and its Batch belong to one thread.
#ifndef PADDLE_LIKE_DATA_DATASET_H_
#define PADDLE_LIKE_DATA_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "paddle_like/core/status.h"
#include "paddle_like/core/tensor.h"
#include "paddle_like/data/chunk_index.h"

namespace pl {

// What the samples hold. Dimensions left at 0 are taken from the first sample; every
// sample must then agree, and an error names the record that does not.
struct SampleLayout {
  enum class Kind : uint8_t { kImage = 0, kClicks = 1 };
  Kind kind = Kind::kImage;
  int32_t channels = 0, rows = 0, cols = 0;  // kImage
  int32_t num_fields = 0;                    // kClicks: sparse ids per sample (F)
  int32_t num_dense = 0;                     // kClicks: dense floats per sample (D, may be 0)

  static SampleLayout Image() { return {Kind::kImage}; }
  static SampleLayout Clicks(int32_t num_fields = 0) {
    SampleLayout l;
    l.kind = Kind::kClicks;
    l.num_fields = num_fields;
    return l;
  }
};

struct Examples {
  // kImage: float (N, C, H, W), pixels / 255 in [0, 1]. kClicks: float (N, D) when
  // the samples carry dense features, else undefined.
  Tensor features;
  Tensor ids;            // kClicks: int64 (N, F); undefined for images
  Tensor labels;         // kImage: int64 (N) class indices; kClicks: float (N) 0 or 1
  Tensor probabilities;  // kClicks: float (N), the generator's P(click); else undefined
  SampleLayout layout;   // with every dimension filled in

  int64_t size() const { return labels.defined() ? labels.dim(0) : 0; }
};

// Decodes every record of `chunks`, in order. Errors name the file, chunk and record.
StatusOr<Examples> LoadRecords(const std::vector<ChunkInfo>& chunks, const SampleLayout& layout);
// Every chunk of a record file or of all "*.plrec" files in a directory (ListChunks).
StatusOr<Examples> LoadRecordsFrom(const std::string& dir_or_file, const SampleLayout& layout);

// One batch: views of preallocated buffers (B rows; the last batch of a pass may be
// shorter). Reusing a Batch across Next() calls reuses its buffers.
struct Batch {
  Tensor features, ids, labels, probabilities;  // as in Examples, first dim B
  std::vector<int64_t> indices;                 // which samples, in batch order
  int64_t size = 0;
  // The full (B, ...) buffers the views above point into, kept for reuse.
  struct Buffers {
    Tensor features, ids, labels, probabilities;
  } buffers;
};

// Walks a dataset in batches; each pass visits every sample once, in an order drawn
// from (seed, pass) when shuffling (so a run is reproducible), else in file order.
class BatchIterator {
 public:
  // `data` must outlive the iterator. `batch_size` >= 1.
  BatchIterator(const Examples* data, int64_t batch_size, uint64_t seed, bool shuffle = true,
                bool drop_last = false);

  // Fills `batch` with the next batch; false at the end of a pass (then call NewPass).
  bool Next(Batch* batch);
  // Starts the next pass with a fresh order.
  void NewPass();
  int64_t pass() const { return pass_; }
  int64_t batches_per_pass() const;

 private:
  const Examples* data_;
  int64_t batch_size_;
  uint64_t seed_;
  bool shuffle_, drop_last_;
  int64_t pass_ = 0;
  int64_t cursor_ = 0;
  std::vector<int64_t> order_;
};

// Copies rows `indices` of `src` (N, ...) into the first indices.size() rows of `dst`
// (B, ...), B >= indices.size(), same dtype and trailing dims. Indices are checked.
Status GatherRows(const Tensor& src, const std::vector<int64_t>& indices, const Tensor& dst);

}  // namespace pl

#endif  // PADDLE_LIKE_DATA_DATASET_H_
