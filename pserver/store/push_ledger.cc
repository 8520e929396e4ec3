#include "pserver/store/push_ledger.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace pl::pserver {

bool PushLedger::Applied(uint64_t client_id, int64_t push_id) const {
  if (client_id == 0 || push_id <= 0) return false;
  auto it = last_.find(client_id);
  return it != last_.end() && push_id <= it->second;
}

void PushLedger::Record(uint64_t client_id, int64_t push_id) {
  if (client_id == 0 || push_id <= 0) return;
  int64_t& last = last_[client_id];
  if (push_id > last) last = push_id;
}

std::string PushLedger::Serialize() const {
  std::string out(SerializedBytes(), '\0');
  const uint64_t n = last_.size();
  std::memcpy(out.data(), &n, 8);
  size_t at = 8;
  for (const auto& [client, id] : last_) {
    std::memcpy(out.data() + at, &client, 8);
    std::memcpy(out.data() + at + 8, &id, 8);
    at += 16;
  }
  return out;
}

StatusOr<PushLedger> PushLedger::Parse(std::string_view bytes) {
  uint64_t n = 0;
  if (bytes.size() < 8) return absl::DataLossError("push ledger: shorter than its count");
  std::memcpy(&n, bytes.data(), 8);
  if (n > (bytes.size() - 8) / 16 || bytes.size() != 8 + n * 16) {
    return absl::DataLossError(absl::StrCat("push ledger: ", bytes.size(), " bytes for ", n, " clients"));
  }
  PushLedger ledger;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t client = 0;
    int64_t id = 0;
    std::memcpy(&client, bytes.data() + 8 + i * 16, 8);
    std::memcpy(&id, bytes.data() + 16 + i * 16, 8);
    ledger.last_[client] = id;
  }
  return ledger;
}

}  // namespace pl::pserver
