// Loads the train and test sets a built-in model needs from a data directory holding
// train.plrec and test.plrec (as written by pl-convert or pl-gen-clicks).
#ifndef PADDLE_LIKE_TRAINER_EXAMPLE_DATA_H_
#define PADDLE_LIKE_TRAINER_EXAMPLE_DATA_H_

#include <string>
#include <vector>

#include "paddle_like/data/chunk_index.h"
#include "trainer/batching.h"

namespace pl {

// Images (classification) or click logs, by the model's task.
StatusOr<ExampleSet> LoadExampleSet(const std::string& dir_or_file, TaskKind task, int64_t limit = 0);
StatusOr<ExampleSet> LoadExampleChunks(const std::vector<ChunkInfo>& chunks, TaskKind task);

}  // namespace pl

#endif  // PADDLE_LIKE_TRAINER_EXAMPLE_DATA_H_
