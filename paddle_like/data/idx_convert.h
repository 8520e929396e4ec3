// Imports an IDX image/label pair (MNIST, Fashion-MNIST) into a record file of
// pl::proto::Sample {pixels (rows x cols, uint8), rows, cols, channels = 1, label},
// written with its chunk index.
//
// Thread-safety: thread-safe for distinct output paths.
#ifndef PADDLE_LIKE_DATA_IDX_CONVERT_H_
#define PADDLE_LIKE_DATA_IDX_CONVERT_H_

#include <cstdint>
#include <string>

#include "paddle_like/core/status.h"

namespace pl {

struct IdxConvertStats {
  int64_t num_records = 0;
  int64_t num_chunks = 0;
  int32_t rows = 0, cols = 0;
  int64_t bytes = 0;  // size of the record file
};

// `images`: IDX (N, rows, cols); `labels`: IDX (N). INVALID_ARGUMENT when their
// shapes disagree; errors from reading name the input file.
StatusOr<IdxConvertStats> ConvertIdxToRecords(const std::string& images, const std::string& labels,
                                              const std::string& out_path,
                                              int64_t records_per_chunk = 1000);

}  // namespace pl

#endif  // PADDLE_LIKE_DATA_IDX_CONVERT_H_
