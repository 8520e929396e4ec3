#include "master/master_journal.h"

#include "absl/strings/str_cat.h"

namespace pl {

StatusOr<std::unique_ptr<MasterJournal>> MasterJournal::Open(StateStore* store, std::string log_path,
                                                             int64_t snapshot_bytes, Logger log) {
  std::shared_ptr<RecordLog> file;
  if (!log_path.empty()) file = OpenFileRecordLog(std::move(log_path));
  return Open(store, std::move(file), snapshot_bytes, std::move(log));
}

StatusOr<std::unique_ptr<MasterJournal>> MasterJournal::Open(StateStore* store, std::shared_ptr<RecordLog> log,
                                                             int64_t snapshot_bytes, Logger log_line) {
  if (store == nullptr) return absl::InvalidArgumentError("master: no state store");
  if (snapshot_bytes <= 0) return absl::InvalidArgumentError("master: snapshot_bytes must be > 0");
  return std::unique_ptr<MasterJournal>(new MasterJournal(store, std::move(log), snapshot_bytes, std::move(log_line)));
}

StatusOr<MasterJournal::Stored> MasterJournal::Load() {
  Stored out;
  StatusOr<std::string> bytes = store_->Get(kMasterStateKey);
  if (bytes.ok()) {
    proto::MasterState state;
    if (!state.ParseFromString(*bytes)) {
      return absl::DataLossError(absl::StrCat("master state '", kMasterStateKey, "' is not a MasterState message"));
    }
    if (state.format_version() != kMasterStateFormatVersion) {
      return absl::DataLossError(absl::StrCat("master state '", kMasterStateKey, "' has format version ",
                                              state.format_version(), ", this master reads ",
                                              kMasterStateFormatVersion));
    }
    last_seq_ = state.last_seq();
    stored_bytes_ = std::move(bytes).value();
    out.snapshot = std::move(state);
  } else if (!absl::IsNotFound(bytes.status())) {
    return Annotate(bytes.status(), "master: cannot read its state");
  }
  if (log_ == nullptr) return out;
  PL_ASSIGN_OR_RETURN(LogContents contents, log_->Load());
  const std::string where = log_->name();
  out.torn_bytes = contents.torn_bytes;
  if (out.torn_bytes > 0) {
    logger_(absl::StrCat("master event log ", where, ": its last ", out.torn_bytes,
                         " bytes are a record cut short (a crash while writing it): dropped; that call was never "
                         "answered"));
  }
  for (size_t i = 0; i < contents.records.size(); ++i) {
    proto::MasterEvent e;
    if (!e.ParseFromString(contents.records[i])) {
      return absl::DataLossError(absl::StrCat("master event log ", where, ": record ", i + 1,
                                              " passes its checksum but is not a MasterEvent"));
    }
    if (e.seq() <= last_seq_) continue;  // the snapshot has it (a crash before the log was emptied)
    if (!out.snapshot) {
      return absl::DataLossError(absl::StrCat("master event log ", where, " holds events but the store has no '",
                                              kMasterStateKey, "' snapshot to replay them onto"));
    }
    if (e.seq() != last_seq_ + 1) {
      return absl::DataLossError(absl::StrCat("master event log ", where, ": event ", e.seq(), " follows ",
                                              last_seq_, " (events are missing)"));
    }
    last_seq_ = e.seq();
    out.events.push_back(std::move(e));
  }
  return out;
}

StatusOr<int64_t> MasterJournal::Record(proto::MasterEvent& event, const std::function<proto::MasterState()>& state) {
  if (log_ == nullptr) {
    std::string bytes;
    if (!state().SerializeToString(&bytes)) return absl::InternalError("master: cannot serialise its state");
    if (bytes == stored_bytes_) return -1;
    PL_RETURN_IF_ERROR(store_->Put(kMasterStateKey, bytes));
    stored_bytes_ = std::move(bytes);
    return -1;
  }
  event.set_seq(last_seq_ + 1);
  PL_ASSIGN_OR_RETURN(int64_t end, log_->Append(event.SerializeAsString()));
  last_seq_ = event.seq();
  return end;
}

Status MasterJournal::Sync(int64_t ticket) { return ticket < 0 || log_ == nullptr ? absl::OkStatus() : log_->Sync(ticket); }

Status MasterJournal::WriteSnapshot(proto::MasterState state) {
  state.set_format_version(kMasterStateFormatVersion);
  state.set_last_seq(last_seq_);
  std::string bytes;
  if (!state.SerializeToString(&bytes)) return absl::InternalError("master: cannot serialise its state");
  PL_RETURN_IF_ERROR(store_->Put(kMasterStateKey, bytes));
  stored_bytes_ = std::move(bytes);
  // A crash before this leaves events the snapshot has: Load skips them by seq.
  if (log_ != nullptr) PL_RETURN_IF_ERROR(log_->Reset());
  return absl::OkStatus();
}

}  // namespace pl
