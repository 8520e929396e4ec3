#include "paddle_like/optim/lr_schedule.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pl {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr int64_t kMaxExactStep = int64_t{1} << 24;  // floats carry integers exactly below this
constexpr int kMaxPoints = 64;

Status Bad(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("learning-rate schedule: ", field, " ", why));
}

Status CheckStep(const std::string& field, int64_t v, int64_t min) {
  if (v < min || v >= kMaxExactStep) {
    return Bad(field, absl::StrCat("must be in [", min, ", 2^24), got ", v));
  }
  return absl::OkStatus();
}

Status CheckFactor(const std::string& field, double v) {
  if (!(v >= 0) || !std::isfinite(v)) return Bad(field, absl::StrCat("must be a finite number >= 0, got ", v));
  return absl::OkStatus();
}

Status Validate(const LrSchedule& s) {
  switch (s.kind) {
    case LrSchedule::Kind::kConstant:
      break;
    case LrSchedule::Kind::kStep:
      PL_RETURN_IF_ERROR(CheckStep("step_size", s.step_size, 1));
      PL_RETURN_IF_ERROR(CheckFactor("gamma", s.gamma));
      break;
    case LrSchedule::Kind::kExponential:
      PL_RETURN_IF_ERROR(CheckFactor("gamma", s.gamma));
      break;
    case LrSchedule::Kind::kCosine:
      PL_RETURN_IF_ERROR(CheckStep("t_max", s.t_max, 1));
      PL_RETURN_IF_ERROR(CheckFactor("eta_min_factor", s.eta_min_factor));
      break;
    case LrSchedule::Kind::kPiecewise:
      if (s.points.empty() || s.points.size() > kMaxPoints) {
        return Bad("points", absl::StrCat("must hold 1 to ", kMaxPoints, " (step, factor) pairs, got ",
                                          s.points.size()));
      }
      for (size_t i = 0; i < s.points.size(); ++i) {
        PL_RETURN_IF_ERROR(CheckStep(absl::StrCat("points[", i, "].step"), s.points[i].first, 0));
        PL_RETURN_IF_ERROR(CheckFactor(absl::StrCat("points[", i, "].factor"), s.points[i].second));
        if (i > 0 && s.points[i].first <= s.points[i - 1].first) {
          return Bad("points", absl::StrCat("steps must ascend: ", s.points[i - 1].first, " then ",
                                            s.points[i].first));
        }
      }
      break;
    default:
      return Bad("kind", absl::StrCat(static_cast<int>(s.kind), " is not constant (0), step (1), exponential (2), "
                                      "cosine (3) or piecewise (4)"));
  }
  PL_RETURN_IF_ERROR(CheckStep("warmup_steps", s.warmup_steps, 0));
  return CheckFactor("warmup_factor", s.warmup_factor);
}

double Piecewise(const std::vector<std::pair<int64_t, double>>& points, int64_t k) {
  if (k <= points.front().first) return points.front().second;
  for (size_t i = 1; i < points.size(); ++i) {
    if (k <= points[i].first) {
      const auto& [k0, f0] = points[i - 1];
      const auto& [k1, f1] = points[i];
      return f0 + (f1 - f0) * static_cast<double>(k - k0) / static_cast<double>(k1 - k0);
    }
  }
  return points.back().second;
}

}  // namespace

double LrSchedule::Factor(int64_t k) const {
  if (k < 0) k = 0;
  double f = 1.0;
  switch (kind) {
    case Kind::kConstant:
      break;
    case Kind::kStep:
      f = std::pow(gamma, static_cast<double>(k / step_size));
      break;
    case Kind::kExponential:
      f = std::pow(gamma, static_cast<double>(k));
      break;
    case Kind::kCosine: {
      const double t = static_cast<double>(std::min(k, t_max)) / static_cast<double>(t_max);
      f = eta_min_factor + (1.0 - eta_min_factor) * (1.0 + std::cos(kPi * t)) / 2.0;
      break;
    }
    case Kind::kPiecewise:
      f = Piecewise(points, k);
      break;
  }
  if (k < warmup_steps) {
    f *= warmup_factor + (1.0 - warmup_factor) * static_cast<double>(k) / static_cast<double>(warmup_steps);
  }
  return f;
}

std::string LrSchedule::ToString() const {
  std::string out;
  switch (kind) {
    case Kind::kConstant:
      out = "constant";
      break;
    case Kind::kStep:
      out = absl::StrFormat("step(step_size=%d, gamma=%g)", step_size, gamma);
      break;
    case Kind::kExponential:
      out = absl::StrFormat("exponential(gamma=%g)", gamma);
      break;
    case Kind::kCosine:
      out = absl::StrFormat("cosine(t_max=%d, eta_min_factor=%g)", t_max, eta_min_factor);
      break;
    case Kind::kPiecewise: {
      out = "piecewise(";
      for (size_t i = 0; i < points.size(); ++i) {
        absl::StrAppend(&out, i ? ", " : "", absl::StrFormat("%d:%g", points[i].first, points[i].second));
      }
      out += ")";
      break;
    }
  }
  if (warmup_steps > 0) absl::StrAppend(&out, absl::StrFormat(" + warmup(%d from %g)", warmup_steps, warmup_factor));
  return out;
}

