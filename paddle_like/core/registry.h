// Registry: a table of named factories (models, and next optimizers and layers) that
// names everything it knows when asked for a name it does not, so `--model mpl` says
// "unknown model 'mpl' (known: cnn, ctr, mlp)". Entries are added by explicit
// Register calls from the code that owns the table, never by static initialisers
// (which need whole-archive linking and run in no defined order).
//
//   Registry<ModelFactory> models("model");
//   PL_RETURN_IF_ERROR(models.Register("mlp", MakeMlpModel, "two-layer perceptron"));
//   PL_ASSIGN_OR_RETURN(const ModelFactory* make, models.Find(name));
//
// Thread-safety: Register must finish before other threads use the registry; Find,
// Names and Help are then safe from any thread (they only read).
#ifndef PADDLE_LIKE_CORE_REGISTRY_H_
#define PADDLE_LIKE_CORE_REGISTRY_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "paddle_like/core/status.h"

namespace pl {

template <typename Factory>
class Registry {
 public:
  // `kind` names an entry in messages: "model", "optimizer", "layer".
  explicit Registry(std::string kind) : kind_(std::move(kind)) {}

  // ALREADY_EXISTS for a name registered before; INVALID_ARGUMENT for an empty one.
  Status Register(const std::string& name, Factory factory, std::string help = "") {
    if (name.empty()) return absl::InvalidArgumentError(absl::StrCat("a ", kind_, " needs a name"));
    if (entries_.count(name) != 0) {
      return absl::AlreadyExistsError(absl::StrCat(kind_, " '", name, "' is already registered"));
    }
    entries_.emplace(name, Entry{std::move(factory), std::move(help)});
    return absl::OkStatus();
  }

  // NOT_FOUND naming the known entries when `name` is not one of them.
  StatusOr<const Factory*> Find(absl::string_view name) const {
    auto it = entries_.find(std::string(name));
    if (it == entries_.end()) {
      return absl::NotFoundError(
          absl::StrCat("unknown ", kind_, " '", name, "' (known: ", absl::StrJoin(Names(), ", "), ")"));
    }
    return &it->second.factory;
  }

  // Sorted.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& [name, entry] : entries_) names.push_back(name);
    return names;
  }

  // "mlp: two-layer perceptron; cnn: ..." for --help texts.
  std::string Help() const {
    std::vector<std::string> parts;
    for (const auto& [name, entry] : entries_) {
      parts.push_back(entry.help.empty() ? name : absl::StrCat(name, " (", entry.help, ")"));
    }
    return absl::StrJoin(parts, ", ");
  }

 private:
  struct Entry {
    Factory factory;
    std::string help;
  };
  std::string kind_;
  std::map<std::string, Entry> entries_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_CORE_REGISTRY_H_
