#include "paddle_like/io/json_lite.h"

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pl {
namespace {

constexpr int kMaxDepth = 64;

bool IsWhitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Returns the length of the valid UTF-8 sequence starting at s[i], or 0.
size_t Utf8SequenceLength(absl::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  uint8_t c = byte(i);
  if (c < 0x80) return 1;
  size_t len;
  uint32_t cp;
  if ((c & 0xe0) == 0xc0) {
    len = 2;
    cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    len = 3;
    cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
  static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

class Parser {
 public:
  explicit Parser(absl::string_view text) : s_(text) {}

  StatusOr<JsonValue> ParseDocument() {
    JsonValue v;
    PL_RETURN_IF_ERROR(ParseValue(0, &v));
    SkipWhitespace();
    if (pos_ != s_.size()) return Error("unexpected characters after the JSON value");
    return v;
  }

 private:
  Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("JSON: ", what, " at byte ", pos_));
  }

  void SkipWhitespace() {
    while (pos_ < s_.size() && IsWhitespace(s_[pos_])) ++pos_;
  }

  bool Consume(absl::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Status ParseValue(int depth, JsonValue* out) {
    if (depth > kMaxDepth) return Error("nesting too deep");
    SkipWhitespace();
    if (pos_ >= s_.size()) return Error("unexpected end of input");
    char c = s_[pos_];
    if (c == '{') return ParseObject(depth, out);
    if (c == '[') return ParseArray(depth, out);
    if (c == '"') {
      out->type = JsonValue::Type::kString;
      return ParseString(&out->string);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber(out);
    if (Consume("true")) {
      out->type = JsonValue::Type::kBool;
      out->boolean = true;
      return absl::OkStatus();
    }
    if (Consume("false")) {
      out->type = JsonValue::Type::kBool;
      return absl::OkStatus();
    }
    if (Consume("null")) {
      out->type = JsonValue::Type::kNull;
      return absl::OkStatus();
    }
    return Error(absl::StrFormat("unexpected character '%c'", c));
  }

  Status ParseObject(int depth, JsonValue* out) {
    out->type = JsonValue::Type::kObject;
    ++pos_;  // '{'
    SkipWhitespace();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return absl::OkStatus();
    }
    std::unordered_set<std::string> keys;
    while (true) {
      SkipWhitespace();
      if (pos_ >= s_.size() || s_[pos_] != '"') return Error("expected a string key");
      std::string key;
      PL_RETURN_IF_ERROR(ParseString(&key));
      if (!keys.insert(key).second) return Error(absl::StrCat("duplicate key \"", key, "\""));
      SkipWhitespace();
      if (pos_ >= s_.size() || s_[pos_] != ':') return Error("expected ':'");
      ++pos_;
      JsonValue value;
      PL_RETURN_IF_ERROR(ParseValue(depth + 1, &value));
      out->object.emplace_back(std::move(key), std::move(value));
      SkipWhitespace();
      if (pos_ >= s_.size()) return Error("unexpected end of input in an object");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == '}') {
        ++pos_;
        return absl::OkStatus();
      }
      return Error("expected ',' or '}'");
    }
  }

  Status ParseArray(int depth, JsonValue* out) {
    out->type = JsonValue::Type::kArray;
    ++pos_;  // '['
    SkipWhitespace();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return absl::OkStatus();
    }
    while (true) {
      JsonValue value;
      PL_RETURN_IF_ERROR(ParseValue(depth + 1, &value));
      out->array.push_back(std::move(value));
      SkipWhitespace();
      if (pos_ >= s_.size()) return Error("unexpected end of input in an array");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == ']') {
        ++pos_;
        return absl::OkStatus();
      }
      return Error("expected ',' or ']'");
    }
  }

  StatusOr<uint32_t> ParseHex4() {
    if (pos_ + 4 > s_.size()) return Error("truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else return Error("bad hex digit in \\u escape");
    }
    return v;
  }

  Status ParseString(std::string* out) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= s_.size()) return Error("unterminated string");
      char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return absl::OkStatus();
      }
      if (static_cast<uint8_t>(c) < 0x20) return Error("control character in a string");
      if (c != '\\') {
        size_t len = Utf8SequenceLength(s_, pos_);
        if (len == 0) return Error("invalid UTF-8 in a string");
        out->append(s_.data() + pos_, len);
        pos_ += len;
        continue;
      }
      ++pos_;
      if (pos_ >= s_.size()) return Error("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          PL_ASSIGN_OR_RETURN(uint32_t cp, ParseHex4());
          if (cp >= 0xdc00 && cp <= 0xdfff) return Error("unpaired low surrogate");
          if (cp >= 0xd800 && cp <= 0xdbff) {
            if (!Consume("\\u")) return Error("unpaired high surrogate");
            PL_ASSIGN_OR_RETURN(uint32_t lo, ParseHex4());
            if (lo < 0xdc00 || lo > 0xdfff) return Error("bad low surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          return Error(absl::StrFormat("bad escape '\\%c'", e));
      }
    }
  }

  Status ParseNumber(JsonValue* out) {
    size_t start = pos_;
    bool integral = true;
    if (s_[pos_] == '-') ++pos_;
    if (pos_ >= s_.size()) return Error("truncated number");
    if (s_[pos_] == '0') {
      ++pos_;
    } else if (s_[pos_] >= '1' && s_[pos_] <= '9') {
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    } else {
      return Error("bad number");
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      integral = false;
      ++pos_;
      size_t digits = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      if (pos_ == digits) return Error("bad fraction");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      size_t digits = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      if (pos_ == digits) return Error("bad exponent");
    }
    std::string text(s_.substr(start, pos_ - start));
    if (integral) {
      errno = 0;
      long long v = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == 0) {
        out->type = JsonValue::Type::kInt;
        out->integer = v;
        out->number = static_cast<double>(v);
        return absl::OkStatus();
      }
    }
    out->type = JsonValue::Type::kDouble;
    out->number = std::strtod(text.c_str(), nullptr);
    return absl::OkStatus();
  }

  absl::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

const JsonValue* JsonValue::Find(absl::string_view key) const {
  for (const auto& [k, v] : object) {
    if (k == key) return &v;
  }
  return nullptr;
}

StatusOr<JsonValue> ParseJson(absl::string_view text) { return Parser(text).ParseDocument(); }

std::string JsonQuote(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<uint8_t>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", static_cast<int>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace pl
