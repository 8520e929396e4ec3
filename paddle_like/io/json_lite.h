// A small, strict JSON reader and string escaper, sized for file headers (the
// safetensors header). Strict means RFC 8259 and nothing more: no comments, no
// trailing commas, no duplicate object keys, valid UTF-8 only, nesting bounded, and
// nothing but whitespace after the value. Objects keep their keys in file order.
// Integers that fit int64 are kept exactly; other numbers as double.
//
// Thread-safety: a JsonValue is a plain value; parsing is thread-safe.
#ifndef PADDLE_LIKE_IO_JSON_LITE_H_
#define PADDLE_LIKE_IO_JSON_LITE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "paddle_like/core/status.h"

namespace pl {

struct JsonValue {
  enum class Type : uint8_t { kNull, kBool, kInt, kDouble, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0.0;  // set for kInt too
  std::string string;
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;

  bool is_object() const { return type == Type::kObject; }
  bool is_array() const { return type == Type::kArray; }
  bool is_string() const { return type == Type::kString; }
  bool is_int() const { return type == Type::kInt; }
  // The member named `key` of an object, or nullptr.
  const JsonValue* Find(absl::string_view key) const;
};

// Parses `text` as one JSON value. INVALID_ARGUMENT with the byte offset on error.
StatusOr<JsonValue> ParseJson(absl::string_view text);

// `s` as a quoted JSON string (escapes quote, backslash and control characters;
// other UTF-8 passes through).
std::string JsonQuote(absl::string_view s);

}  // namespace pl

#endif  // PADDLE_LIKE_IO_JSON_LITE_H_
