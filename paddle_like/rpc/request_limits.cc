#include "paddle_like/rpc/request_limits.h"

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"

namespace pl::rpc {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Fields that hold text rather than a name, by their name in any message.
size_t LimitOf(const FieldDescriptor& field) {
  static const absl::flat_hash_set<std::string>* text = new absl::flat_hash_set<std::string>{
      "reason", "why", "optimizer", "path"};
  return text->contains(field.name()) ? kMaxTextBytes : kMaxNameBytes;
}

Status TooLong(absl::string_view path, size_t length, size_t limit) {
  return absl::InvalidArgumentError(
      absl::StrCat("request field '", path, "' is ", length, " bytes, over its limit of ", limit));
}

Status Check(const Message& m, const std::string& prefix) {
  const Reflection* r = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);  // only the fields that are set
  for (const FieldDescriptor* f : fields) {
    const std::string name = prefix.empty() ? f->name() : absl::StrCat(prefix, ".", f->name());
    if (f->type() == FieldDescriptor::TYPE_STRING) {
      const size_t limit = LimitOf(*f);
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(m, f); ++i) {
          std::string scratch;
          const std::string& s = r->GetRepeatedStringReference(m, f, i, &scratch);
          if (s.size() > limit) return TooLong(absl::StrCat(name, "[", i, "]"), s.size(), limit);
        }
      } else {
        std::string scratch;
        const std::string& s = r->GetStringReference(m, f, &scratch);
        if (s.size() > limit) return TooLong(name, s.size(), limit);
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(m, f); ++i) {
          PL_RETURN_IF_ERROR(Check(r->GetRepeatedMessage(m, f, i), absl::StrCat(name, "[", i, "]")));
        }
      } else {
        PL_RETURN_IF_ERROR(Check(r->GetMessage(m, f), name));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

Status CheckStringLengths(const Message& request) { return Check(request, ""); }

Status CheckNameLength(absl::string_view path, absl::string_view name) {
  return name.size() > kMaxNameBytes ? TooLong(path, name.size(), kMaxNameBytes) : absl::OkStatus();
}

}  // namespace pl::rpc
