#include "paddle_like/store/state_store.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace pl {

Status ValidateKey(absl::string_view key) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("state store key '", key, "': ", why));
  };
  if (key.empty()) return bad("empty");
  if (key.size() > 200) return bad("longer than 200 bytes");
  for (char c : key) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.' || c == '/';
    if (!ok) return bad("only [A-Za-z0-9_.-] and '/' are allowed");
  }
  for (absl::string_view seg : absl::StrSplit(key, '/')) {
    if (seg.empty()) return bad("empty path segment (leading, trailing or double '/')");
    if (seg[0] == '.') return bad("a path segment starts with '.' (no '..', no hidden names)");
  }
  if (absl::EndsWith(key, ".prev")) return bad("'.prev' names a key's previous copy");
  if (absl::StrContains(key, ".tmp.")) return bad("'.tmp.' names a temporary file");
  return absl::OkStatus();
}

}  // namespace pl