Status EncodeLrSchedule(const LrSchedule& s, OptimizerSpec* spec) {
  PL_RETURN_IF_ERROR(Validate(s));
  for (auto it = spec->hyper.begin(); it != spec->hyper.end();) {
    it = IsLrScheduleKey(it->first) ? spec->hyper.erase(it) : std::next(it);
  }
  if (s.is_constant()) return absl::OkStatus();
  auto& h = spec->hyper;
  h["lr.kind"] = static_cast<float>(static_cast<int>(s.kind));
  switch (s.kind) {
    case LrSchedule::Kind::kStep:
      h["lr.step_size"] = static_cast<float>(s.step_size);
      h["lr.gamma"] = static_cast<float>(s.gamma);
      break;
    case LrSchedule::Kind::kExponential:
      h["lr.gamma"] = static_cast<float>(s.gamma);
      break;
    case LrSchedule::Kind::kCosine:
      h["lr.t_max"] = static_cast<float>(s.t_max);
      h["lr.eta_min_factor"] = static_cast<float>(s.eta_min_factor);
      break;
    case LrSchedule::Kind::kPiecewise:
      h["lr.points"] = static_cast<float>(s.points.size());
      for (size_t i = 0; i < s.points.size(); ++i) {
        h[absl::StrCat("lr.point", i, ".step")] = static_cast<float>(s.points[i].first);
        h[absl::StrCat("lr.point", i, ".factor")] = static_cast<float>(s.points[i].second);
      }
      break;
    case LrSchedule::Kind::kConstant:
      break;
  }
  if (s.warmup_steps > 0) {
    h["lr.warmup_steps"] = static_cast<float>(s.warmup_steps);
    h["lr.warmup_factor"] = static_cast<float>(s.warmup_factor);
  }
  return absl::OkStatus();
}

StatusOr<LrSchedule> DecodeLrSchedule(const OptimizerSpec& spec) {
  LrSchedule s;
  int used = 0;
  auto get = [&](const std::string& key, bool required, double fallback) -> StatusOr<double> {
    auto it = spec.hyper.find(key);
    if (it == spec.hyper.end()) {
      if (required) return Bad(key, "is missing");
      return fallback;
    }
    ++used;
    return static_cast<double>(it->second);
  };
  auto as_step = [](double v) { return static_cast<int64_t>(std::llround(v)); };
  PL_ASSIGN_OR_RETURN(double kind, get("lr.kind", false, 0));
  s.kind = static_cast<LrSchedule::Kind>(static_cast<int>(kind));
  if (kind != std::floor(kind) || kind < 0 || kind > 4) {
    return Bad("lr.kind", absl::StrCat(kind, " is not constant (0), step (1), exponential (2), cosine (3) or "
                                       "piecewise (4)"));
  }
  const bool any = s.kind != LrSchedule::Kind::kConstant;
  switch (s.kind) {
    case LrSchedule::Kind::kStep: {
      PL_ASSIGN_OR_RETURN(double step_size, get("lr.step_size", true, 0));
      PL_ASSIGN_OR_RETURN(s.gamma, get("lr.gamma", true, 0));
      s.step_size = as_step(step_size);
      break;
    }
    case LrSchedule::Kind::kExponential: {
      PL_ASSIGN_OR_RETURN(s.gamma, get("lr.gamma", true, 0));
      break;
    }
    case LrSchedule::Kind::kCosine: {
      PL_ASSIGN_OR_RETURN(double t_max, get("lr.t_max", true, 0));
      PL_ASSIGN_OR_RETURN(s.eta_min_factor, get("lr.eta_min_factor", false, 0));
      s.t_max = as_step(t_max);
      break;
    }
    case LrSchedule::Kind::kPiecewise: {
      PL_ASSIGN_OR_RETURN(double n, get("lr.points", true, 0));
      if (n < 1 || n > kMaxPoints || n != std::floor(n)) return Bad("lr.points", absl::StrCat("is ", n));
      for (int i = 0; i < static_cast<int>(n); ++i) {
        PL_ASSIGN_OR_RETURN(double k, get(absl::StrCat("lr.point", i, ".step"), true, 0));
        PL_ASSIGN_OR_RETURN(double f, get(absl::StrCat("lr.point", i, ".factor"), true, 0));
        s.points.emplace_back(as_step(k), f);
      }
      break;
    }
    case LrSchedule::Kind::kConstant:
      break;
  }
  PL_ASSIGN_OR_RETURN(double warmup_steps, get("lr.warmup_steps", false, 0));
  PL_ASSIGN_OR_RETURN(s.warmup_factor, get("lr.warmup_factor", false, 0));
  s.warmup_steps = as_step(warmup_steps);
  int present = 0;
  for (const auto& [key, value] : spec.hyper) present += IsLrScheduleKey(key) ? 1 : 0;
  if (present != used) {
    for (const auto& [key, value] : spec.hyper) {
      if (!IsLrScheduleKey(key)) continue;
      OptimizerSpec probe;
      if (EncodeLrSchedule(s, &probe).ok() && probe.hyper.count(key) == 0) {
        return Bad(key, absl::StrCat("is not a key of the ", any ? s.ToString() : "constant", " schedule"));
      }
    }
  }
  PL_RETURN_IF_ERROR(Validate(s));
  return s;
}

}  // namespace pl
