#include "paddle_like/store/record_log.h"

#include "paddle_like/store/append_log.h"

namespace pl {
namespace {

class FileRecordLog final : public RecordLog {
 public:
  explicit FileRecordLog(std::string path) : path_(std::move(path)) {}

  StatusOr<LogContents> Load() override {
    LogContents contents;
    StatusOr<LogContents> read = AppendLog::Read(path_);
    if (read.ok()) {
      contents = std::move(read).value();
    } else if (!absl::IsNotFound(read.status())) {
      return read.status();
    }
    // Loaded again to undo a call: the open file stays (calls may wait on it in Sync),
    // and a failed append has already cut its record off.
    if (log_ == nullptr) {
      PL_ASSIGN_OR_RETURN(log_, AppendLog::Open(path_, contents.valid_bytes));
    }
    return contents;
  }
  StatusOr<int64_t> Append(absl::string_view payload) override { return log_->Append(payload); }
  Status Sync(int64_t ticket) override { return log_->Sync(ticket); }
  Status Reset() override { return log_->Reset(); }
  int64_t size() const override { return log_ == nullptr ? 0 : log_->size(); }
  std::string name() const override { return path_; }

 private:
  const std::string path_;
  std::unique_ptr<AppendLog> log_;  // opened by the first Load
};

}  // namespace

std::unique_ptr<RecordLog> OpenFileRecordLog(std::string path) {
  return std::make_unique<FileRecordLog>(std::move(path));
}

}  // namespace pl
