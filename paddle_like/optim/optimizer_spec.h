// OptimizerSpec: which registered optimizer to run (its kind, a name) and with which
// hyper-parameters. The learning rate and the L2 weight decay are common to every
// optimizer; the others (momentum, betas, ...) are named by the optimizer's own
// definition (optimizer_registry.h) and take its defaults when not set.
//
//   OptimizerSpec adam{OptimizerKind::kAdam, /*learning_rate=*/1e-3f};
//   adam.Set("beta2", 0.99f);
//   PL_RETURN_IF_ERROR(ValidateOptimizerSpec(adam));  // update_rules.h
//
// Thread-safety: a value type; const methods may be called from any thread.
#ifndef PADDLE_LIKE_OPTIM_OPTIMIZER_SPEC_H_
#define PADDLE_LIKE_OPTIM_OPTIMIZER_SPEC_H_

#include <cstring>
#include <map>
#include <ostream>
#include <string>

namespace pl {

// The name of a registered optimizer ("sgd", "adam", ...). Constants name the
// built-ins; any other kind comes from ParseOptimizerKind (update_rules.h), or is made
// from a string literal. The name is not copied: it must outlive the kind.
class OptimizerKind {
 public:
  constexpr OptimizerKind() : name_("sgd") {}
  constexpr explicit OptimizerKind(const char* name) : name_(name) {}

  static const OptimizerKind kSGD;
  static const OptimizerKind kMomentum;
  static const OptimizerKind kAdagrad;
  static const OptimizerKind kAdam;

  const char* name() const { return name_; }
  friend bool operator==(OptimizerKind a, OptimizerKind b) { return std::strcmp(a.name_, b.name_) == 0; }
  friend bool operator!=(OptimizerKind a, OptimizerKind b) { return !(a == b); }
  friend std::ostream& operator<<(std::ostream& os, OptimizerKind k) { return os << k.name_; }

 private:
  const char* name_;
};

inline constexpr OptimizerKind OptimizerKind::kSGD{"sgd"};
inline constexpr OptimizerKind OptimizerKind::kMomentum{"momentum"};
inline constexpr OptimizerKind OptimizerKind::kAdagrad{"adagrad"};
inline constexpr OptimizerKind OptimizerKind::kAdam{"adam"};

struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::kSGD;
  float learning_rate = 0.01f;
  float weight_decay = 0.0f;           // L2, added to the gradient (every optimizer)
  // The kind's other hyper-parameters by name; one absent takes the kind's default.
  // Checked (names and ranges) by ValidateOptimizerSpec, not here.
  std::map<std::string, float> hyper;

  OptimizerSpec& Set(const std::string& name, float value) {
    hyper[name] = value;
    return *this;
  }
  // "adam(lr=0.001, beta1=0.9, beta2=0.999, epsilon=1e-08, wd=0)": every
  // hyper-parameter of the kind, defaults included, so equal settings print equal.
  std::string ToString() const;
};

}  // namespace pl

#endif  // PADDLE_LIKE_OPTIM_OPTIMIZER_SPEC_H_
