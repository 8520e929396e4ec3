#include "trainer/example_data.h"

#include <sys/stat.h>

#include "paddle_like/data/dataset.h"

namespace pl {
namespace {

SampleLayout LayoutFor(TaskKind task) {
  return task == TaskKind::kClassification ? SampleLayout::Image() : SampleLayout::Clicks();
}

ExampleSet FromExamples(Examples e, TaskKind task, int64_t limit) {
  ExampleSet s{task == TaskKind::kClassification ? e.features : e.ids, e.labels};
  if (limit > 0 && limit < s.size()) {
    s.inputs = s.inputs.Slice(0, limit);
    s.labels = s.labels.Slice(0, limit);
  }
  return s;
}

}  // namespace

StatusOr<ExampleSet> LoadExampleSet(const std::string& path, TaskKind task, int64_t limit) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError("data path '" + path + "' does not exist");
  }
  if (limit <= 0) {
    PL_ASSIGN_OR_RETURN(Examples e, LoadRecordsFrom(path, LayoutFor(task)));
    return FromExamples(std::move(e), task, 0);
  }
  // Decode only the chunks that hold the first `limit` records: decoding the whole
  // file and slicing would keep every example allocated (the slice shares storage).
  PL_ASSIGN_OR_RETURN(std::vector<ChunkInfo> chunks, ListChunks(path));
  int64_t covered = 0;
  size_t used = 0;
  while (used < chunks.size() && covered < limit) covered += chunks[used++].num_records;
  chunks.resize(used);
  PL_ASSIGN_OR_RETURN(Examples e, LoadRecords(chunks, LayoutFor(task)));
  ExampleSet s = FromExamples(std::move(e), task, limit);
  if (s.size() < covered) {  // copy out the prefix so the rest of the last chunk is freed
    s.inputs = s.inputs.Clone();
    s.labels = s.labels.Clone();
  }
  return s;
}

StatusOr<ExampleSet> LoadExampleChunks(const std::vector<ChunkInfo>& chunks, TaskKind task) {
  PL_ASSIGN_OR_RETURN(Examples e, LoadRecords(chunks, LayoutFor(task)));
  return FromExamples(std::move(e), task, 0);
}

}  // namespace pl
