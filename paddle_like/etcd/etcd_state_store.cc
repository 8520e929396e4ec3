#include "paddle_like/etcd/etcd_state_store.h"

#include <chrono>
#include <cstring>
#include <mutex>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "paddle_like/io/crc32c.h"

namespace pl::etcd {
namespace {

// An entry: tag, CRC-32C of the value (4 bytes, little-endian), then the value ('V') or
// "<generation> <pieces>" ('P').
constexpr char kInline = 'V';
constexpr char kPieces = 'P';

std::string Entry(char tag, uint32_t crc, absl::string_view body) {
  std::string out(1, tag);
  char c[4];
  std::memcpy(c, &crc, 4);
  out.append(c, 4);
  out.append(body.data(), body.size());
  return out;
}

etcdserverpb::RequestOp PutOp(const std::string& key, absl::string_view value) {
  etcdserverpb::RequestOp op;
  op.mutable_request_put()->set_key(key);
  op.mutable_request_put()->set_value(std::string(value));
  return op;
}

etcdserverpb::RequestOp DeletePrefixOp(const std::string& prefix) {
  etcdserverpb::RequestOp op;
  op.mutable_request_delete_range()->set_key(prefix);
  op.mutable_request_delete_range()->set_range_end(EtcdClient::PrefixEnd(prefix));
  return op;
}

uint64_t NewGeneration() {
  static std::mt19937_64 rng(std::random_device{}() ^
                             static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  return rng();
}

}  // namespace

StatusOr<etcdserverpb::TxnResponse> EtcdStateStore::Fenced(etcdserverpb::TxnRequest txn, const char* what) {
  fence_.GuardTxn(&txn);
  PL_ASSIGN_OR_RETURN(etcdserverpb::TxnResponse response, client_->Txn(txn));
  if (!response.succeeded()) {
    return absl::FailedPreconditionError(absl::StrCat("etcd ", what, ": refused, this process no longer leads ('",
                                                      fence_.key, "' is not the one it created at revision ",
                                                      fence_.create_revision, ")"));
  }
  return response;
}

Status EtcdStateStore::Put(const std::string& key, absl::string_view value) {
  PL_RETURN_IF_ERROR(ValidateKey(key));
  const uint32_t crc = Crc32c(value.data(), value.size());
  // The pieces the entry names now, deleted once the new entry no longer needs them.
  std::string old_pieces;
  etcdserverpb::RangeRequest current;
  current.set_key(EntryKey(key));
  PL_ASSIGN_OR_RETURN(etcdserverpb::RangeResponse now, client_->Range(current));
  if (now.kvs_size() == 1 && !now.kvs(0).value().empty() && now.kvs(0).value()[0] == kPieces) {
    std::vector<std::string> parts = absl::StrSplit(now.kvs(0).value().substr(5), ' ');
    if (!parts.empty()) old_pieces = absl::StrCat(PiecesPrefix(key), parts[0], "/");
  }
  etcdserverpb::TxnRequest txn;
  if (value.size() <= kPieceBytes) {
    *txn.add_success() = PutOp(EntryKey(key), Entry(kInline, crc, value));
  } else {
    const std::string generation = absl::StrFormat("%016x", NewGeneration());
    const std::string prefix = absl::StrCat(PiecesPrefix(key), generation, "/");
    size_t n = 0;
    for (size_t at = 0; at < value.size(); at += kPieceBytes, ++n) {
      etcdserverpb::TxnRequest piece;
      *piece.add_success() = PutOp(absl::StrFormat("%s%08d", prefix, n), value.substr(at, kPieceBytes));
      PL_RETURN_IF_ERROR(Fenced(std::move(piece), "Put (a piece)").status());
    }
    *txn.add_success() = PutOp(EntryKey(key), Entry(kPieces, crc, absl::StrCat(generation, " ", n, " ", value.size())));
  }
  PL_RETURN_IF_ERROR(Fenced(std::move(txn), "Put").status());
  if (!old_pieces.empty()) {
    etcdserverpb::TxnRequest cleanup;
    *cleanup.add_success() = DeletePrefixOp(old_pieces);
    // Pieces no entry names are only space: a failure here loses nothing.
    (void)Fenced(std::move(cleanup), "Put (deleting the old pieces)");
  }
  return absl::OkStatus();
}

StatusOr<std::string> EtcdStateStore::Get(const std::string& key) {
  PL_RETURN_IF_ERROR(ValidateKey(key));
  etcdserverpb::RangeRequest request;
  request.set_key(EntryKey(key));
  PL_ASSIGN_OR_RETURN(etcdserverpb::RangeResponse response, client_->Range(request));
  if (response.kvs_size() == 0) return absl::NotFoundError(absl::StrCat("no '", key, "' in etcd under ", root_));
  const std::string& entry = response.kvs(0).value();
  if (entry.size() < 5 || (entry[0] != kInline && entry[0] != kPieces)) {
    return absl::DataLossError(absl::StrCat("etcd key '", EntryKey(key), "' is not a stored value (", entry.size(),
                                            " bytes, tag ", entry.empty() ? 0 : static_cast<int>(entry[0]), ")"));
  }
  uint32_t crc = 0;
  std::memcpy(&crc, entry.data() + 1, 4);
  std::string value;
  if (entry[0] == kInline) {
    value = entry.substr(5);
  } else {
    std::vector<std::string> parts = absl::StrSplit(entry.substr(5), ' ');
    int64_t count = 0, bytes = 0;
    if (parts.size() != 3 || !absl::SimpleAtoi(parts[1], &count) || !absl::SimpleAtoi(parts[2], &bytes)) {
      return absl::DataLossError(absl::StrCat("etcd key '", EntryKey(key), "' names its pieces unreadably"));
    }
    const std::string prefix = absl::StrCat(PiecesPrefix(key), parts[0], "/");
    value.reserve(bytes);
    for (int64_t i = 0; i < count;) {
      etcdserverpb::RangeRequest pieces;
      pieces.set_key(absl::StrFormat("%s%08d", prefix, i));
      pieces.set_range_end(EtcdClient::PrefixEnd(prefix));
      pieces.set_limit(64);
      PL_ASSIGN_OR_RETURN(etcdserverpb::RangeResponse got, client_->Range(pieces));
      if (got.kvs_size() == 0) break;
      for (const etcdserverpb::KeyValue& kv : got.kvs()) {
        if (kv.key() != absl::StrFormat("%s%08d", prefix, i)) {
          return absl::DataLossError(absl::StrCat("etcd value '", EntryKey(key), "': piece ", i, " of ", count,
                                                  " is missing"));
        }
        value.append(kv.value());
        ++i;
      }
    }
    if (static_cast<int64_t>(value.size()) != bytes) {
      return absl::DataLossError(absl::StrCat("etcd value '", EntryKey(key), "': its pieces hold ", value.size(),
                                              " bytes, its entry says ", bytes));
    }
  }
  if (Crc32c(value.data(), value.size()) != crc) {
    return absl::DataLossError(absl::StrCat("etcd value '", EntryKey(key), "' fails its CRC-32C"));
  }
  return value;
}

Status EtcdStateStore::Delete(const std::string& key) {
  PL_RETURN_IF_ERROR(ValidateKey(key));
  etcdserverpb::TxnRequest txn;
  etcdserverpb::RequestOp* entry = txn.add_success();
  entry->mutable_request_delete_range()->set_key(EntryKey(key));
  *txn.add_success() = DeletePrefixOp(PiecesPrefix(key));
  return Fenced(std::move(txn), "Delete").status();
}

StatusOr<std::vector<std::string>> EtcdStateStore::List(const std::string& prefix) {
  const std::string from = root_ + "/kv/";
  etcdserverpb::RangeRequest request;
  request.set_key(from + prefix);
  request.set_range_end(EtcdClient::PrefixEnd(from + prefix));
  request.set_keys_only(true);
  PL_ASSIGN_OR_RETURN(etcdserverpb::RangeResponse response, client_->Range(request));
  std::vector<std::string> keys;
  for (const etcdserverpb::KeyValue& kv : response.kvs()) keys.push_back(kv.key().substr(from.size()));
  return keys;  // etcd answers in key order
}

}  // namespace pl::etcd
