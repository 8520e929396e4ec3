#include "paddle_like/data/idx_convert.h"

#include "absl/strings/str_cat.h"
#include "paddle_like/core/tensor.h"
#include "paddle_like/data/idx.h"
#include "paddle_like/data/record_file.h"
#include "proto/data.pb.h"

namespace pl {

StatusOr<IdxConvertStats> ConvertIdxToRecords(const std::string& images, const std::string& labels,
                                              const std::string& out_path,
                                              int64_t records_per_chunk) {
  PL_ASSIGN_OR_RETURN(IdxArray img, ReadIdx(images));
  PL_ASSIGN_OR_RETURN(IdxArray lab, ReadIdx(labels));
  if (img.dims.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat("'", images, "' has shape ",
                                                   ShapeToString(img.dims),
                                                   "; expected images (N, rows, cols)"));
  }
  if (lab.dims.size() != 1 || lab.dims[0] != img.dims[0]) {
    return absl::InvalidArgumentError(absl::StrCat("labels '", labels, "' have shape ",
                                                   ShapeToString(lab.dims), " but images '", images,
                                                   "' have ", ShapeToString(img.dims)));
  }
  const int64_t n = img.dims[0];
  const int64_t rows = img.dims[1], cols = img.dims[2];
  const size_t image_bytes = static_cast<size_t>(rows * cols);
  RecordWriter writer;
  PL_RETURN_IF_ERROR(writer.Open(out_path, records_per_chunk));
  proto::Sample sample;
  std::string record;
  for (int64_t i = 0; i < n; ++i) {
    sample.Clear();
    sample.set_label(lab.data[i]);
    sample.set_pixels(img.data.data() + i * image_bytes, image_bytes);
    sample.set_rows(static_cast<int32_t>(rows));
    sample.set_cols(static_cast<int32_t>(cols));
    sample.set_channels(1);
    sample.SerializeToString(&record);
    PL_RETURN_IF_ERROR(writer.Write(record));
  }
  PL_RETURN_IF_ERROR(writer.Close());
  IdxConvertStats stats;
  stats.num_records = n;
  stats.num_chunks = static_cast<int64_t>(writer.chunks().size());
  stats.rows = static_cast<int32_t>(rows);
  stats.cols = static_cast<int32_t>(cols);
  for (const ChunkInfo& c : writer.chunks()) stats.bytes += c.length;
  return stats;
}

}  // namespace pl
